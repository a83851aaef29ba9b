// End to end in-process: stories260K under the bench runner; counts, latency ordering, JSON
// keys and a timeline with one row per request.
#include <gtest/gtest.h>

#include "bench/metrics.h"
#include "bench/runner.h"
#include "bench/timeline_svg.h"
#include "bench/workload.h"
#include "engine/llm_engine.h"
#include "xml_check.h"

namespace llmserve::bench {
namespace {

std::unique_ptr<LLMEngine> stories_engine(int32_t max_num_seqs) {
  EngineConfig c;
  c.model_path = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.scheduler.max_model_len = 512;
  c.scheduler.max_num_seqs = max_num_seqs;
  c.scheduler.check_invariants = true;
  c.num_threads = 2;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<BenchRequest> workload(const LLMEngine& engine, double rate) {
  auto reqs = make_random_dataset({8, 32, 16, 0.5, 1}, vocab_info(engine.tokenizer()));
  EXPECT_TRUE(reqs.ok());
  EXPECT_TRUE(assign_arrivals(*reqs, {rate, 1.0, 1}).ok());
  return *reqs;
}

void expect_consistent(const RunResult& run, const std::vector<BenchRequest>& reqs) {
  ASSERT_EQ(run.requests.size(), reqs.size());
  int64_t want_out = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestRecord& r = run.requests[i];
    want_out += reqs[i].output_len;
    EXPECT_TRUE(r.success) << i;
    EXPECT_EQ(r.output_tokens, reqs[i].output_len) << i;
    EXPECT_EQ(static_cast<int32_t>(r.token_times.size()), reqs[i].output_len) << i;
    EXPECT_LE(ttft_s(r), e2e_s(r)) << i;
    EXPECT_GE(ttft_s(r), 0.0) << i;
  }
  const BenchMetrics m = compute_metrics(run);
  EXPECT_EQ(m.completed, 8);
  EXPECT_EQ(m.total_output_tokens, want_out);
  EXPECT_LE(m.ttft_ms.mean, m.e2e_ms.mean);
  EXPECT_GT(m.duration_s, 0.0);
}

TEST(BenchEngine, EightPromptsAllAtOnce) {
  auto engine = stories_engine(4);
  ASSERT_NE(engine, nullptr);
  const auto reqs = workload(*engine, std::numeric_limits<double>::infinity());
  auto run = run_in_process(*engine, reqs, {});
  ASSERT_TRUE(run.ok()) << run.status().message();
  expect_consistent(*run, reqs);
  EXPECT_FALSE(run->steps.empty());
  const nlohmann::json j = metrics_to_json(compute_metrics(*run));
  for (const char* k : {"completed", "duration_s", "request_throughput", "output_throughput",
                        "total_token_throughput", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms",
                        "num_preemptions", "kv_utilization_mean", "kv_utilization_peak"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["completed"], 8);
  EXPECT_TRUE(j["kv_utilization_mean"].is_number());
  EXPECT_LE(*compute_metrics(*run).peak_running, 4);
}

TEST(BenchEngine, PoissonArrivalsAndTimeline) {
  auto engine = stories_engine(128);
  ASSERT_NE(engine, nullptr);
  const auto reqs = workload(*engine, 200.0);
  int64_t progress_calls = 0;
  RunOptions opts;
  opts.progress = [&](int64_t done, int64_t total) {
    ++progress_calls;
    EXPECT_EQ(total, 8);
    EXPECT_EQ(done, progress_calls);
  };
  auto run = run_in_process(*engine, reqs, opts);
  ASSERT_TRUE(run.ok()) << run.status().message();
  expect_consistent(*run, reqs);
  EXPECT_EQ(progress_calls, 8);
  for (size_t i = 0; i < reqs.size(); ++i)  // arrival = start + scheduled offset
    EXPECT_DOUBLE_EQ(run->requests[i].arrival_time, run->start_time + reqs[i].arrival_offset_s);
  const std::string svg = render_timeline_svg(*run, "poisson");
  EXPECT_EQ(testing::xml_error(svg), "");
  size_t rows = 0;
  for (size_t p = svg.find("<g class=\"row\""); p != std::string::npos;
       p = svg.find("<g class=\"row\"", p + 1))
    ++rows;
  EXPECT_EQ(rows, 8u);
  // Every request shows its prefill and decodes in the grid.
  const TimelineGrid g = build_timeline_grid(*run);
  for (int64_t r = 0; r < g.num_requests; ++r) {
    int decodes = 0, prefill_tokens = 0;
    for (int64_t s = 0; s < g.num_steps; ++s) {
      if (g.at(r, s) == CellState::kDecode) ++decodes;
      if (g.at(r, s) == CellState::kPrefill) prefill_tokens += g.tokens_at(r, s);
    }
    EXPECT_EQ(prefill_tokens, run->requests[static_cast<size_t>(r)].prompt_len) << r;
    EXPECT_EQ(decodes, reqs[static_cast<size_t>(r)].output_len - 1) << r;
  }
}

TEST(BenchEngine, InvalidRequestFailsBeforeTheClockStarts) {
  auto engine = stories_engine(4);
  ASSERT_NE(engine, nullptr);
  auto reqs = workload(*engine, std::numeric_limits<double>::infinity());
  reqs[3].output_len = 1000;  // prompt + output > max_model_len 512
  auto run = run_in_process(*engine, reqs, {});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("request 3"), std::string::npos) << run.status().message();
  EXPECT_FALSE(engine->has_unfinished_requests());
}

}  // namespace
}  // namespace llmserve::bench
