// Mixture-of-experts routing for one token: router logits -> the chosen experts and their
// weights. Covers the routers of the architectures llmserve runs:
//   * Qwen2/Qwen3-MoE and Mixtral (transformers' *SparseMoeBlock): softmax over all experts,
//     top-k, renormalised over the k when norm_topk_prob;
//   * DeepSeek-V2 (modeling_deepseek.py MoEGate, topk_method "greedy" or
//     "group_limited_greedy"): softmax, optionally limited to the best groups by their best
//     expert, weights times routed_scaling_factor;
//   * DeepSeek-V3 (DeepseekV3TopkRouter, topk_method "noaux_tc"; DeepSeek-V3 technical report,
//     arXiv:2412.19437, sec. 2.1.2): sigmoid scores, selection on score +
//     e_score_correction_bias, groups scored by the sum of their two best selection values,
//     weights the unbiased scores renormalised, times routed_scaling_factor.
// Everything is float32 and depends only on the token's own logits (batch invariance).
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.h"

namespace llmserve {

/// Routes tokens for one model's configuration, reusing its scratch between calls.
class MoeRouter {
 public:
  /// logits [n_experts]; bias [n_experts] (selection only) or nullptr. Writes the
  /// n_experts_used chosen expert ids in rank order (best first; ties go to the lower expert
  /// id, as torch.topk over a stable order) to `ids` and their weights to `weights`. Returns
  /// the gap between the last chosen and the best unchosen selection value (+inf when every
  /// eligible expert is chosen): a small gap means float rounding could change the choice.
  float route(const ModelConfig& c, const float* logits, const float* bias, int32_t* ids, float* weights);

 private:
  std::vector<float> score_, select_, group_;
  std::vector<int32_t> order_, group_order_;
};

}  // namespace llmserve
