#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace llmserve {

static int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int32_t sample_token(const float* logits, int32_t vocab_size, const SamplingParams& params,
                     std::mt19937_64& rng, std::vector<std::pair<float, int32_t>>& scratch) {
  if (params.temperature == 0.0f) return argmax(logits, vocab_size);

  // Candidates as (logit, id); keep the top_k by logit without sorting the rest.
  auto& cand = scratch;
  cand.resize(vocab_size);
  for (int32_t i = 0; i < vocab_size; ++i) cand[i] = {logits[i], i};
  auto by_logit_desc = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = cand.size();
  if (params.top_k >= 1 && static_cast<size_t>(params.top_k) < n) {
    std::nth_element(cand.begin(), cand.begin() + params.top_k, cand.end(), by_logit_desc);
    n = params.top_k;
  }
  // Softmax with temperature over the candidates (max-subtracted for stability).
  float max_logit = -INFINITY;
  for (size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, cand[i].first);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    const float p = std::exp((cand[i].first - max_logit) / params.temperature);
    cand[i].first = p;
    total += p;
  }
  if (params.top_p < 1.0f) {
    // Nucleus: only the most likely prefix that reaches top_p matters. Order a growing prefix
    // (64, 256, 1024, ... candidates) with partial_sort instead of sorting the vocabulary; a
    // peaked distribution stops after the first 64.
    const double target = params.top_p * total;
    double mass = 0;
    size_t keep = 0, sorted = 0;
    bool reached = false;
    while (!reached && sorted < n) {
      const size_t k = std::min(n, std::max<size_t>(64, sorted * 4));
      std::partial_sort(cand.begin() + sorted, cand.begin() + k, cand.begin() + n,
                        by_logit_desc);
      for (; keep < k && !reached; ++keep) {
        mass += cand[keep].first;
        reached = mass >= target;
      }
      sorted = k;
    }
    n = keep;
    total = mass;
  }
  std::uniform_real_distribution<double> uni(0.0, total);
  const double r = uni(rng);
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += cand[i].first;
    if (r < acc) return cand[i].second;
  }
  return cand[n - 1].second;
}

}  // namespace llmserve
