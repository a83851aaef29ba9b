// bench serve against the real engine behind llmserve's HTTP server on a free port.
#include <gtest/gtest.h>

#include "bench/http_client.h"
#include "bench/metrics.h"
#include "bench/workload.h"
#include "engine/llm_engine.h"
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
  VocabInfo vocab;  // stories260K: 512 tokens, BOS 1
  vocab.special_ids = {0, 1, 2};
  auto reqs = make_random_dataset({6, 24, 12, 0.5, 2}, vocab);
  ASSERT_TRUE(reqs.ok());
  ASSERT_TRUE(assign_arrivals(*reqs, {100.0, 1.0, 2}).ok());
  ServeOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(ts.port());
  o.max_concurrency = 3;
  o.timeout_s = 60;
  auto run = run_over_http(*reqs, o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  int64_t want_out = 0, want_in = 0;
  for (size_t i = 0; i < reqs->size(); ++i) {
    const RequestRecord& r = run->requests[i];
    EXPECT_TRUE(r.success) << i << ": " << r.error;
    EXPECT_EQ(r.output_tokens, (*reqs)[i].output_len) << i;  // from the usage chunk
    EXPECT_EQ(r.prompt_len, (*reqs)[i].prompt_len) << i;
    EXPECT_LE(ttft_s(r), e2e_s(r)) << i;
    EXPECT_FALSE(r.token_times.empty()) << i;
    want_out += (*reqs)[i].output_len;
    want_in += (*reqs)[i].prompt_len;
  }
  const BenchMetrics m = compute_metrics(*run);
  EXPECT_EQ(m.completed, 6);
  EXPECT_EQ(m.total_output_tokens, want_out);
  EXPECT_EQ(m.total_input_tokens, want_in);
  const nlohmann::json j = metrics_to_json(m);
  EXPECT_TRUE(j["kv_utilization_mean"].is_null());
  EXPECT_TRUE(j["num_preemptions"].is_null());
}

TEST(BenchServe, ServerErrorsAreRecordedPerRequest) {
  ServerConfig sc;
  sc.port = 0;
  llmserve::testing::TestServer ts(stories_engine(), sc);
  BenchRequest too_long;
  too_long.prompt_token_ids = {1, 5, 6};
  too_long.prompt_len = 3;
  too_long.output_len = 1000;  // > max_model_len: HTTP 400
  ServeOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(ts.port());
  o.timeout_s = 60;
  auto run = run_over_http({too_long}, o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->requests[0].success);
  EXPECT_NE(run->requests[0].error.find("400"), std::string::npos) << run->requests[0].error;
  EXPECT_EQ(compute_metrics(*run).failed, 1);
}

}  // namespace
}  // namespace llmserve::bench
