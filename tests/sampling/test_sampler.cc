#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sampling/sampler.h"

namespace llmserve {
namespace {

std::vector<std::pair<float, int32_t>> scratch;

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  const float logits[5] = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f};
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(logits, 5, p, rng, scratch), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  const float logits[4] = {0.5f, 0.2f, 4.0f, 0.1f};
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sample_token(logits, 4, p, rng, scratch), 2);
}

TEST(Sampler, FrequenciesFollowSoftmaxAndTopPCutsTheTail) {
  // p = softmax([log 0.5, log 0.3, log 0.15, log 0.05]) = {0.5, 0.3, 0.15, 0.05}.
  const float logits[4] = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  std::mt19937_64 rng(123);
  std::map<int32_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, 4, p, rng, scratch)];
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[3] / double(n), 0.05, 0.01);
  // top_p = 0.75: the nucleus is {0, 1} (0.5 + 0.3 >= 0.75), renormalised to 5/8, 3/8.
  p.top_p = 0.75f;
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, 4, p, rng, scratch)];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_NEAR(counts[0] / double(n), 0.625, 0.02);
}

TEST(Sampler, TopPNucleusBeyondTheFirstPartialSortRound) {
  // A flat-ish distribution over 4000 tokens (shuffled ids) whose nucleus needs hundreds of
  // candidates: the sampler's growing partial sort must find exactly the nucleus a full sort
  // finds (computed here independently).
  const int32_t vocab = 4000;
  std::vector<float> logits(vocab);
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  for (int32_t r = 0; r < vocab; ++r) logits[order[r]] = -0.001f * r;  // rank r -> logit
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.6f;
  // Reference nucleus: ranks 0..cut-1 with cumulative probability first >= 0.6.
  double total = 0;
  for (int32_t r = 0; r < vocab; ++r) total += std::exp(-0.001 * r);
  double mass = 0;
  int32_t cut = 0;
  while (mass < 0.6 * total) mass += std::exp(-0.001 * cut++);
  ASSERT_GT(cut, 256);  // beyond the first two rounds (64, 256)
  std::vector<int32_t> rank_of(vocab);
  for (int32_t r = 0; r < vocab; ++r) rank_of[order[r]] = r;
  std::mt19937_64 rng(9);
  int32_t max_rank = 0;
  for (int i = 0; i < 2000; ++i) {
    const int32_t id = sample_token(logits.data(), vocab, p, rng, scratch);
    ASSERT_LT(rank_of[id], cut + 1);  // +1: float vs double rounding at the boundary
    max_rank = std::max(max_rank, rank_of[id]);
  }
  EXPECT_GT(max_rank, cut * 9 / 10);  // the tail of the nucleus is reachable
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sample_token(logits.data(), 100, p, a, scratch),
              sample_token(logits.data(), 100, p, b, scratch));
}

TEST(SamplingParams, ValidateNamesTheParameter) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(p.validate(10).message().find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_NE(p.validate(10).message().find("top_p"), std::string::npos);
  p = {};
  p.max_tokens = 0;
  EXPECT_NE(p.validate(10).message().find("max_tokens"), std::string::npos);
  p = {};
  p.temperature = NAN;
  EXPECT_FALSE(p.validate(10).ok());
  p = {};
  p.stop_token_ids = {10};
  EXPECT_FALSE(p.validate(10).ok());
  EXPECT_TRUE(SamplingParams{}.validate(10).ok());
}

}  // namespace
}  // namespace llmserve
