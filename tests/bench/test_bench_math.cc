// bench metrics: percentile/mean math and the summary of a hand-built run, against values
// computed by hand.
#include <gtest/gtest.h>

#include "bench/metrics.h"

namespace llmserve::bench {
namespace {

TEST(BenchMath, MeanAndPercentilesInterpolateLikeNumpy) {
  EXPECT_DOUBLE_EQ(mean({}), 0.0);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);   // rank 1.5 -> (2 + 3) / 2
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 99), 3.97);  // rank 2.97 -> 3 + 0.97 * 1
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7.0);
  // 101 values 0..100: percentile q is exactly q.
  std::vector<double> xs;
  for (int i = 100; i >= 0; --i) xs.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(xs, 99), 99.0);
  const Distribution d = summarize({10, 20, 30});
  EXPECT_DOUBLE_EQ(d.mean, 20.0);
  EXPECT_DOUBLE_EQ(d.median, 20.0);
  EXPECT_DOUBLE_EQ(d.p99, 29.8);  // rank 1.98 -> 20 + 0.98 * 10
}

StepRecord step(int32_t used_blocks, double util, int32_t running) {
  StepRecord s;
  s.num_used_blocks = used_blocks;
  s.kv_utilization = util;
  s.num_running = running;
  return s;
}

/// Two successes and one failure; times in seconds from 0.
RunResult hand_run() {
  RunResult run;
  run.start_time = 0.0;
  run.end_time = 1.0;
  RequestRecord a;  // 3 tokens: TTFT 100 ms, gaps 100 and 200 ms, E2E 400 ms
  a.id = 0, a.prompt_len = 10, a.arrival_time = 0.0, a.token_times = {0.1, 0.2, 0.4};
  a.output_tokens = 3, a.num_preemptions = 2, a.success = true;
  RequestRecord b;  // 1 token: TTFT = E2E = 100 ms, no TPOT sample
  b.id = 1, b.prompt_len = 5, b.arrival_time = 0.5, b.token_times = {0.6};
  b.output_tokens = 1, b.success = true;
  RequestRecord c;  // failed: not counted anywhere but `failed`
  c.id = 2, c.prompt_len = 99, c.arrival_time = 0.0, c.token_times = {0.9};
  c.output_tokens = 50;
  run.requests = {a, b, c};
  run.steps = {step(0, 0.0, 0), step(4, 0.5, 3), step(5, 0.8, 2)};
  return run;
}

TEST(BenchMath, SummaryOfAHandBuiltRun) {
  const BenchMetrics m = compute_metrics(hand_run());
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 15);
  EXPECT_EQ(m.total_output_tokens, 4);
  EXPECT_DOUBLE_EQ(m.duration_s, 1.0);
  EXPECT_DOUBLE_EQ(m.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 19.0);
  EXPECT_NEAR(m.ttft_ms.mean, 100.0, 1e-9);
  EXPECT_NEAR(m.e2e_ms.mean, 250.0, 1e-9);       // (400 + 100) / 2
  EXPECT_NEAR(m.e2e_ms.p99, 397.0, 1e-9);        // 100 + 0.99 * 300
  EXPECT_NEAR(m.tpot_ms.mean, 150.0, 1e-9);      // (400 - 100) / (3 - 1), request a only
  EXPECT_NEAR(m.itl_ms.mean, 150.0, 1e-9);       // gaps 100, 200
  EXPECT_NEAR(m.itl_ms.median, 150.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.p99, 199.0, 1e-9);
  ASSERT_TRUE(m.num_preemptions && m.kv_utilization_mean && m.kv_utilization_peak);
  EXPECT_EQ(*m.num_preemptions, 2);
  EXPECT_NEAR(*m.kv_utilization_mean, 0.65, 1e-12);  // steps without blocks are skipped
  EXPECT_NEAR(*m.kv_utilization_peak, 0.8, 1e-12);
  EXPECT_EQ(*m.peak_running, 3);
}

TEST(BenchMath, JsonHasExactlyTheIssueKeysAndNullsForServe) {
  RunResult run = hand_run();
  const nlohmann::json j = metrics_to_json(compute_metrics(run));
  for (const char* k : {"completed", "duration_s", "request_throughput", "output_throughput",
                        "total_token_throughput", "num_preemptions", "kv_utilization_mean",
                        "kv_utilization_peak"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    for (const char* s : {"mean", "median", "p99"}) EXPECT_TRUE(j[k][s].is_number()) << k << s;
  }
  EXPECT_EQ(j["completed"], 2);
  run.in_process = false;  // bench serve: no engine-side numbers
  const nlohmann::json s = metrics_to_json(compute_metrics(run));
  EXPECT_TRUE(s["num_preemptions"].is_null());
  EXPECT_TRUE(s["kv_utilization_mean"].is_null());
  EXPECT_TRUE(s["kv_utilization_peak"].is_null());
  const std::string table = format_metrics_table(compute_metrics(run), "Serving Benchmark Result");
  EXPECT_NE(table.find("Mean KV utilization:                     n/a"), std::string::npos) << table;
  EXPECT_NE(table.find("P99 ITL (ms):                            199.00"), std::string::npos) << table;
}

}  // namespace
}  // namespace llmserve::bench
