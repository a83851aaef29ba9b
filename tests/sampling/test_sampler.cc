#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <random>
#include <vector>

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

// Greedy against its obviously-correct twin, the plain loop (first index of the largest
// logit; NaNs never win; a NaN first logit gives 0), on short and vocabulary-sized rows
// full of ties, signed zeros, infinities and NaNs.
TEST(Sampler, GreedyMatchesThePlainArgmaxLoop) {
  auto plain = [](const std::vector<float>& l) {
    int32_t best = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(l.size()); ++i)
      if (l[i] > l[best]) best = i;
    return best;
  };
  const float pool[] = {0.0f, -0.0f, 1.5f, -2.0f, 3.0f, 3.0f, INFINITY, -INFINITY, NAN, 7.25f};
  std::mt19937_64 gen(3);
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(1);
  for (int32_t n : {1, 2, 7, 8, 9, 16, 17, 33, 32000}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> l(n);
      // Few distinct values per row (ties everywhere), sometimes none of the large ones.
      const size_t span = 1 + gen() % std::size(pool);
      for (float& v : l) v = pool[gen() % span];
      ASSERT_EQ(sample_token(l.data(), n, p, rng, scratch), plain(l)) << "n " << n << " trial " << trial;
    }
  }
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


// ---- logits processors (hand-computed expectations) ----

TEST(LogitsProcessors, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerToken) {
  // vocab 5; prompt {1, 3}, output {3, 3, 4}: seen = {1, 3, 4} (each penalised once).
  std::vector<float> l = {1.0f, 2.0f, -1.0f, 3.0f, -0.5f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  LogitsProcessorScratch s;
  const std::vector<int32_t> prompt = {1, 3}, output = {3, 3, 4};
  ASSERT_TRUE(needs_logits_processing(p, 3));
  apply_logits_processors(l.data(), 5, p, prompt, output, /*eos_id=*/-1, s);
  EXPECT_FLOAT_EQ(l[0], 1.0f);   // unseen
  EXPECT_FLOAT_EQ(l[1], 1.0f);   // 2 / 2 (prompt token)
  EXPECT_FLOAT_EQ(l[2], -1.0f);  // unseen
  EXPECT_FLOAT_EQ(l[3], 1.5f);   // 3 / 2, once although it occurs three times
  EXPECT_FLOAT_EQ(l[4], -1.0f);  // -0.5 * 2
  // A penalty < 1 encourages repeats: positive logits grow, negative ones shrink.
  std::vector<float> m = {1.0f, 2.0f, -1.0f, 3.0f, -0.5f};
  p.repetition_penalty = 0.5f;
  apply_logits_processors(m.data(), 5, p, prompt, output, -1, s);
  EXPECT_FLOAT_EQ(m[1], 4.0f);
  EXPECT_FLOAT_EQ(m[4], -0.25f);
  // The scratch buffers are left zeroed for the next call.
  for (uint8_t v : s.seen) EXPECT_EQ(v, 0);
  // A tiny penalty overflowed a positive logit to +inf (then NaN in the softmax, and the last
  // token sampled whatever the seed): it stays finite, the repeated token first.
  std::vector<float> n = {1.0f, 20.0f, -1.0f, 30.0f, -0.5f};
  p.repetition_penalty = 1e-38f;
  apply_logits_processors(n.data(), 5, p, prompt, output, -1, s);
  for (float v : n) EXPECT_TRUE(std::isfinite(v)) << v;
  p.temperature = 1.0f;
  std::mt19937_64 rng(3);
  std::vector<std::pair<float, int32_t>> scratch;
  const int32_t picked = sample_token(n.data(), 5, p, rng, scratch);  // both overflowed: a tie
  EXPECT_TRUE(picked == 1 || picked == 3) << picked;
}

TEST(LogitsProcessors, FrequencyAndPresencePenaltiesCountOnlyTheOutput) {
  // prompt {0, 0, 1}, output {2, 2, 2, 1}: counts over the output: 1 -> 1, 2 -> 3.
  std::vector<float> l = {0.5f, 0.5f, 0.5f, 0.5f};
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  LogitsProcessorScratch s;
  const std::vector<int32_t> prompt = {0, 0, 1}, output = {2, 2, 2, 1};
  apply_logits_processors(l.data(), 4, p, prompt, output, -1, s);
  EXPECT_FLOAT_EQ(l[0], 0.5f);                       // prompt only: untouched
  EXPECT_FLOAT_EQ(l[1], 0.5f - 0.5f * 1 - 0.25f);    // -0.25
  EXPECT_FLOAT_EQ(l[2], 0.5f - 0.5f * 3 - 0.25f);    // -1.25
  EXPECT_FLOAT_EQ(l[3], 0.5f);
  for (int32_t c : s.counts) EXPECT_EQ(c, 0);
  // Negative penalties reward repeats: 0.5 + 2 * 3 + 2 = 8.5.
  std::vector<float> m = {0.5f, 0.5f, 0.5f, 0.5f};
  p.frequency_penalty = -2.0f;
  p.presence_penalty = -2.0f;
  apply_logits_processors(m.data(), 4, p, prompt, output, -1, s);
  EXPECT_FLOAT_EQ(m[2], 8.5f);
  // No output yet: nothing to penalise.
  EXPECT_FALSE(needs_logits_processing(p, 0));
}

TEST(LogitsProcessors, RepetitionThenFrequencyThenPresence) {
  // vLLM's order: token 1 (logit 3, output count 2): 3 / 1.5 = 2, then 2 - 0.5 * 2 - 1 = 0.
  std::vector<float> l = {0.0f, 3.0f};
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.0f;
  LogitsProcessorScratch s;
  const std::vector<int32_t> prompt = {0}, output = {1, 1};
  apply_logits_processors(l.data(), 2, p, prompt, output, -1, s);
  EXPECT_FLOAT_EQ(l[0], 0.0f);  // 0 * 1.5
  EXPECT_FLOAT_EQ(l[1], 0.0f);
}

TEST(LogitsProcessors, MinTokensMasksEosAndStopTokensUntilReached) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  LogitsProcessorScratch s;
  const std::vector<int32_t> prompt = {0};
  std::vector<int32_t> output = {1};
  std::vector<float> l = {0.0f, 1.0f, 5.0f, 4.0f};
  ASSERT_TRUE(needs_logits_processing(p, 1));
  apply_logits_processors(l.data(), 4, p, prompt, output, /*eos_id=*/2, s);
  EXPECT_EQ(l[2], -INFINITY);
  EXPECT_EQ(l[3], -INFINITY);
  EXPECT_FLOAT_EQ(l[1], 1.0f);
  SamplingParams greedy = p;
  greedy.temperature = 0;
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(l.data(), 4, greedy, rng, scratch), 1);
  // ignore_eos: EOS is not a stop token, so it is not masked (stop_token_ids still are).
  p.ignore_eos = true;
  l = {0.0f, 1.0f, 5.0f, 4.0f};
  apply_logits_processors(l.data(), 4, p, prompt, output, 2, s);
  EXPECT_FLOAT_EQ(l[2], 5.0f);
  EXPECT_EQ(l[3], -INFINITY);
  // Once min_tokens outputs exist nothing is masked.
  output = {1, 1};
  EXPECT_FALSE(needs_logits_processing(p, 2));
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheTopProbability) {
  // p = {0.5, 0.3, 0.15, 0.05}; min_p = 0.4 -> threshold 0.2: keeps {0, 1}, renormalised to
  // 5/8 and 3/8. min_p = 0.25 -> threshold 0.125 keeps {0, 1, 2}: 0.5/0.95, 0.3/0.95, ...
  const float logits[4] = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.min_p = 0.4f;
  std::mt19937_64 rng(11);
  std::map<int32_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, 4, p, rng, scratch)];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_NEAR(counts[0] / double(n), 0.625, 0.02);
  p.min_p = 0.25f;
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, 4, p, rng, scratch)];
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[2] / double(n), 0.15 / 0.95, 0.01);
  EXPECT_NEAR(counts[0] / double(n), 0.5 / 0.95, 0.02);
  // Temperature applies first: T = 2 flattens to p ~ sqrt(p): relative {1, .775, .548, .316},
  // so min_p = 0.5 now keeps {0, 1, 2}.
  p.min_p = 0.5f;
  p.temperature = 2.0f;
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, 4, p, rng, scratch)];
  EXPECT_EQ(counts[3], 0);
  EXPECT_GT(counts[2], 0);
  // min_p = 1 keeps only the most likely token.
  p.min_p = 1.0f;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(logits, 4, p, rng, scratch), 0);
}

TEST(Sampler, LogprobsAreTheLogSoftmaxAndTheChosenOneIgnoresK) {
  // logits = log p + 7 (a shift changes nothing): logprob(t) = log p_t.
  const float logits[4] = {std::log(0.5f) + 7, std::log(0.3f) + 7, std::log(0.15f) + 7,
                           std::log(0.05f) + 7};
  std::vector<std::pair<float, int32_t>> s;
  const TokenLogprobs none = compute_logprobs(logits, 4, /*token=*/2, /*k=*/0, s);
  EXPECT_NEAR(none.logprob, std::log(0.15), 1e-5);
  EXPECT_TRUE(none.top.empty());
  const TokenLogprobs two = compute_logprobs(logits, 4, 2, 2, s);
  EXPECT_EQ(two.logprob, none.logprob);  // bit-identical whatever k is
  ASSERT_EQ(two.top.size(), 2u);
  EXPECT_EQ(two.top[0].first, 0);
  EXPECT_NEAR(two.top[0].second, std::log(0.5), 1e-5);
  EXPECT_EQ(two.top[1].first, 1);
  EXPECT_NEAR(two.top[1].second, std::log(0.3), 1e-5);
  EXPECT_EQ(compute_logprobs(logits, 4, 2, 20, s).top.size(), 4u);  // k capped at the vocab
  EXPECT_EQ(compute_logprobs(logits, 4, 2, 20, s).logprob, none.logprob);
  SamplingParams p;
  p.logprobs = 21;
  EXPECT_EQ(p.validate(10).message().rfind("logprobs", 0), 0u);
  p.logprobs = 20;
  EXPECT_TRUE(p.validate(10).ok());
}

TEST(SamplingParams, ValidatePenaltiesMinPAndMinTokens) {
  auto msg = [](SamplingParams p) { return p.validate(10).message(); };
  SamplingParams p;
  p.min_p = 1.5f;
  EXPECT_EQ(msg(p).rfind("min_p", 0), 0u);
  p = {};
  p.min_p = -0.1f;
  EXPECT_FALSE(p.validate(10).ok());
  p = {};
  p.presence_penalty = 2.5f;
  EXPECT_EQ(msg(p).rfind("presence_penalty", 0), 0u);
  p = {};
  p.frequency_penalty = -2.01f;
  EXPECT_EQ(msg(p).rfind("frequency_penalty", 0), 0u);
  p = {};
  p.frequency_penalty = NAN;
  EXPECT_FALSE(p.validate(10).ok());
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_EQ(msg(p).rfind("repetition_penalty", 0), 0u);
  p = {};
  p.repetition_penalty = INFINITY;
  EXPECT_FALSE(p.validate(10).ok());
  p = {};
  p.min_tokens = -1;
  EXPECT_EQ(msg(p).rfind("min_tokens", 0), 0u);
  p = {};
  p.max_tokens = 5;
  p.min_tokens = 6;
  EXPECT_EQ(msg(p).rfind("min_tokens", 0), 0u);
  p = {};
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 0.01f;
  p.max_tokens = 5;
  p.min_tokens = 5;
  EXPECT_TRUE(p.validate(10).ok());
}

}  // namespace
}  // namespace llmserve

namespace llmserve {
namespace {

TEST(LogitRestrictions, AllowedTokenIdsMaskThenLogitBiasAdds) {
  SamplingParams p;
  EXPECT_FALSE(has_logit_restrictions(p));
  p.allowed_token_ids = {1, 3};
  p.logit_bias = {{3, -2.5f}, {0, 100.0f}};  // 0 is masked: -inf + 100 stays -inf
  EXPECT_TRUE(has_logit_restrictions(p));
  std::vector<float> logits = {5, 1, 7, 2};
  std::vector<uint8_t> scratch;
  apply_logit_restrictions(logits.data(), 4, p, scratch);
  EXPECT_EQ(logits[0], -INFINITY);
  EXPECT_EQ(logits[1], 1.0f);
  EXPECT_EQ(logits[2], -INFINITY);
  EXPECT_EQ(logits[3], -0.5f);
  // Logprobs of the restricted row: only the allowed tokens have mass; rank counts ties.
  std::vector<std::pair<float, int32_t>> s;
  const TokenLogprobs lp = compute_logprobs(logits.data(), 4, 3, 2, s);
  EXPECT_NEAR(std::exp(lp.logprob) + std::exp(lp.top[0].second), 1.0, 1e-6);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.rank, 2);
}

TEST(LogitRestrictions, ValidateChecksIdsRangesAndCount) {
  auto msg = [](SamplingParams p) { return p.validate(10).message(); };
  SamplingParams p;
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(msg(p).find("logit_bias: token id 10"), std::string::npos);
  p.logit_bias = {{1, 100.5f}};
  EXPECT_NE(msg(p).find("[-100, 100]"), std::string::npos);
  p.logit_bias = {{1, -100.0f}, {2, 100.0f}};
  EXPECT_TRUE(p.validate(10).ok());
  p.logit_bias.assign(301, {1, 0.0f});
  EXPECT_NE(msg(p).find("at most 300"), std::string::npos);
  p.logit_bias.clear();
  p.allowed_token_ids = {9, -1};
  EXPECT_NE(msg(p).find("allowed_token_ids"), std::string::npos);
}

}  // namespace
}  // namespace llmserve
