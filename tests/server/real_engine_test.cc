// The HTTP server in front of the real engine (stories260K): concurrent clients, streamed
// and not, must get exactly llama2.c's greedy continuations; a client that hangs up
// mid-stream must get its KV blocks back into the pool; too-long prompts give 400.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "../engine/reference_cases.h"
#include "engine/llm_engine.h"
#include "prometheus_text.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

std::unique_ptr<LLMEngine> stories_engine(bool gguf, int32_t num_kv_blocks = 0) {
  EngineConfig c;
  c.model_path = gguf ? stories_gguf() : stories_bin();
  if (!gguf) c.tokenizer_path = stories_tokenizer();
  c.scheduler.max_model_len = 512;
  c.scheduler.check_invariants = true;
  c.cache.num_kv_blocks = num_kv_blocks;
  c.num_threads = 2;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(e).value();
}

ServerConfig port0() {
  ServerConfig c;
  c.port = 0;  // any free port
  return c;
}

double gauge(const TestServer& ts, const std::string& name) {
  auto r = ts.get("/metrics");
  if (!r || r->status != 200) return -1;
  const size_t pos = r->body.find("\n" + name + "{");
  if (pos == std::string::npos) return -1;
  const size_t sp = r->body.find("} ", pos);
  return std::stod(r->body.substr(sp + 2));
}

bool wait_until(const std::function<bool()>& pred) {
  for (int i = 0; i < 400; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class RealEngineHttp : public ::testing::TestWithParam<bool> {};

TEST_P(RealEngineHttp, ConcurrentClientsGetRunCGreedyOutputs) {
  // A small pool as well, so the concurrent requests also preempt each other.
  TestServer ts(stories_engine(GetParam(), /*num_kv_blocks=*/40), port0());
  const auto cases = load_reference_cases();
  // Every case twice: once streamed, once not; the prompt as text when it is not empty.
  std::vector<std::string> got(cases.size() * 2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < got.size(); ++i) {
    clients.emplace_back([&, i] {
      const ReferenceCase& rc = cases[i % cases.size()];
      const bool stream = i >= cases.size();
      json body = {{"max_tokens", rc.generated_ids.size()}, {"temperature", 0},
                   {"stop_token_ids", {1}}, {"stream", stream}};
      if (rc.prompt.empty()) body["prompt"] = rc.prompt_ids;
      else body["prompt"] = rc.prompt;
      if (stream) {
        StreamReply s = post_stream(ts, "/v1/completions", body);
        EXPECT_EQ(s.status, 200);
        EXPECT_TRUE(s.done_is_last);
        for (const json& c : s.chunks) got[i] += c["choices"][0]["text"].get<std::string>();
      } else {
        auto r = ts.post("/v1/completions", body);
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        const json j = json::parse(r->body);
        got[i] = j["choices"][0]["text"].get<std::string>();
        EXPECT_EQ(j["usage"]["prompt_tokens"], rc.prompt_ids.size());
        EXPECT_EQ(j["usage"]["completion_tokens"], rc.generated_ids.size());
      }
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < got.size(); ++i) {
    const ReferenceCase& rc = cases[i % cases.size()];
    EXPECT_EQ(rc.prompt + got[i], rc.text) << "client " << i;
  }
  EXPECT_TRUE(wait_until([&] { return gauge(ts, "vllm:kv_cache_usage_perc") == 0.0; }));
  EXPECT_GT(gauge(ts, "vllm:num_preemptions_total"), 0);
}

TEST_P(RealEngineHttp, DisconnectMidStreamFreesBlocks) {
  TestServer ts(stories_engine(GetParam()), port0());
  auto client = ts.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", "Once upon a time"}, {"max_tokens", 500}, {"ignore_eos", true},
                  {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  double usage_while_streaming = -1;
  int pieces = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    if (++pieces < 3) return true;
    usage_while_streaming = gauge(ts, "vllm:kv_cache_usage_perc");
    return false;  // hang up mid-stream
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  client->send(req, res, error);
  client.reset();
  EXPECT_GT(usage_while_streaming, 0.0);
  EXPECT_TRUE(wait_until([&] { return gauge(ts, "vllm:kv_cache_usage_perc") == 0.0; }));
  EXPECT_TRUE(wait_until([&] { return gauge(ts, "vllm:num_requests_running") == 0.0; }));
}

TEST_P(RealEngineHttp, NSeededSamplesAreDistinctAndReproducible) {
  TestServer ts(stories_engine(GetParam()), port0());
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1.0},
                    {"seed", 7}, {"n", 4}, {"ignore_eos", true}};
  auto texts = [&](const json& body) {
    auto r = ts.post("/v1/completions", body);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    std::vector<std::string> out;
    if (!r || r->status != 200) return out;
    const json b = json::parse(r->body);
    EXPECT_EQ(b["usage"]["completion_tokens"], 24 * body["n"].get<int>());
    for (size_t i = 0; i < b["choices"].size(); ++i) {
      EXPECT_EQ(b["choices"][i]["index"], i);
      out.push_back(b["choices"][i]["text"].get<std::string>());
    }
    return out;
  };
  const std::vector<std::string> a = texts(req);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(std::set<std::string>(a.begin(), a.end()).size(), 4u)
      << "samples with seeds 7..10 should differ";
  EXPECT_EQ(texts(req), a) << "same seed, same request: same samples";
  // Streaming gives the same samples, each under its index.
  json sreq = req;
  sreq["stream"] = true;
  StreamReply s = post_stream(ts, "/v1/completions", sreq);
  ASSERT_EQ(s.status, 200);
  std::vector<std::string> streamed(4);
  for (const json& c : s.chunks)
    for (const json& ch : c["choices"])
      streamed[ch["index"].get<int>()] += ch["text"].get<std::string>();
  EXPECT_EQ(streamed, a);
  EXPECT_TRUE(wait_until([&] { return gauge(ts, "vllm:kv_cache_usage_perc") == 0.0; }));
}

TEST_P(RealEngineHttp, LogprobsOfGreedyTokensAreTheTopAlternative) {
  TestServer ts(stories_engine(GetParam()), port0());
  auto post = [&](const char* path, const json& body) {
    auto r = ts.post(path, body);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    return json::parse(r ? r->body : "{}");
  };
  // Completions: logprobs 3 -> per token its logprob and 3 alternatives, the greedy token
  // being the most likely one; the chosen logprob is the same when 0 alternatives are asked.
  const json c3 = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8},
                                           {"temperature", 0}, {"logprobs", 3}});
  const json& lp = c3["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u) << lp.dump();
  ASSERT_EQ(lp["token_logprobs"].size(), 8u);
  ASSERT_EQ(lp["top_logprobs"].size(), 8u);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u);
    double best = -1e9;
    for (const auto& [tok, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_DOUBLE_EQ(lp["token_logprobs"][i].get<double>(), best);
    EXPECT_LE(best, 0.0);
    EXPECT_EQ(lp["text_offset"][i].get<size_t>(), joined.size());
    joined += lp["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(joined, c3["choices"][0]["text"]);
  const json c0 = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8},
                                           {"temperature", 0}, {"logprobs", 0}});
  EXPECT_EQ(c0["choices"][0]["logprobs"]["token_logprobs"], lp["token_logprobs"]);
  // Chat: content entries with top_logprobs.
  const json chat = post("/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                          {"max_tokens", 5}, {"temperature", 0}, {"logprobs", true},
                          {"top_logprobs", 2}});
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), chat["usage"]["completion_tokens"].get<size_t>());
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 2u);
    EXPECT_EQ(e["token"], e["top_logprobs"][0]["token"]);
    EXPECT_DOUBLE_EQ(e["logprob"].get<double>(), e["top_logprobs"][0]["logprob"].get<double>());
    EXPECT_TRUE(e["bytes"].is_array());
  }
  // Streaming: the logprobs of all chunks together are the non-streamed ones.
  StreamReply s = post_stream(ts, "/v1/completions",
                              {{"prompt", "Once upon a time"}, {"max_tokens", 8},
                               {"temperature", 0}, {"logprobs", 3}, {"stream", true}});
  ASSERT_EQ(s.status, 200);
  json streamed = json::array();
  for (const json& c : s.chunks)
    for (const json& ch : c["choices"])
      if (!ch["logprobs"].is_null())
        for (const json& v : ch["logprobs"]["token_logprobs"]) streamed.push_back(v);
  EXPECT_EQ(streamed, lp["token_logprobs"]);
  // No logprobs asked: null.
  const json none = post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}});
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
}

TEST_P(RealEngineHttp, TooLongRequestsAre400WithTheNumbers) {
  TestServer ts(stories_engine(GetParam()), port0());
  std::vector<int32_t> long_prompt(600, 400);
  long_prompt[0] = 1;
  auto r = ts.post("/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 1}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("600"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("512"), std::string::npos) << r->body;
  r = ts.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 510}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("515"), std::string::npos) << r->body;  // 5 + 510 tokens asked
  r = ts.post("/v1/completions", {{"prompt", {1, 9999}}, {"max_tokens", 1}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("9999"), std::string::npos) << r->body;
  EXPECT_EQ(gauge(ts, "vllm:kv_cache_usage_perc"), 0.0);
}

TEST_P(RealEngineHttp, MetricsCountEveryRequestAndToken) {
  TestServer ts(stories_engine(GetParam(), /*num_kv_blocks=*/40), port0());
  struct Ask {
    const char* prompt;
    int max_tokens;
    bool stream;
  };
  const std::vector<Ask> asks = {{"Once upon a time", 30, false}, {"Lily", 1, false},
                                 {"The cat", 12, true},           {"One day", 50, true},
                                 {"Tom had a", 7, false},         {"She", 2, true}};
  const int n = static_cast<int>(asks.size());
  std::vector<int> prompt_tokens(n, -1), completion_tokens(n, -1);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      json body = {{"prompt", asks[i].prompt}, {"max_tokens", asks[i].max_tokens},
                   {"temperature", 0}, {"stream", asks[i].stream}};
      json usage;
      if (asks[i].stream) {
        body["stream_options"] = {{"include_usage", true}};
        StreamReply s = post_stream(ts, "/v1/completions", body);
        ASSERT_EQ(s.status, 200);
        ASSERT_FALSE(s.chunks.empty());
        usage = s.chunks.back()["usage"];
      } else {
        auto r = ts.post("/v1/completions", body);
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        usage = json::parse(r->body)["usage"];
      }
      prompt_tokens[i] = usage["prompt_tokens"].get<int>();
      completion_tokens[i] = usage["completion_tokens"].get<int>();
    });
  }
  for (auto& t : clients) t.join();
  int sum_prompt = 0, sum_completion = 0, num_multi = 0, num_gaps = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(completion_tokens[i], 1) << i;
    sum_prompt += prompt_tokens[i];
    sum_completion += completion_tokens[i];
    num_multi += completion_tokens[i] > 1;
    num_gaps += completion_tokens[i] - 1;  // one token per engine output
  }

  auto r = ts.get("/metrics");
  ASSERT_TRUE(r);
  const PrometheusPage page = parse_prometheus_text(r->body);
  ASSERT_TRUE(page.errors.empty()) << page.error_text() << r->body;
  const std::string m = "{model_name=\"" + ts.server().served_model_name() + "\"}";
  for (const char* h : {"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                        "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                        "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens",
                        "vllm:request_generation_tokens"}) {
    EXPECT_EQ(page.value(std::string(h) + "_count" + m), n) << h;
    EXPECT_GE(page.value(std::string(h) + "_sum" + m), 0) << h;
  }
  const std::string success = "vllm:request_success_total{model_name=\"" +
                              ts.server().served_model_name() + "\",finished_reason=";
  EXPECT_EQ(page.value(success + "\"stop\"}") + page.value(success + "\"length\"}"), n);
  EXPECT_EQ(page.value(success + "\"abort\"}"), 0);
  EXPECT_EQ(page.value("vllm:generation_tokens_total" + m), sum_completion);
  EXPECT_EQ(page.value("vllm:request_generation_tokens_sum" + m), sum_completion);
  EXPECT_EQ(page.value("vllm:prompt_tokens_total" + m), sum_prompt);
  EXPECT_EQ(page.value("vllm:request_prompt_tokens_sum" + m), sum_prompt);
  EXPECT_EQ(page.value("vllm:time_per_output_token_seconds_count" + m), num_multi);
  EXPECT_EQ(page.value("vllm:inter_token_latency_seconds_count" + m), num_gaps);
  EXPECT_GT(page.value("vllm:inter_token_latency_seconds_sum" + m), 0);
  // Per-step engine counters: every prompt token prefilled once (no preemption with the
  // default pool), and each request's first token comes from its prefill step, so decode
  // steps computed completion - 1 tokens per request.
  EXPECT_EQ(page.value("llmserve:scheduled_prefill_tokens_total" + m), sum_prompt);
  EXPECT_EQ(page.value("llmserve:scheduled_decode_tokens_total" + m), sum_completion - n);
  EXPECT_GT(page.value("llmserve:engine_steps_total" + m), 0);
  EXPECT_EQ(page.value("llmserve:kv_blocks_used" + m), 0);
  const double kv_util = page.value("llmserve:kv_utilization" + m);
  EXPECT_GE(kv_util, 0.0);
  EXPECT_LE(kv_util, 1.0);
}

TEST_P(RealEngineHttp, PrefixCacheHitsShowInUsageAndMetricsAndChangeNothing) {
  // The same ~40-token prompt three times, then once with a cache_salt and once with llama.cpp's
  // cache_prompt false: the reply is the same greedy text every time; usage's
  // prompt_tokens_details.cached_tokens counts the whole blocks reused (never the last token),
  // and the metrics count queries and hits in tokens.
  TestServer ts(stories_engine(GetParam()), port0());
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends.";
  auto ask = [&](json extra) {
    json body = {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
    body.update(extra);
    auto r = ts.post("/v1/completions", body);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    return r ? json::parse(r->body) : json::object();
  };
  const json first = ask(json::object());
  const int p = first["usage"]["prompt_tokens"].get<int>();
  ASSERT_GT(p, 32);
  const int whole = (p - 1) / 16 * 16;
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const json second = ask(json::object());
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], whole);
  const json salted = ask({{"cache_salt", "tenant-a"}});
  EXPECT_EQ(salted["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const json uncached = ask({{"cache_prompt", false}});
  EXPECT_EQ(uncached["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  for (const json* r : {&second, &salted, &uncached})
    EXPECT_EQ((*r)["choices"][0]["text"], first["choices"][0]["text"]);
  auto m = ts.get("/metrics");
  ASSERT_TRUE(m);
  const PrometheusPage page = parse_prometheus_text(m->body);
  const std::string l = "{model_name=\"" + ts.server().served_model_name() + "\"}";
  EXPECT_EQ(page.value("vllm:prefix_cache_queries_total" + l), 3 * p);  // cache_prompt false: none
  EXPECT_EQ(page.value("vllm:prefix_cache_hits_total" + l), whole);
  EXPECT_GT(page.value("llmserve:kv_blocks_cached" + l), 0);
  EXPECT_EQ(page.value("vllm:kv_cache_usage_perc" + l), 0);  // cached blocks count as free
  EXPECT_EQ(page.value("llmserve:kv_blocks_used" + l), 0);
}

TEST_P(RealEngineHttp, CacheSaltWithoutPrefixCachingIs400) {
  EngineConfig c;
  c.model_path = GetParam() ? stories_gguf() : stories_bin();
  if (!GetParam()) c.tokenizer_path = stories_tokenizer();
  c.scheduler.max_model_len = 512;
  c.cache.enable_prefix_caching = false;
  auto e = LLMEngine::create(c);
  ASSERT_TRUE(e.ok());
  TestServer ts(std::move(*e), port0());
  auto r = ts.post("/v1/completions", {{"prompt", "Lily"}, {"max_tokens", 2}, {"cache_salt", "a"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "cache_salt") << r->body;
  r = ts.post("/v1/completions", {{"prompt", "Lily"}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

// Stop strings on real tokens: a stop string made of the 2 characters before and the 2 after
// a token boundary of the greedy continuation T (boundaries from the logprobs' text_offset)
// cuts T before its first occurrence, streamed or not, for every choice of n = 2 and with
// include_usage (one usage chunk, last). A stop string that only begins at T's very end is
// held back while streaming and flushed when max_tokens ends the request.
TEST_P(RealEngineHttp, StopStringsAcrossTokenBoundariesStreamedAndNot) {
  TestServer ts(stories_engine(GetParam()), port0());
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0},
                     {"ignore_eos", true}};
  json greedy_req = base;
  greedy_req["logprobs"] = 0;
  auto r = ts.post("/v1/completions", greedy_req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json greedy = json::parse(r->body)["choices"][0];
  const std::string full = greedy["text"];
  const json offsets = greedy["logprobs"]["text_offset"];
  ASSERT_EQ(offsets.size(), 40u);
  ASSERT_GT(full.size(), 20u);

  auto streamed_texts = [&](const json& req, int n, std::vector<std::string>* finish) {
    StreamReply s = post_stream(ts, "/v1/completions", req);
    EXPECT_EQ(s.status, 200);
    EXPECT_TRUE(s.done_is_last);
    std::vector<std::string> texts(n);
    finish->assign(n, "");
    int usage_chunks = 0;
    for (size_t k = 0; k < s.chunks.size(); ++k) {
      const json& c = s.chunks[k];
      if (c.contains("usage") && !c["usage"].is_null()) {
        ++usage_chunks;
        EXPECT_EQ(k + 1, s.chunks.size()) << "usage must come in the last chunk only";
        EXPECT_TRUE(c["choices"].empty());
        continue;
      }
      for (const json& ch : c["choices"]) {
        const int i = ch["index"];
        EXPECT_TRUE((*finish)[i].empty()) << "a chunk after the finishing one";
        texts[i] += ch["text"].get<std::string>();
        if (!ch["finish_reason"].is_null()) (*finish)[i] = ch["finish_reason"];
      }
    }
    EXPECT_EQ(usage_chunks, req.contains("stream_options") ? 1 : 0);
    return texts;
  };

  int checked = 0;
  for (size_t k = 3; k + 3 < offsets.size() && checked < 6; k += 5) {
    const size_t boundary = offsets[k].get<size_t>();
    if (boundary < 2 || boundary + 2 > full.size()) continue;
    const std::string stop = full.substr(boundary - 2, 4);
    const std::string want = full.substr(0, full.find(stop));
    SCOPED_TRACE("stop '" + stop + "'");
    json req = base;
    req["stop"] = {"\x01never", stop};
    r = ts.post("/v1/completions", req);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json whole = json::parse(r->body)["choices"][0];
    EXPECT_EQ(whole["text"], want);
    EXPECT_EQ(whole["finish_reason"], "stop");
    req["stream"] = true;
    req["n"] = 2;
    req["stream_options"] = {{"include_usage", true}};
    std::vector<std::string> finish;
    const std::vector<std::string> texts = streamed_texts(req, 2, &finish);
    EXPECT_EQ(texts, std::vector<std::string>(2, want));
    EXPECT_EQ(finish, std::vector<std::string>(2, "stop"));
    ++checked;
  }
  EXPECT_GE(checked, 4);

  // Never completed: the last 2 characters of T start the stop string; streaming holds them
  // back until max_tokens ends the request, then sends them.
  json req = base;
  req["stop"] = full.substr(full.size() - 2) + "\x01";
  req["stream"] = true;
  std::vector<std::string> finish;
  const std::vector<std::string> texts = streamed_texts(req, 1, &finish);
  EXPECT_EQ(texts[0], full);
  EXPECT_EQ(finish[0], "length");
  EXPECT_TRUE(wait_until([&] { return gauge(ts, "vllm:kv_cache_usage_perc") == 0.0; }));
}

TEST_P(RealEngineHttp, EchoReturnsThePromptTextThenTheCompletion) {
  TestServer ts(stories_engine(GetParam()), port0());
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};
  auto text_of = [&](const json& req) {
    auto r = ts.post("/v1/completions", req);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
  };
  const std::string completion = text_of(base);
  json echo = base;
  echo["echo"] = true;
  EXPECT_EQ(text_of(echo), "Once upon a time" + completion);
  // A token-id prompt echoes its detokenization (the /detokenize text minus the BOS).
  auto tok = ts.post("/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_TRUE(tok && tok->status == 200);
  const json ids = json::parse(tok->body)["tokens"];
  ASSERT_EQ(ids[0], 1);  // BOS
  echo["prompt"] = ids;
  EXPECT_EQ(text_of(echo), "Once upon a time" + completion);
}

TEST_P(RealEngineHttp, EchoWithLogprobsScoresThePromptLikeGeneratedTokens) {
  TestServer ts(stories_engine(GetParam()), port0());
  auto tok = ts.post("/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_TRUE(tok && tok->status == 200);
  const std::vector<int32_t> prompt = json::parse(tok->body)["tokens"];
  // Generate 4 greedy tokens with their logprobs...
  auto gen = ts.post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 4},
                                         {"temperature", 0}, {"ignore_eos", true},
                                         {"logprobs", 2}});
  ASSERT_TRUE(gen && gen->status == 200) << (gen ? gen->body : "");
  const json glp = json::parse(gen->body)["choices"][0]["logprobs"];
  ASSERT_EQ(glp["tokens"].size(), 4u);
  // ...then score prompt + those tokens with echo: the prompt part of the logprobs repeats
  // what generation reported for the same tokens at the same positions (the forward pass is
  // batch- and chunk-invariant, so prefill rows equal decode rows bit for bit).
  // The generated ids, by re-tokenizing prompt + completion text (greedy output is fixed, so
  // this either always or never round-trips; the assertion below says which).
  const std::string completion = json::parse(gen->body)["choices"][0]["text"];
  auto all = ts.post("/tokenize", {{"prompt", "Once upon a time" + completion}});
  ASSERT_TRUE(all && all->status == 200);
  const std::vector<int32_t> scored = json::parse(all->body)["tokens"];
  ASSERT_EQ(scored.size(), prompt.size() + 4) << "the completion re-tokenizes differently";
  auto echo = ts.post("/v1/completions", {{"prompt", scored}, {"max_tokens", 1},
                                          {"temperature", 0}, {"echo", true}, {"logprobs", 2}});
  ASSERT_TRUE(echo && echo->status == 200) << (echo ? echo->body : "");
  const json elp = json::parse(echo->body)["choices"][0]["logprobs"];
  ASSERT_EQ(elp["tokens"].size(), scored.size() + 1);  // prompt entries, then the new token
  EXPECT_TRUE(elp["token_logprobs"][0].is_null());
  EXPECT_TRUE(elp["top_logprobs"][0].is_null());
  for (size_t i = 1; i < scored.size(); ++i) {
    EXPECT_TRUE(elp["token_logprobs"][i].is_number()) << i;
    EXPECT_LE(elp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(elp["top_logprobs"][i].size(), 2u) << i;
  }
  for (size_t k = 0; k < 4; ++k) {
    const size_t pos = prompt.size() + k;
    EXPECT_EQ(elp["tokens"][pos], glp["tokens"][k]) << k;
    EXPECT_EQ(elp["token_logprobs"][pos], glp["token_logprobs"][k]) << k;
    EXPECT_EQ(elp["top_logprobs"][pos], glp["top_logprobs"][k]) << k;
  }
  // text_offset indexes into the text, prompt first: the BOS ("<s>", not in the text) at 0
  // with length 0, every other token where its string is.
  const std::string text = json::parse(echo->body)["choices"][0]["text"];
  EXPECT_EQ(elp["tokens"][0], GetParam() ? "<s>" : "\n<s>\n");  // the BOS piece
  int64_t offset = 0;
  for (size_t i = 0; i < elp["tokens"].size(); ++i) {
    EXPECT_EQ(elp["text_offset"][i], offset) << i;
    if (i == 0) continue;
    const std::string t = elp["tokens"][i];
    EXPECT_EQ(text.substr(offset, t.size()), t) << i;
    offset += static_cast<int64_t>(t.size());
  }
  EXPECT_EQ(offset, static_cast<int64_t>(text.size()));
}

// The QA case: echo + logprobs of a prompt string. The BOS the server adds is the first
// token but not in the text: text_offset indexes into "hippo and", the BOS at 0 with length 0
// (vLLM counts the 3 characters of "<s>" there). Streamed: the same offsets. Token-id prompt
// with skip_special_tokens false: the echoed text holds the BOS piece, and so do the offsets.
TEST_P(RealEngineHttp, EchoLogprobsTextOffsetIndexesIntoTheText) {
  TestServer ts(stories_engine(GetParam()), port0());
  const json body = {{"prompt", "hi"}, {"max_tokens", 3}, {"logprobs", 1}, {"echo", true},
                     {"temperature", 0}};
  auto r = ts.post("/v1/completions", body);
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const json choice = json::parse(r->body)["choices"][0];
  EXPECT_EQ(choice["text"], "hippo and");
  // The BOS piece: "<s>" in the GGUF vocabulary, "\n<s>\n" in llama2.c's tokenizer.bin.
  const std::string bos = GetParam() ? "<s>" : "\n<s>\n";
  EXPECT_EQ(choice["logprobs"]["tokens"], json({bos, "h", "i", "pp", "o", " and"}));
  EXPECT_EQ(choice["logprobs"]["text_offset"], json({0, 0, 1, 2, 4, 5}));

  json streamed_body = body;
  streamed_body["stream"] = true;
  StreamReply s = post_stream(ts, "/v1/completions", streamed_body);
  ASSERT_EQ(s.status, 200);
  json offsets = json::array();
  std::string text;
  for (const json& c : s.chunks) {
    if (c["choices"].empty()) continue;
    text += c["choices"][0]["text"].get<std::string>();
    if (c["choices"][0]["logprobs"].is_object())
      for (const json& o : c["choices"][0]["logprobs"]["text_offset"]) offsets.push_back(o);
  }
  EXPECT_EQ(text, "hippo and");
  EXPECT_EQ(offsets, json({0, 0, 1, 2, 4, 5}));

  auto tok = ts.post("/tokenize", {{"prompt", "hi"}});
  ASSERT_TRUE(tok && tok->status == 200);
  json ids_body = body;
  ids_body["prompt"] = json::parse(tok->body)["tokens"];
  ids_body["skip_special_tokens"] = false;
  r = ts.post("/v1/completions", ids_body);
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const json raw = json::parse(r->body)["choices"][0];
  EXPECT_EQ(raw["text"], bos + "hippo and");
  const int n = static_cast<int>(bos.size());
  EXPECT_EQ(raw["logprobs"]["text_offset"], json({0, n, n + 1, n + 2, n + 4, n + 5}));
}

INSTANTIATE_TEST_SUITE_P(Formats, RealEngineHttp, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "gguf" : "bin"; });

}  // namespace
}  // namespace llmserve::testing
