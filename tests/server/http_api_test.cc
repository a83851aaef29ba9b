// The OpenAI endpoints over real loopback HTTP against the fake engine: non-streaming
// completions and chat, models, health, metrics, auth, and every bad-input answer.
#include <gtest/gtest.h>

#include <set>

#include "common/timing.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

TEST(HttpApi, HealthAndModels) {
  TestServer ts;
  auto health = ts.get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body), json::object());

  auto models = ts.get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  json body = json::parse(models->body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "fake-model");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(body["data"][0]["owned_by"], "llmserve");
  EXPECT_EQ(body["data"][0]["max_model_len"], 256);
}

TEST(HttpApi, ServedModelNameOverride) {
  ServerConfig config;
  config.served_model_name = "my-alias";
  TestServer ts(FakeEngineOptions{}, config);
  EXPECT_EQ(json::parse(ts.get("/v1/models")->body)["data"][0]["id"], "my-alias");
  auto ok = ts.post("/v1/completions", {{"model", "my-alias"}, {"prompt", "x"}});
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["model"], "my-alias");
  expect_api_error(ts.post("/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}}), 404,
                   "model", {"fake-model"});
}

TEST(HttpApi, CompletionStringPrompt) {
  TestServer ts;
  const double before = now_seconds();
  auto r = ts.post("/v1/completions",
                   {{"model", "fake-model"}, {"prompt", "Hello"}, {"max_tokens", 5}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
  json body = json::parse(r->body);
  const std::vector<int32_t> ids = fake_encode("Hello", /*add_bos=*/true);
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_GT(body["created"].get<int64_t>(), 1600000000);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], expected_fake_text(ids, 5));
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 6}, {"completion_tokens", 5},
                                 {"total_tokens", 11},
                                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  // The engine got the BOS-prefixed tokens and an arrival time taken by the HTTP thread.
  const EngineRequest got = ts.fake().last_request();
  EXPECT_EQ(got.prompt_token_ids, ids);
  EXPECT_GE(got.arrival_time, before);
  EXPECT_LE(got.arrival_time, now_seconds());
}

TEST(HttpApi, CompletionDefaultMaxTokensFillsTheContext) {
  // Like vLLM (not OpenAI's 16): without max_tokens a completion may use the rest of the
  // context window (max_model_len 256 here).
  TestServer ts;
  auto r = ts.post("/v1/completions", {{"prompt", "abc"}});
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  const std::vector<int32_t> ids = fake_encode("abc", true);
  EXPECT_EQ(body["usage"]["completion_tokens"], 256 - ids.size());
  EXPECT_EQ(ts.fake().last_request().params.max_tokens, 256 - static_cast<int>(ids.size()));
  EXPECT_EQ(body["choices"][0]["text"], expected_fake_text(ids, 256 - ids.size()));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST(HttpApi, CompletionTokenPromptShapes) {
  TestServer ts;
  const std::vector<int32_t> ids = {40, 41, 42};
  for (const json& prompt : {json(ids), json::array({json(ids)}), json::array({"abc"})}) {
    auto r = ts.post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}});
    ASSERT_EQ(r->status, 200) << prompt.dump() << " -> " << r->body;
    json body = json::parse(r->body);
    const std::vector<int32_t> want_ids =
        prompt[0].is_string() ? fake_encode("abc", true) : ids;
    EXPECT_EQ(ts.fake().last_request().prompt_token_ids, want_ids);
    EXPECT_EQ(body["choices"][0]["text"], expected_fake_text(want_ids, 4));
    EXPECT_EQ(body["usage"]["prompt_tokens"], want_ids.size());
  }
}

TEST(HttpApi, SamplingParamsReachTheEngine) {
  TestServer ts;
  auto r = ts.post("/v1/completions",
                   json::parse(R"({"prompt": "p", "max_tokens": 3, "temperature": 0.5,
                                   "top_p": 0.9, "top_k": 40, "seed": 1234,
                                   "stop": ["xy", "zz"], "stop_token_ids": [7],
                                   "ignore_eos": true, "user": "someone", "min_p": 0.1,
                                   "presence_penalty": 0.5, "frequency_penalty": -1.5,
                                   "repetition_penalty": 1.3, "min_tokens": 2})"));
  ASSERT_EQ(r->status, 200) << r->body;
  const SamplingParams p = ts.fake().last_request().params;
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -1.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.3f);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_EQ(p.max_tokens, 3);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.seed, 1234u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"xy", "zz"}));
  EXPECT_EQ(p.stop_token_ids, std::vector<int32_t>{7});
  EXPECT_TRUE(p.ignore_eos);
}

TEST(HttpApi, StopStringStopTokenAndEos) {
  TestServer ts;
  const std::vector<int32_t> ids = fake_encode("Hello", true);
  const std::string full = expected_fake_text(ids, 10);

  // Stop string: the text before its first occurrence, finish_reason "stop".
  auto r = ts.post("/v1/completions",
                   {{"prompt", "Hello"}, {"max_tokens", 10}, {"stop", full.substr(3, 2)}});
  json body = json::parse(r->body);
  EXPECT_EQ(body["choices"][0]["text"], full.substr(0, 3));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");

  // Stop token id: generation ends at it (3 tokens generated, 2 letters of text).
  r = ts.post("/v1/completions", {{"prompt", "Hello"},
                                  {"max_tokens", 10},
                                  {"stop_token_ids", {static_cast<int>(full[2]) + 3}}});
  body = json::parse(r->body);
  EXPECT_EQ(body["choices"][0]["text"], full.substr(0, 2));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);

  // EOS (the fake ends prompts ending in '.' after 4 tokens), and ignore_eos.
  const std::vector<int32_t> end_ids = fake_encode("End.", true);
  r = ts.post("/v1/completions", {{"prompt", "End."}, {"max_tokens", 10}});
  body = json::parse(r->body);
  EXPECT_EQ(body["choices"][0]["text"], expected_fake_text(end_ids, 3));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  r = ts.post("/v1/completions", {{"prompt", "End."}, {"max_tokens", 10}, {"ignore_eos", true}});
  body = json::parse(r->body);
  EXPECT_EQ(body["choices"][0]["text"], expected_fake_text(end_ids, 10));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST(HttpApi, ChatCompletion) {
  TestServer ts;
  json req = json::parse(R"({"model": "fake-model", "max_tokens": 6,
      "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                                {"type": "text", "text": "there"}]}]})");
  auto r = ts.post("/v1/chat/completions", req);
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  const std::vector<int32_t> ids =
      fake_encode("system: Be brief.\nuser: Hi\nthere\nassistant:", /*add_bos=*/true);
  EXPECT_EQ(ts.fake().last_request().prompt_token_ids, ids);
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], expected_fake_text(ids, 6));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
  EXPECT_EQ(body["usage"]["total_tokens"], ids.size() + 6);

  // add_generation_prompt = false drops the trailing "assistant:".
  req["add_generation_prompt"] = false;
  ASSERT_EQ(ts.post("/v1/chat/completions", req)->status, 200);
  EXPECT_EQ(ts.fake().last_request().prompt_token_ids,
            fake_encode("system: Be brief.\nuser: Hi\nthere\n", true));
}

TEST(HttpApi, NChoicesWithIndexesSummedUsageAndPerSampleSeeds) {
  TestServer ts;
  const int before = ts.fake().num_added();
  auto r = ts.post("/v1/completions",
                   {{"prompt", "Hello"}, {"max_tokens", 5}, {"n", 3}, {"seed", 100}});
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  const std::vector<int32_t> ids = fake_encode("Hello", true);
  ASSERT_EQ(body["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    // The fake engine is deterministic per prompt, so every sample has the same text here;
    // distinct samples on a real model are checked in real_engine_test.cc.
    EXPECT_EQ(body["choices"][i]["text"], expected_fake_text(ids, 5));
    EXPECT_EQ(body["choices"][i]["finish_reason"], "length");
  }
  // The prompt is counted once, the completions of all samples summed (as vLLM does).
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", ids.size()}, {"completion_tokens", 15},
                                 {"total_tokens", ids.size() + 15},
                                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_EQ(ts.fake().num_added(), before + 3);
  EXPECT_EQ(ts.fake().last_request().params.seed, 102u);  // sample i: seed + i

  // Chat: n messages.
  r = ts.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                       {"max_tokens", 2},
                                       {"n", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  body = json::parse(r->body);
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["message"]["role"], "assistant");
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);

  // A request too long for the context with n = 2 is rejected as a whole (by the server's
  // length check, before any sample is queued); nothing stays queued.
  r = ts.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 300}, {"n", 2}});
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(wait_for([&] { return ts.fake().stats().num_free_blocks ==
                                    ts.fake().stats().num_total_blocks; }));
}

TEST(HttpApi, ChatDefaultMaxTokensFillsTheContext) {
  TestServer ts;  // max_model_len 256
  auto r = ts.post("/v1/chat/completions",
                   {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  const size_t prompt_len = fake_encode("user: Hi\nassistant:", true).size();
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 256 - prompt_len);
}

struct BadCase {
  const char* path;
  std::string body;  // raw text
  int status;
  std::optional<std::string> param;
  std::vector<std::string> message_has;
};

TEST(HttpApi, BadInputGivesOpenAIErrors) {
  const std::string long_prompt = json(std::vector<int32_t>(300, 5)).dump();
  const std::vector<BadCase> cases = {
      {"/v1/completions", "{not json", 400, std::nullopt, {"JSON"}},
      {"/v1/completions", "[1, 2]", 400, std::nullopt, {"object"}},
      {"/v1/completions", "", 400, std::nullopt, {}},
      {"/v1/completions", "{}", 400, "prompt", {"prompt", "required"}},
      {"/v1/completions", R"({"prompt": 123})", 400, "prompt", {"123"}},
      {"/v1/completions", R"({"prompt": []})", 400, "prompt", {"empty"}},
      {"/v1/completions", R"({"prompt": ["a", "b"]})", 400, "prompt", {"2 prompts"}},
      {"/v1/completions", R"({"prompt": [1, "x"]})", 400, "prompt", {"prompt[1]"}},
      {"/v1/completions", R"({"prompt": [5, 100000]})", 400, "prompt", {"100000"}},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "abc"})", 400, "max_tokens",
       {"max_tokens", "abc"}},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens", {"0"}},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -5})", 400, "max_tokens", {"-5"}},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 1e12})", 400, "max_tokens", {}},
      {"/v1/completions", R"({"prompt": "x", "temperature": -1})", 400, "temperature", {"-1"}},
      {"/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400, "temperature",
       {"hot"}},
      {"/v1/completions", R"({"prompt": "x", "temperature": NaN})", 400, "*", {}},
      {"/v1/completions", R"({"prompt": "x", "temperature": 1e999})", 400, "*", {}},
      {"/v1/completions", R"({"prompt": "x", "top_p": 0})", 400, "top_p", {"0"}},
      {"/v1/completions", R"({"prompt": "x", "top_p": 1.5})", 400, "top_p", {"1.5"}},
      {"/v1/completions", R"({"prompt": "x", "top_k": -2})", 400, "top_k", {"-2"}},
      {"/v1/completions", R"({"prompt": "x", "stop": 5})", 400, "stop", {}},
      {"/v1/completions", R"({"prompt": "x", "stop_token_ids": [999]})", 400, "stop_token_ids",
       {"999"}},
      {"/v1/completions", R"({"prompt": "x", "stream": "yes"})", 400, "stream", {"yes"}},
      {"/v1/completions", R"({"prompt": "x", "stream_options": {"include_usage": true}})", 400,
       "stream_options", {}},
      {"/v1/completions", R"({"prompt": "x", "n": 0})", 400, "n", {"0"}},
      {"/v1/completions", R"({"prompt": "x", "n": 17})", 400, "n", {"17", "16"}},
      {"/v1/completions", R"({"prompt": "x", "n": -1})", 400, "n", {"-1"}},
      {"/v1/completions", R"({"prompt": "x", "n": 1e10})", 400, "n", {}},
      {"/v1/completions", R"({"prompt": "x", "n": "two"})", 400, "n", {"two"}},
      {"/v1/completions", R"({"prompt": "x", "min_p": 1.5})", 400, "min_p", {"1.5"}},
      {"/v1/completions", R"({"prompt": "x", "min_p": -0.5})", 400, "min_p", {"-0.5"}},
      {"/v1/completions", R"({"prompt": "x", "min_p": "a"})", 400, "min_p", {}},
      {"/v1/completions", R"({"prompt": "x", "presence_penalty": 2.5})", 400,
       "presence_penalty", {"2.5"}},
      {"/v1/completions", R"({"prompt": "x", "presence_penalty": -3})", 400,
       "presence_penalty", {"-3"}},
      {"/v1/completions", R"({"prompt": "x", "frequency_penalty": 2.01})", 400,
       "frequency_penalty", {"2.01"}},
      {"/v1/completions", R"({"prompt": "x", "frequency_penalty": 1e999})", 400, "*", {}},
      {"/v1/completions", R"({"prompt": "x", "repetition_penalty": 0})", 400,
       "repetition_penalty", {"0"}},
      {"/v1/completions", R"({"prompt": "x", "repetition_penalty": -1})", 400,
       "repetition_penalty", {"-1"}},
      {"/v1/completions", R"({"prompt": "x", "min_tokens": -1})", 400, "min_tokens", {"-1"}},
      {"/v1/completions", R"({"prompt": "x", "min_tokens": 5, "max_tokens": 4})", 400,
       "min_tokens", {"5", "4"}},
      {"/v1/completions", R"({"prompt": "x", "min_tokens": 1.5})", 400, "min_tokens", {}},
      {"/v1/completions", R"({"prompt": "x", "min_tokens": 300})", 400, "min_tokens",
       {"300"}},
      {"/v1/completions", R"({"prompt": "x", "echo": 1})", 400, "echo", {}},
      {"/v1/completions", R"({"prompt": "x", "logprobs": 21})", 400, "logprobs", {"21"}},
      {"/v1/completions", R"({"prompt": "x", "logprobs": -1})", 400, "logprobs", {"-1"}},
      {"/v1/completions", R"({"prompt": "x", "logprobs": "5"})", 400, "logprobs", {}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400,
       "top_logprobs", {"logprobs"}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
           "top_logprobs": 21})", 400, "top_logprobs", {"21"}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", 400, "logprobs",
       {}},
      {"/v1/completions", R"({"prompt": "x", "model": 7})", 400, "model", {}},
      {"/v1/completions", R"({"prompt": "x", "model": "gpt-4"})", 404, "model", {"gpt-4"}},
      {"/v1/completions", R"({"prompt": )" + long_prompt + "}", 400, "prompt",
       {"300", "256"}},
      {"/v1/completions", R"({"prompt": "hello", "max_tokens": 251})", 400, "max_tokens",
       {"251", "256"}},
      {"/v1/chat/completions", "{}", 400, "messages", {"messages", "required"}},
      {"/v1/chat/completions", R"({"messages": "hi"})", 400, "messages", {"hi"}},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages", {"empty"}},
      {"/v1/chat/completions", R"({"messages": [{"content": "x"}]})", 400, "messages",
       {"role"}},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})", 400,
       "messages", {"content"}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400,
       "messages", {"image_url"}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": "x"})", 400,
       "max_completion_tokens", {}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "top_p": 2})", 400, "top_p", {"2"}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1000})", 400,
       "max_tokens", {"1000", "256"}},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "model": "nope"})", 404, "model",
       {"nope"}},
  };
  TestServer ts;
  for (const BadCase& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + c.body.substr(0, 120));
    expect_api_error(ts.post_raw(c.path, c.body), c.status, c.param, c.message_has);
  }
  EXPECT_EQ(ts.fake().num_added(), 0) << "a rejected request reached the engine";
  // And the server still works afterwards.
  EXPECT_EQ(ts.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}})->status, 200);
}

TEST(HttpApi, EchoPrependsThePromptToEveryChoice) {
  TestServer ts;
  const std::vector<int32_t> ids = fake_encode("Hello", true);
  const std::string completion = expected_fake_text(ids, 4);
  // Text prompt: echoed as sent (without the BOS the server adds), n choices each.
  auto r = ts.post("/v1/completions",
                   {{"prompt", "Hello"}, {"max_tokens", 4}, {"echo", true}, {"n", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  ASSERT_EQ(body["choices"].size(), 2u);
  for (const json& c : body["choices"]) EXPECT_EQ(c["text"], "Hello" + completion);
  // Usage is not changed by echo: the prompt is not generated text.
  EXPECT_EQ(body["usage"]["completion_tokens"], 8);
  EXPECT_EQ(body["usage"]["prompt_tokens"], ids.size());
  // echo: false (and absent) leave the text alone.
  r = ts.post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 4}, {"echo", false}});
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], completion);

  // Token-id prompt: its detokenization (BOS skipped like any special token in output text,
  // shown with skip_special_tokens false).
  const std::vector<int32_t> tok_prompt = fake_encode("Hi", true);
  r = ts.post("/v1/completions", {{"prompt", tok_prompt}, {"max_tokens", 2}, {"echo", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"],
            "Hi" + expected_fake_text(tok_prompt, 2));
  r = ts.post("/v1/completions", {{"prompt", tok_prompt}, {"max_tokens", 2}, {"echo", true},
                                  {"skip_special_tokens", false}});
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"],
            "<s>Hi" + expected_fake_text(tok_prompt, 2));

  // Stop strings cut only the completion, never the echoed prompt (which contains "ll").
  r = ts.post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 4}, {"echo", true},
                                  {"stop", completion.substr(2, 1)}});
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], "Hello" + completion.substr(0, 2));
  EXPECT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "stop");

  // Streaming: the prompt opens the first chunk of each choice, and only that one.
  StreamReply s = post_stream(ts, "/v1/completions",
                              {{"prompt", "Hello"}, {"max_tokens", 4}, {"echo", true}, {"n", 2},
                               {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(s.status, 200);
  EXPECT_TRUE(s.done_is_last);
  std::vector<std::string> texts(2);
  std::vector<int> first_seen(2, 0);
  int usage_chunks = 0;
  for (const json& c : s.chunks) {
    if (!c["usage"].is_null()) {
      ++usage_chunks;
      EXPECT_TRUE(c["choices"].empty());
      EXPECT_EQ(c["usage"]["completion_tokens"], 8);
      continue;
    }
    ASSERT_EQ(c["choices"].size(), 1u);
    const int i = c["choices"][0]["index"];
    const std::string t = c["choices"][0]["text"];
    EXPECT_EQ(t.rfind("Hello", 0) == 0, first_seen[i] == 0) << t;
    ++first_seen[i];
    texts[i] += t;
  }
  EXPECT_EQ(usage_chunks, 1);
  for (const std::string& t : texts) EXPECT_EQ(t, "Hello" + completion);
  // Chat echo (vLLM) only prepends a last message that has the reply's role (assistant).
  r = ts.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                       {"max_tokens", 2}, {"echo", true}});
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(HttpApi, UserIsAcceptedAndIgnored) {
  TestServer ts;
  auto plain = ts.post("/v1/completions", {{"prompt", "Hey"}, {"max_tokens", 3}});
  auto with_user =
      ts.post("/v1/completions", {{"prompt", "Hey"}, {"max_tokens", 3}, {"user", "user-1234"}});
  ASSERT_EQ(with_user->status, 200) << with_user->body;
  EXPECT_EQ(json::parse(with_user->body)["choices"], json::parse(plain->body)["choices"]);
  auto chat = ts.post("/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"user", ""}});
  EXPECT_EQ(chat->status, 200) << chat->body;
  expect_api_error(ts.post("/v1/completions", {{"prompt", "x"}, {"user", 42}}), 400, "user",
                   {"user", "42"});
  expect_api_error(ts.post("/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                            {"user", {{"id", 1}}}}),
                   400, "user", {"user"});
}

TEST(HttpApi, UnknownPathAndWrongMethod) {
  TestServer ts;
  expect_api_error(ts.get("/v1/nothing"), 404, std::nullopt, {"/v1/nothing"});
  expect_api_error(ts.post_raw("/nope", "{}"), 404, std::nullopt, {});
  auto r = ts.get("/v1/completions");
  expect_api_error(r, 405, std::nullopt, {"GET", "POST"});
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  expect_api_error(ts.post_raw("/health", "{}"), 405, std::nullopt, {});
}

TEST(HttpApi, ApiKey) {
  ServerConfig config;
  config.api_key = "sekret";
  TestServer ts(FakeEngineOptions{}, config);
  const json req = {{"prompt", "x"}, {"max_tokens", 1}};
  expect_api_error(ts.post("/v1/completions", req), 401, std::nullopt, {});
  httplib::Headers wrong = {{"Authorization", "Bearer nope"}};
  expect_api_error(ts.client()->Post("/v1/completions", wrong, req.dump(), "application/json"),
                   401, std::nullopt, {});
  httplib::Headers right = {{"Authorization", "Bearer sekret"}};
  auto ok = ts.client()->Post("/v1/completions", right, req.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(ts.get("/health")->status, 200);  // only /v1/* is protected
}

/// The value of the sample line starting with `prefix + " "`, or NaN.
double metric_value(const std::string& page, const std::string& prefix) {
  const size_t pos = page.find("\n" + prefix + " ");
  if (pos == std::string::npos) return std::nan("");
  return std::stod(page.substr(pos + prefix.size() + 2));
}

TEST(HttpApi, Metrics) {
  TestServer ts;
  ASSERT_EQ(ts.post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 5}})->status, 200);
  ASSERT_EQ(ts.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Yo"}}}},
                                            {"max_tokens", 3}})
                ->status,
            200);
  auto r = ts.get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const std::string page = "\n" + r->body;
  const std::string l = "{model_name=\"fake-model\"}";
  for (const char* gauge :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"}) {
    EXPECT_NE(page.find(std::string("\n# HELP ") + gauge + " "), std::string::npos) << gauge;
    EXPECT_NE(page.find(std::string("\n# TYPE ") + gauge + " gauge\n"), std::string::npos);
    EXPECT_EQ(metric_value(page, gauge + l), 0.0) << gauge;  // all idle now
  }
  const int prompt_tokens = 6 + static_cast<int>(fake_encode("user: Yo\nassistant:", true).size());
  EXPECT_NE(page.find("\n# TYPE vllm:prompt_tokens_total counter\n"), std::string::npos);
  EXPECT_EQ(metric_value(page, "vllm:prompt_tokens_total" + l), prompt_tokens);
  EXPECT_EQ(metric_value(page, "vllm:generation_tokens_total" + l), 8);
  EXPECT_EQ(metric_value(page, "vllm:num_preemptions_total" + l), 0);
  for (const std::string h :
       {"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"}) {
    EXPECT_NE(page.find("\n# TYPE " + h + " histogram\n"), std::string::npos) << h;
    EXPECT_EQ(metric_value(page, h + "_count" + l), 2) << h;
    EXPECT_EQ(metric_value(page, h + "_bucket{model_name=\"fake-model\",le=\"+Inf\"}"), 2) << h;
    EXPECT_GE(metric_value(page, h + "_sum" + l), 0) << h;
  }
}

TEST(HttpServerLifecycle, SecondServerOnABusyPortFailsToBind) {
  TestServer ts;
  auto engine = std::make_unique<AsyncEngine>(std::make_unique<FakeEngine>());
  ServerConfig config;
  config.port = ts.port();
  HttpServer second(*engine, config);
  Status st = second.bind();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(std::to_string(ts.port())), std::string::npos) << st.message();
  ServerConfig bad;
  bad.port = 70000;
  HttpServer third(*engine, bad);
  EXPECT_EQ(third.listen().code(), StatusCode::kInvalidArgument);
}

TEST(HttpServerLifecycle, StopBeforeListenReturnsAtOnce) {
  auto engine = std::make_unique<AsyncEngine>(std::make_unique<FakeEngine>());
  ServerConfig config;
  config.port = 0;
  HttpServer server(*engine, config);
  server.stop();
  EXPECT_TRUE(server.listen().ok());
}

}  // namespace
}  // namespace llmserve::testing
