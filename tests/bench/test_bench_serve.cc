// bench serve against the real engine behind llmserve's HTTP server on a free port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "bench/http_client.h"
#include "bench/metrics.h"
#include "bench/multi_turn.h"
#include "bench/workload.h"
#include "engine/llm_engine.h"
#include "prometheus_text.h"
#include "server_test_util.h"

namespace llmserve::bench {
namespace {

std::unique_ptr<LLMEngine> stories_engine() {
  EngineConfig c;
  c.model_path = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.scheduler.max_model_len = 512;
  c.num_threads = 2;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(e).value();
}

/// Random stories260K prompts (BOS 1, specials 0-2 avoided) arriving at `rate` per second.
std::vector<BenchRequest> stories_workload(const RandomDatasetOptions& shape, double rate) {
  VocabInfo vocab;  // stories260K: 512 tokens, BOS 1
  vocab.special_ids = {0, 1, 2};
  auto reqs = make_random_dataset(shape, vocab);
  EXPECT_TRUE(reqs.ok());
  if (!reqs.ok()) return {};
  EXPECT_TRUE(assign_arrivals(*reqs, {rate, 1.0, shape.seed}).ok());
  return *reqs;
}

/// Options that send to `ts`.
ServeOptions options_for(const llmserve::testing::TestServer& ts) {
  ServeOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(ts.port());
  o.timeout_s = 60;
  return o;
}

TEST(BenchServe, UrlParsing) {
  auto a = parse_completions_url("http://127.0.0.1:8000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->base, "http://127.0.0.1:8000");
  EXPECT_EQ(a->path, "/v1/completions");
  EXPECT_EQ(parse_completions_url("http://h:1/v1/")->path, "/v1/completions");
  EXPECT_EQ(parse_completions_url("http://h:1/x/v1/completions")->path, "/x/v1/completions");
  EXPECT_FALSE(parse_completions_url("127.0.0.1:8000").ok());
}

TEST(BenchServe, StreamsTheWorkloadAndMeasuresClientSide) {
  ServerConfig sc;
  sc.port = 0;
  llmserve::testing::TestServer ts(stories_engine(), sc);
  const std::vector<BenchRequest> reqs = stories_workload({6, 24, 12, 0.5, 2}, 100.0);
  ServeOptions o = options_for(ts);
  o.max_concurrency = 3;
  auto run = run_over_http(reqs, o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  int64_t want_out = 0, want_in = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestRecord& r = run->requests[i];
    EXPECT_TRUE(r.success) << i << ": " << r.error;
    EXPECT_EQ(r.output_tokens, reqs[i].output_len) << i;  // from the usage chunk
    EXPECT_EQ(r.prompt_len, reqs[i].prompt_len) << i;
    EXPECT_LE(ttft_s(r), e2e_s(r)) << i;
    EXPECT_FALSE(r.token_times.empty()) << i;
    want_out += reqs[i].output_len;
    want_in += reqs[i].prompt_len;
  }
  const BenchMetrics m = compute_metrics(*run);
  EXPECT_EQ(m.completed, 6);
  EXPECT_EQ(m.total_output_tokens, want_out);
  EXPECT_EQ(m.total_input_tokens, want_in);
  // Engine rows from the server's /metrics: nothing was preempted, steps were run.
  ASSERT_TRUE(run->server_engine.has_value()) << run->server_metrics_note;
  EXPECT_EQ(m.num_preemptions, 0);
  EXPECT_GT(m.num_steps.value_or(0), 0);
  EXPECT_TRUE(m.contiguous_utilization_mean == std::nullopt);  // in-process only
}

/// The server's own counter `name`, read from its /metrics page with the tests' strict parser.
double server_counter(const llmserve::testing::TestServer& ts, const std::string& name) {
  httplib::Result r = ts.get("/metrics");
  EXPECT_TRUE(r && r->status == 200);
  const auto page = llmserve::testing::parse_prometheus_text(r->body);
  EXPECT_TRUE(page.errors.empty()) << page.error_text();
  return page.value(name + "{model_name=\"stories260K\"}");
}

TEST(BenchServe, EngineRowsAreTheServersMetricsOverTheRun) {
  // A pool of 6 blocks (96 tokens) for 6 requests of up to ~40 tokens: decodes run out of
  // blocks and preempt.
  EngineConfig c;
  c.model_path = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.scheduler.max_model_len = 512;
  c.num_threads = 2;
  c.cache.num_kv_blocks = 6;
  auto engine = LLMEngine::create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ServerConfig sc;
  sc.port = 0;
  llmserve::testing::TestServer ts(std::move(*engine), sc);
  ServeOptions o = options_for(ts);
  o.metrics_interval_s = 0.001;
  auto run = run_over_http(
      stories_workload({6, 24, 16, 0.0, 3}, std::numeric_limits<double>::infinity()), o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_TRUE(run->server_engine.has_value()) << run->server_metrics_note;
  const BenchMetrics m = compute_metrics(*run);
  EXPECT_EQ(m.completed, 6);
  // The server started at zero, so the run's deltas are its counters now.
  const double preemptions = server_counter(ts, "vllm:num_preemptions_total");
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(m.num_preemptions, static_cast<int64_t>(preemptions));
  EXPECT_EQ(m.num_steps, static_cast<int64_t>(server_counter(ts, "llmserve:engine_steps_total")));
  ASSERT_TRUE(m.peak_running.has_value());
  EXPECT_GE(*m.peak_running, 1);
  EXPECT_LE(*m.peak_running, 6);
  ASSERT_TRUE(m.kv_utilization_mean.has_value());
  EXPECT_GT(*m.kv_utilization_mean, 0.0);
  EXPECT_LE(*m.kv_utilization_peak, 1.0);
  EXPECT_LE(*m.kv_utilization_mean, *m.kv_utilization_peak);
}

TEST(BenchServe, MultiTurnResendsTheConversationAsTextAndHitsTheCache) {
  ServerConfig sc;
  sc.port = 0;
  llmserve::testing::TestServer ts(stories_engine(), sc);
  auto reqs = make_multi_turn_workload({3, 3, 24, 8, 5}, VocabInfo{}, /*as_text=*/true);
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ServeOptions o = options_for(ts);
  o.metrics_interval_s = 0.01;
  auto run = run_over_http(*reqs, o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  int64_t cached = 0;
  for (size_t i = 0; i < reqs->size(); ++i) {
    const RequestRecord& r = run->requests[i];
    ASSERT_TRUE(r.success) << i << ": " << r.error;
    EXPECT_EQ(r.turn, (*reqs)[i].turn);
    EXPECT_EQ(r.output_tokens, 8);
    EXPECT_FALSE(r.output_text.empty());
    ASSERT_GE(r.cached_tokens, 0) << i;  // llmserve reports usage.prompt_tokens_details
    cached += r.cached_tokens;
    if (r.turn == 0) {
      EXPECT_EQ(r.prompt_text, (*reqs)[i].prompt_text);
      continue;
    }
    // The whole conversation so far, then the new words; sent after the previous reply.
    const RequestRecord& prev = run->requests[i - 1];
    EXPECT_EQ(r.prompt_text, prev.prompt_text + prev.output_text + (*reqs)[i].prompt_text);
    EXPECT_GT(r.prompt_len, prev.prompt_len);
    EXPECT_GE(r.arrival_time, prev.finished_time);
    if (r.turn == 2) {
      EXPECT_GT(r.cached_tokens, 0) << i;  // at least the first turn's blocks
    }
  }
  const BenchMetrics m = compute_metrics(*run);
  ASSERT_TRUE(m.prefix_cache_hit_rate.has_value()) << run->server_metrics_note;
  EXPECT_GT(*m.prefix_cache_hit_rate, 0.0);
  EXPECT_EQ(m.prefix_cache_hits, cached);  // one lookup per request: no preemption here
  EXPECT_EQ(m.cached_prompt_tokens, cached);
  EXPECT_EQ(m.prefix_cache_hits,
            static_cast<int64_t>(server_counter(ts, "vllm:prefix_cache_hits_total")));
  ASSERT_EQ(m.turns.size(), 3u);
  for (const TurnMetrics& t : m.turns) {
    EXPECT_EQ(t.completed, 3);
    EXPECT_GT(t.ttft_ms.median, 0.0);
  }
  // A follow-up turn needs text over HTTP: token ids are refused before anything is sent.
  auto ids = make_multi_turn_workload({1, 2, 4, 2, 0}, VocabInfo{}, /*as_text=*/false);
  auto refused = run_over_http(*ids, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "request 1: a follow-up turn must be text over HTTP (the reply comes back as text)");
}

TEST(BenchServe, ApiKeyIsSentAndRefusalsAreOneLine) {
  ServerConfig sc;
  sc.port = 0;
  sc.api_key = "sekret";
  llmserve::testing::TestServer ts(stories_engine(), sc);
  BenchRequest req;
  req.prompt_token_ids = {1, 5, 6};
  req.prompt_len = 3;
  req.output_len = 2;
  ServeOptions o = options_for(ts);
  auto refused = run_over_http({req}, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "GET " + o.url + "/v1/models: 401 Unauthorized: give the server's API key with "
            "--api-key or OPENAI_API_KEY");
  o.api_key = "sekret";
  auto run = run_over_http({req}, o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->requests[0].success) << run->requests[0].error;
}

TEST(BenchServe, NothingListeningIsConnectionRefused) {
  // A port that was free a moment ago: bind (without listening), read it, close.
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  ServeOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  auto run = run_over_http({BenchRequest{}}, o);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(run.status().message(),
            "cannot connect to " + o.url + ": connection refused (is the server running?)");
}

TEST(BenchServe, ServerErrorsAreRecordedPerRequest) {
  ServerConfig sc;
  sc.port = 0;
  llmserve::testing::TestServer ts(stories_engine(), sc);
  BenchRequest too_long;
  too_long.prompt_token_ids = {1, 5, 6};
  too_long.prompt_len = 3;
  too_long.output_len = 1000;  // > max_model_len: HTTP 400
  auto run = run_over_http({too_long}, options_for(ts));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->requests[0].success);
  EXPECT_NE(run->requests[0].error.find("400"), std::string::npos) << run->requests[0].error;
  EXPECT_EQ(compute_metrics(*run).failed, 1);
}

}  // namespace
}  // namespace llmserve::bench
