// Step-limit and contiguous-reservation figures of the bench summary, on a hand-built run.
#include <gtest/gtest.h>

#include "bench/metrics.h"

namespace llmserve::bench {
namespace {

StepRecord step(int32_t prefill, int32_t decode, int32_t running, int32_t used_blocks,
                double kv_util) {
  StepRecord s;
  s.num_prefill_tokens = prefill;
  s.num_decode_tokens = decode;
  s.num_running = running;
  s.num_used_blocks = used_blocks;
  s.kv_utilization = kv_util;
  return s;
}

TEST(BenchMetrics, StepLimitsAndContiguousUtilization) {
  RunResult run;
  run.max_num_seqs = 4;
  run.max_num_batched_tokens = 16;
  run.block_size = 4;
  run.max_model_len = 100;
  run.steps = {step(16, 0, 2, 4, 1.0),   // prefill, budget-bound: 16 tokens stored
               step(10, 2, 4, 6, 0.5),   // prefill, seat-bound: 12 tokens stored
               step(0, 4, 4, 8, 0.75),   // decode, seat-bound: 24 stored
               step(0, 2, 2, 4, 1.0)};   // decode, neither: 16 stored
  const BenchMetrics m = compute_metrics(run);
  ASSERT_TRUE(m.prefill_steps && m.decode_steps && m.contiguous_utilization_mean);
  EXPECT_EQ(m.prefill_steps->num_steps, 2);
  EXPECT_DOUBLE_EQ(m.prefill_steps->budget_bound_frac, 0.5);
  EXPECT_DOUBLE_EQ(m.prefill_steps->seqs_bound_frac, 0.5);
  EXPECT_DOUBLE_EQ(m.prefill_steps->mean_tokens, 14.0);
  EXPECT_EQ(m.decode_steps->num_steps, 2);
  EXPECT_DOUBLE_EQ(m.decode_steps->budget_bound_frac, 0.0);
  EXPECT_DOUBLE_EQ(m.decode_steps->seqs_bound_frac, 0.5);
  EXPECT_DOUBLE_EQ(m.decode_steps->mean_running, 3.0);
  // stored / (running * 100): 16/200, 12/400, 24/400, 16/200 -> mean 0.0675
  EXPECT_DOUBLE_EQ(*m.contiguous_utilization_mean, (0.08 + 0.03 + 0.06 + 0.08) / 4);
}

}  // namespace
}  // namespace llmserve::bench
