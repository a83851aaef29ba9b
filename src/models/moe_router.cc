#include "models/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace llmserve {

float MoeRouter::route(const ModelConfig& c, const float* z, const float* bias, int32_t* ids, float* weights) {
  const int32_t E = c.n_experts, K = c.n_experts_used;
  score_.resize(E);
  select_.resize(E);
  order_.resize(E);
  if (c.moe_scoring == MoeScoring::kSoftmax) {
    const float zmax = *std::max_element(z, z + E);
    float sum = 0;
    for (int32_t e = 0; e < E; ++e) sum += score_[e] = std::exp(z[e] - zmax);
    for (int32_t e = 0; e < E; ++e) score_[e] /= sum;
  } else {
    for (int32_t e = 0; e < E; ++e) score_[e] = 1.0f / (1.0f + std::exp(-z[e]));
  }
  for (int32_t e = 0; e < E; ++e) select_[e] = bias != nullptr ? score_[e] + bias[e] : score_[e];
  // Higher value first, ties to the lower index.
  auto by_value = [](const std::vector<float>& v) {
    return [&v](int32_t a, int32_t b) { return v[a] != v[b] ? v[a] > v[b] : a < b; };
  };
  int32_t eligible = E;
  if (c.n_expert_groups > 1) {
    const int32_t G = c.n_expert_groups, per = E / G;
    group_.resize(G);
    group_order_.resize(G);
    for (int32_t g = 0; g < G; ++g) {
      const float* s = &select_[g * per];
      if (c.moe_group_score == MoeGroupScore::kMax) {
        group_[g] = *std::max_element(s, s + per);
      } else {  // the two best, whatever their positions
        float a = -std::numeric_limits<float>::infinity(), b = a;
        for (int32_t i = 0; i < per; ++i) {
          if (s[i] > a) {
            b = a;
            a = s[i];
          } else if (s[i] > b) {
            b = s[i];
          }
        }
        group_[g] = a + b;
      }
    }
    std::iota(group_order_.begin(), group_order_.end(), 0);
    std::sort(group_order_.begin(), group_order_.end(), by_value(group_));
    // Experts of the groups not kept cannot be chosen (vLLM's grouped_topk and llama.cpp mask
    // them with -inf; transformers with 0, the same whenever selection values are positive).
    for (int32_t r = c.n_expert_groups_used; r < G; ++r)
      std::fill_n(&select_[group_order_[r] * per], per, -std::numeric_limits<float>::infinity());
    eligible = c.n_expert_groups_used * per;
  }
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + std::min(K + 1, E), order_.end(), by_value(select_));
  float top_sum = 0;
  for (int32_t k = 0; k < K; ++k) top_sum += score_[order_[k]];
  const float scale = c.routed_scaling_factor;
  for (int32_t k = 0; k < K; ++k) {
    ids[k] = order_[k];
    const float w = score_[order_[k]];
    weights[k] = (c.norm_topk_prob && top_sum > 0 ? w / top_sum : w) * scale;
  }
  return K < eligible ? select_[order_[K - 1]] - select_[order_[K]] : std::numeric_limits<float>::infinity();
}

}  // namespace llmserve
