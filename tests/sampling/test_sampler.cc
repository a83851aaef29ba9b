#include <gtest/gtest.h>

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
