// The effect of every field issue 13 added, on the real engine (stories260K, greedy): a
// honoured field must change the output the way its spec says, so that a 200 can never mean
// "quietly dropped". logit_bias -100 on the greedy token removes it and +100 forces a token
// (and logprobs reflect the bias, as OpenAI's do); allowed_token_ids confines the output;
// truncate_prompt_tokens shortens usage.prompt_tokens; continuous_usage_stats puts usage in
// every chunk; prompt_logprobs equal the echo + logprobs values bit for bit; and so on.
#include <gtest/gtest.h>

#include <cmath>

#include "../engine/reference_cases.h"
#include "engine/llm_engine.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

class FieldEffects : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = stories_http_engine();
    ASSERT_NE(e, nullptr);
    server_ = new TestServer(std::move(e), any_port());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  /// POST /v1/completions {"prompt": kPrompt, "temperature": 0, ...extra}; the parsed body.
  static json complete(json extra, int expect_status = 200) {
    json body = {{"prompt", kPrompt}, {"temperature", 0}};
    body.update(extra);
    auto r = server_->post("/v1/completions", body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, expect_status) << r->body;
    return json::parse(r->body);
  }
  /// The generated token ids, read back through return_tokens_as_token_ids + logprobs.
  static std::vector<int32_t> ids_of(const json& reply) {
    std::vector<int32_t> ids;
    for (const json& t : reply["choices"][0]["logprobs"]["tokens"]) {
      const std::string s = t;
      EXPECT_EQ(s.rfind("token_id:", 0), 0u) << s;
      ids.push_back(std::stoi(s.substr(9)));
    }
    return ids;
  }

  static constexpr const char* kPrompt = "Once upon a time, there was a little girl";
  static TestServer* server_;
};

TestServer* FieldEffects::server_ = nullptr;

TEST_F(FieldEffects, LogitBiasBansAndForcesTokensAndLogprobsReflectIt) {
  const json ids_only = {{"logprobs", 0}, {"return_tokens_as_token_ids", true}};
  json base = ids_only;
  base["max_tokens"] = 6;
  const std::vector<int32_t> greedy = ids_of(complete(base));
  ASSERT_EQ(greedy.size(), 6u);
  // -100 on the greedy first token: a different first token.
  json ban = base;
  ban["logit_bias"] = {{std::to_string(greedy[0]), -100}};
  const std::vector<int32_t> banned = ids_of(complete(ban));
  ASSERT_FALSE(banned.empty());
  EXPECT_NE(banned[0], greedy[0]);
  for (int32_t id : banned) EXPECT_NE(id, greedy[0]);
  // +100 on one token: every token is that token, with logprob ~0 (the bias is in them).
  json force = base;
  force["logit_bias"] = {{"300", 100}};
  const json forced = complete(force);
  for (int32_t id : ids_of(forced)) EXPECT_EQ(id, 300);
  for (const json& lp : forced["choices"][0]["logprobs"]["token_logprobs"])
    EXPECT_GT(lp.get<double>(), -1e-3);
  // Chat honours it too.
  auto r = server_->post("/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                          {"temperature", 0}, {"max_tokens", 3}, {"logprobs", true},
                          {"return_tokens_as_token_ids", true},
                          {"logit_bias", {{"300", 100}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  for (const json& c : json::parse(r->body)["choices"][0]["logprobs"]["content"])
    EXPECT_EQ(c["token"], "token_id:300");
}

TEST_F(FieldEffects, AllowedTokenIdsConfineTheOutput) {
  const json reply = complete({{"max_tokens", 8}, {"logprobs", 2},
                               {"return_tokens_as_token_ids", true},
                               {"allowed_token_ids", {300, 301, 302}}});
  const std::vector<int32_t> ids = ids_of(reply);
  ASSERT_EQ(ids.size(), 8u);
  for (int32_t id : ids) EXPECT_TRUE(id >= 300 && id <= 302) << id;
  // The alternatives are the allowed tokens too (the mask is in the logprobs).
  for (const json& top : reply["choices"][0]["logprobs"]["top_logprobs"])
    for (auto it = top.begin(); it != top.end(); ++it) {
      const int id = std::stoi(it.key().substr(9));
      EXPECT_TRUE(id >= 300 && id <= 302) << it.key();
    }
}

TEST_F(FieldEffects, TruncatePromptTokensKeepsTheLastTokens) {
  const json full = complete({{"max_tokens", 1}});
  const int prompt_tokens = full["usage"]["prompt_tokens"];
  ASSERT_GT(prompt_tokens, 5);
  const json cut = complete({{"max_tokens", 1}, {"truncate_prompt_tokens", 4}});
  EXPECT_EQ(cut["usage"]["prompt_tokens"], 4);
  // Longer than the prompt: nothing to cut.
  EXPECT_EQ(complete({{"max_tokens", 1}, {"truncate_prompt_tokens", 400}})["usage"]
                    ["prompt_tokens"],
            prompt_tokens);
  // The kept tokens are the last ones: the same as sending them as token ids.
  auto tok = server_->post("/tokenize", {{"prompt", kPrompt}});
  ASSERT_TRUE(tok);
  std::vector<int32_t> ids = json::parse(tok->body)["tokens"];
  const std::vector<int32_t> last4(ids.end() - 4, ids.end());
  auto r = server_->post("/v1/completions", {{"prompt", last4}, {"temperature", 0},
                                             {"max_tokens", 5}});
  ASSERT_TRUE(r);
  EXPECT_EQ(complete({{"max_tokens", 5}, {"truncate_prompt_tokens", 4}})["choices"][0]["text"],
            json::parse(r->body)["choices"][0]["text"]);
  complete({{"truncate_prompt_tokens", 513}}, 400);
}

TEST_F(FieldEffects, ContinuousUsageStatsPutUsageInEveryChunk) {
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = {{"temperature", 0}, {"max_tokens", 6}, {"n", 2}, {"stream", true},
                 {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
    if (std::string(path) == "/v1/completions") body["prompt"] = kPrompt;
    else body["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
    const StreamReply reply = post_stream(*server_, path, body);
    ASSERT_EQ(reply.status, 200);
    ASSERT_GE(reply.chunks.size(), 3u);
    int last = -1;
    for (const json& chunk : reply.chunks) {
      ASSERT_TRUE(chunk["usage"].is_object()) << chunk.dump();
      const int done = chunk["usage"]["completion_tokens"];
      EXPECT_GE(done, last);
      EXPECT_EQ(chunk["usage"]["total_tokens"].get<int>(),
                chunk["usage"]["prompt_tokens"].get<int>() + done);
      last = done;
    }
    EXPECT_EQ(reply.chunks.back()["usage"]["completion_tokens"], 12);  // 2 x 6
  }
}

TEST_F(FieldEffects, PromptLogprobsEqualEchoLogprobsAndRankTheToken) {
  const json vllm = complete({{"max_tokens", 1}, {"prompt_logprobs", 2}});
  const json echo = complete({{"max_tokens", 1}, {"echo", true}, {"logprobs", 2}});
  const json& pl = vllm["choices"][0]["prompt_logprobs"];
  const json& lp = echo["choices"][0]["logprobs"]["token_logprobs"];
  const int n = vllm["usage"]["prompt_tokens"];
  ASSERT_EQ(pl.size(), static_cast<size_t>(n));
  EXPECT_TRUE(pl[0].is_null());
  auto tok = server_->post("/tokenize", {{"prompt", kPrompt}});
  const std::vector<int32_t> ids = json::parse(tok->body)["tokens"];
  for (int i = 1; i < n; ++i) {
    const json& entry = pl[i];
    const std::string key = std::to_string(ids[i]);
    ASSERT_TRUE(entry.contains(key)) << entry.dump();
    // The same float as the echo path computes (one engine computation, two shapes).
    EXPECT_EQ(entry[key]["logprob"].get<double>(), lp[i].get<double>()) << i;
    const int rank = entry[key]["rank"];
    EXPECT_GE(rank, 1);
    // Top-2 alternatives carry ranks 1 and 2; the prompt token joins them when it is not
    // among them (2 or 3 entries).
    EXPECT_TRUE(entry.size() == 2 || entry.size() == 3) << entry.dump();
    // Every alternative has rank 1 or 2, ordered against the prompt token by its logprob.
    const double token_lp = entry[key]["logprob"];
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      EXPECT_TRUE(it.value()["decoded_token"].is_string());
      if (it.key() == key) continue;
      const int alt_rank = it.value()["rank"];
      const double alt_lp = it.value()["logprob"];
      EXPECT_TRUE(alt_rank == 1 || alt_rank == 2) << entry.dump();
      if (alt_rank < rank) {
        EXPECT_GE(alt_lp, token_lp) << entry.dump();
      } else {
        EXPECT_LE(alt_lp, token_lp) << entry.dump();
      }
    }
    EXPECT_EQ(entry.size(), rank <= 2 ? 2u : 3u) << entry.dump();
  }
  // Chat: at the top level of the response (vLLM's shape); refused with streaming.
  auto r = server_->post("/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                          {"max_tokens", 1}, {"prompt_logprobs", 0}});
  ASSERT_TRUE(r);
  const json chat = json::parse(r->body);
  EXPECT_EQ(chat["prompt_logprobs"].size(), chat["usage"]["prompt_tokens"].get<size_t>());
  complete({{"prompt_logprobs", 1}, {"stream", true}}, 400);
}

TEST_F(FieldEffects, IncludeStopStrNPredictAndChatEcho) {
  const std::string text = complete({{"max_tokens", 24}})["choices"][0]["text"];
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(6, 4);
  const std::string cut = complete({{"max_tokens", 24}, {"stop", stop}})["choices"][0]["text"];
  const std::string kept = complete({{"max_tokens", 24}, {"stop", stop},
                                     {"include_stop_str_in_output", true}})["choices"][0]["text"];
  EXPECT_EQ(kept, cut + stop);
  EXPECT_EQ(text.rfind(kept, 0), 0u);
  // llama.cpp's n_predict is max_tokens.
  EXPECT_EQ(complete({{"n_predict", 5}})["usage"]["completion_tokens"], 5);
  // Chat echo (vLLM): a continued assistant message comes back with its start.
  auto r = server_->post("/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}},
                                        {{"role", "assistant"}, {"content", "Once upon"}}}},
                          {"add_generation_prompt", false},
                          {"continue_final_message", true},
                          {"echo", true},
                          {"temperature", 0},
                          {"max_tokens", 4}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string content = json::parse(r->body)["choices"][0]["message"]["content"];
  EXPECT_EQ(content.rfind("Once upon", 0), 0u) << content;
  EXPECT_GT(content.size(), std::string("Once upon").size());
}

}  // namespace
}  // namespace llmserve::testing
