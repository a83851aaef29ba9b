// Chat templates and /tokenize, /detokenize through HTTP with the real engine (stories260K):
// the server renders messages with the requested Jinja template exactly as Python Jinja2 did
// (../shared/testdata/chat_templates/reference_renderings.json), tokenizes the rendering with
// special tokens parsed and none added, and reports template errors as 400.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/llm_engine.h"
#include "server_test_util.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::testing {
namespace {

std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }

std::unique_ptr<LLMEngine> stories_engine() {
  EngineConfig c;
  c.model_path = shared("models/stories260K/stories260K.gguf");
  c.scheduler.max_model_len = 512;
  c.cache.num_kv_blocks = 64;
  c.num_threads = 1;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(e).value();
}

std::unique_ptr<Tokenizer> stories_tokenizer() {
  auto t = load_tokenizer_from_path(shared("models/stories260K/stories260K.gguf"));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

ServerConfig with_template(const std::string& name) {
  ServerConfig c;
  c.port = 0;
  if (!name.empty()) c.chat_template = shared("testdata/chat_templates/" + name + ".jinja");
  return c;
}

json reference_cases() {
  std::ifstream in(shared("testdata/chat_templates/reference_renderings.json"));
  return json::parse(in)["cases"];
}

/// Every reference case rendered by the server (through /tokenize with messages) gives the
/// ids of the reference rendering: byte-identical text, same tokenization.
TEST(ServerChatTemplate, TokenizeMatchesReferenceRenderings) {
  const json cases = reference_cases();
  ASSERT_GT(cases.size(), 0u);
  std::map<std::string, std::vector<json>> by_template;
  for (const json& c : cases) by_template[c["template"].get<std::string>()].push_back(c);
  int checked = 0;
  for (const auto& [name, list] : by_template) {
    TestServer ts(stories_engine(), with_template(name));
    const auto tok_owner = stories_tokenizer();
    const Tokenizer& tok = *tok_owner;
    for (const json& c : list) {
      // The server fills bos/eos from the model's tokenizer: only cases rendered with the
      // same strings are comparable.
      if (c["bos_token"] != tok.piece(tok.bos_id()) || c["eos_token"] != tok.piece(tok.eos_id()))
        continue;
      SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>());
      json body = {{"messages", c["messages"]},
                   {"add_generation_prompt", c["add_generation_prompt"]}};
      auto r = ts.post("/tokenize", body);
      ASSERT_TRUE(r);
      if (c.contains("error")) {
        EXPECT_EQ(r->status, 400);
        EXPECT_NE(r->body.find(c["error"].get<std::string>()), std::string::npos) << r->body;
        ++checked;
        continue;
      }
      ASSERT_EQ(r->status, 200) << r->body;
      EncodeOptions opt;
      opt.parse_special = true;
      const auto want = tok.encode(c["expected"].get<std::string>(), opt);
      EXPECT_EQ(json::parse(r->body)["tokens"].get<std::vector<int32_t>>(), want);
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

TEST(ServerChatTemplate, ChatCompletionUsesTheTemplateAndReportsItsErrors) {
  // Gemma's template raises for a system message.
  TestServer ts(stories_engine(), with_template("google-gemma-2-2b-it"));
  json body = {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", "Hi"}}}},
               {"max_tokens", 4}};
  auto r = ts.post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  expect_api_error(r, 400, std::nullopt, {"System role not supported"});
  body["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
  r = ts.post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json out = json::parse(r->body);
  // Gemma's rendering of one user turn + generation prompt, tokenized by the server.
  auto t = ts.post("/tokenize", {{"messages", body["messages"]}});
  ASSERT_TRUE(t);
  EXPECT_EQ(out["usage"]["prompt_tokens"], json::parse(t->body)["count"]);
  // continue_final_message with add_generation_prompt is contradictory.
  body["continue_final_message"] = true;
  r = ts.post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  expect_api_error(r, 400, "continue_final_message", {"continue_final_message"});
}

TEST(ServerTokenize, PromptAndDetokenizeRoundTrip) {
  TestServer ts(stories_engine(), with_template(""));
  const auto tok_owner = stories_tokenizer();
  const Tokenizer& tok = *tok_owner;
  auto r = ts.post("/tokenize", {{"prompt", "Once upon a time"}, {"return_token_strs", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json out = json::parse(r->body);
  const auto ids = out["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok.encode("Once upon a time", /*add_bos=*/true));
  EXPECT_EQ(ids.front(), tok.bos_id());
  EXPECT_EQ(out["count"], ids.size());
  EXPECT_EQ(out["max_model_len"], 512);
  ASSERT_EQ(out["token_strs"].size(), ids.size());
  EXPECT_EQ(out["token_strs"][0], tok.piece(ids[0]));
  // add_special_tokens false: no BOS.
  r = ts.post("/tokenize", {{"prompt", "Once upon a time"}, {"add_special_tokens", false}});
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["tokens"].get<std::vector<int32_t>>(),
            std::vector<int32_t>(ids.begin() + 1, ids.end()));
  // /detokenize gives the text back (special tokens kept, as vLLM).
  r = ts.post("/detokenize", {{"tokens", std::vector<int32_t>(ids.begin() + 1, ids.end())}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["prompt"], "Once upon a time");
  // Bad input: 400 naming the field.
  expect_api_error(ts.post("/detokenize", {{"tokens", {1, 512}}}), 400, "tokens", {"512"});
  expect_api_error(ts.post("/detokenize", {{"tokens", "abc"}}), 400, "tokens", {"tokens"});
  expect_api_error(ts.post("/tokenize", {{"prompt", 5}}), 400, "prompt", {"prompt"});
  expect_api_error(ts.post("/tokenize", json::object()), 400, "prompt", {"prompt"});
  expect_api_error(ts.post("/tokenize", {{"prompt", "x"}, {"model", "other"}}), 404, "model",
                   {"other"});
  expect_api_error(ts.post("/tokenize", {{"messages", "hi"}}), 400, "messages", {"messages"});
}

}  // namespace
}  // namespace llmserve::testing

namespace llmserve::testing {
namespace {

TEST(ServerCompletions, AddSpecialTokensAndTypeChecks) {
  TestServer ts(stories_engine(), with_template(""));
  const auto tok = stories_tokenizer();
  // add_special_tokens false: the prompt has no BOS, so its usage is one token shorter.
  auto with = ts.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1}});
  auto without = ts.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1},
                                             {"add_special_tokens", false}});
  ASSERT_TRUE(with && without);
  ASSERT_EQ(with->status, 200) << with->body;
  ASSERT_EQ(without->status, 200) << without->body;
  const size_t n = tok->encode("Once upon a time", /*add_bos=*/true).size();
  EXPECT_EQ(json::parse(with->body)["usage"]["prompt_tokens"], n);
  EXPECT_EQ(json::parse(without->body)["usage"]["prompt_tokens"], n - 1);
  expect_api_error(ts.post("/v1/completions", {{"prompt", "x"}, {"add_special_tokens", 1}}), 400,
                   "add_special_tokens", {"add_special_tokens"});
  expect_api_error(ts.post("/v1/completions", {{"prompt", "x"}, {"skip_special_tokens", "no"}}),
                   400, "skip_special_tokens", {"skip_special_tokens"});
}

}  // namespace
}  // namespace llmserve::testing
