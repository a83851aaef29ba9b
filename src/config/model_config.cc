#include "config/model_config.h"

#include <algorithm>

#include <cmath>

namespace llmserve {

Status ModelConfig::validate() const {
  auto positive = [](const char* name, int64_t v) -> Status {
    if (v <= 0) return InvalidArgument("model config: {} must be positive, got {}", name, v);
    return Status::Ok();
  };
  LLMS_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  LLMS_RETURN_IF_ERROR(positive("dim", dim));
  LLMS_RETURN_IF_ERROR(positive("n_layers", n_layers));
  LLMS_RETURN_IF_ERROR(positive("n_heads", n_heads));
  LLMS_RETURN_IF_ERROR(positive("n_kv_heads", n_kv_heads));
  LLMS_RETURN_IF_ERROR(positive("head_dim", head_dim));
  LLMS_RETURN_IF_ERROR(positive("ffn_dim", ffn_dim));
  LLMS_RETURN_IF_ERROR(positive("max_position_embeddings", max_position_embeddings));
  if (n_heads % n_kv_heads != 0)
    return InvalidArgument("model config: n_heads ({}) is not a multiple of n_kv_heads ({})",
                           n_heads, n_kv_heads);
  if (is_mla()) {
    LLMS_RETURN_IF_ERROR(positive("qk_nope_head_dim", qk_nope_head_dim));
    LLMS_RETURN_IF_ERROR(positive("qk_rope_head_dim", qk_rope_head_dim));
    LLMS_RETURN_IF_ERROR(positive("v_head_dim", v_head_dim));
    if (q_lora_rank < 0)
      return InvalidArgument("model config: q_lora_rank must be >= 0, got {}", q_lora_rank);
    if (n_kv_heads != 1)
      return InvalidArgument("model config: MLA caches one latent head, n_kv_heads = {}",
                             n_kv_heads);
    if (head_dim != qk_nope_head_dim + qk_rope_head_dim)
      return InvalidArgument("model config: MLA head_dim ({}) != qk_nope_head_dim ({}) + "
                             "qk_rope_head_dim ({})", head_dim, qk_nope_head_dim,
                             qk_rope_head_dim);
  }
  if (is_moe()) {
    LLMS_RETURN_IF_ERROR(positive("n_experts_used", n_experts_used));
    LLMS_RETURN_IF_ERROR(positive("expert_ffn_dim", expert_ffn_dim));
    if (n_experts_used > n_experts)
      return InvalidArgument("model config: n_experts_used ({}) is more than n_experts ({})",
                             n_experts_used, n_experts);
    if (n_dense_leading_layers < 0 || n_dense_leading_layers > n_layers)
      return InvalidArgument("model config: {} leading dense layers of {} layers", n_dense_leading_layers,
                             n_layers);
    if (n_expert_groups < 1 || n_experts % n_expert_groups != 0)
      return InvalidArgument("model config: {} experts do not split into {} expert groups", n_experts,
                             n_expert_groups);
    if (n_expert_groups_used < 1 || n_expert_groups_used > n_expert_groups)
      return InvalidArgument("model config: {} expert groups used of {} groups (topk_group)",
                             n_expert_groups_used, n_expert_groups);
    if (static_cast<int64_t>(n_expert_groups_used) * (n_experts / n_expert_groups) < n_experts_used)
      return InvalidArgument("model config: {} of {} expert groups hold fewer than the {} experts "
                             "each token uses", n_expert_groups_used, n_expert_groups, n_experts_used);
    if (moe_group_score == MoeGroupScore::kTop2Sum && n_expert_groups > 1 && n_experts / n_expert_groups < 2)
      return InvalidArgument("model config: top-2 group scores need 2 or more experts per group");
    if (!(routed_scaling_factor > 0.0f) || !std::isfinite(routed_scaling_factor))
      return InvalidArgument("model config: routed_scaling_factor must be finite and > 0, got {}",
                             routed_scaling_factor);
  }
  if (sliding_window < 0)
    return InvalidArgument("model config: sliding_window ({}) must be >= 0", sliding_window);
  if (!sliding_layers.empty() && static_cast<int64_t>(sliding_layers.size()) != n_layers)
    return InvalidArgument("model config: {} sliding-layer flags for {} layers", sliding_layers.size(), n_layers);
  if (rotary_dim < 0 || rotary_dim > head_dim)
    return InvalidArgument("model config: rotary_dim ({}) must be within head_dim ({})", rotary_dim, head_dim);
  if (rope_dim() % 2 != 0)
    return InvalidArgument("model config: RoPE dimension ({}) must be even", rope_dim());
  if (!(rms_norm_eps > 0.0f) || !(rope_theta > 0.0f) || !std::isfinite(rms_norm_eps) ||
      !std::isfinite(rope_theta))
    return InvalidArgument("model config: rms_norm_eps ({}) and rope_theta ({}) must be finite "
                           "and > 0", rms_norm_eps, rope_theta);
  // Gemma: released values are 30 / 50 (caps), 144 / 256 (query_pre_attn_scalar), 1e4 (local
  // base); the bounds only keep tanh and sqrt meaningful.
  for (auto [name, v] : {std::pair{"attn_logit_softcapping", attn_logit_softcapping},
                         std::pair{"final_logit_softcapping", final_logit_softcapping},
                         std::pair{"query_pre_attn_scalar", query_pre_attn_scalar},
                         std::pair{"rope_local_base_freq", rope_local_base_freq}})
    if (!(v >= 0.0f) || !(v <= 1e9f))
      return InvalidArgument("model config: {} ({}) must be 0 (off) or positive and finite", name, v);
  const RopeScaling& rs = rope_scaling;
  if (rs.type != RopeScalingType::kNone && (!(rs.factor > 0.0f) || !std::isfinite(rs.factor)))
    return InvalidArgument("model config: rope_scaling factor must be > 0, got {}", rs.factor);
  if (rs.type == RopeScalingType::kLlama3 &&
      (!(rs.high_freq_factor > rs.low_freq_factor) || !(rs.low_freq_factor > 0.0f) ||
       rs.original_max_position_embeddings <= 0))
    return InvalidArgument("model config: llama3 rope_scaling needs high_freq_factor ({}) > "
                           "low_freq_factor ({}) > 0 and original_max_position_embeddings > 0"
                           " ({})", rs.high_freq_factor, rs.low_freq_factor,
                           rs.original_max_position_embeddings);
  if (rs.type == RopeScalingType::kLongRope) {
    for (const std::vector<float>* f : {&rs.long_factor, &rs.short_factor}) {
      if (static_cast<int64_t>(f->size()) != rope_dim() / 2)
        return InvalidArgument("model config: longrope factor lists need rope_dim/2 = {} values, got {}",
                               rope_dim() / 2, f->size());
      for (float v : *f)
        if (!(v > 0.0f) || !std::isfinite(v))
          return InvalidArgument("model config: longrope factors must be finite and > 0, got {}", v);
    }
    if (rs.original_max_position_embeddings <= 0)
      return InvalidArgument("model config: longrope needs original_max_position_embeddings > 0");
  }
  if (!rope_freq_factors.empty() &&
      static_cast<int64_t>(rope_freq_factors.size()) != rope_dim() / 2)
    return InvalidArgument("model config: rope_freqs has {} factors, expected rope_dim/2 = {}",
                           rope_freq_factors.size(), rope_dim() / 2);
  return Status::Ok();
}

std::string ModelConfig::attention_type() const {
  if (is_mla()) return "MLA";
  if (n_kv_heads == n_heads) return "MHA";
  if (n_kv_heads == 1) return "MQA";
  return "GQA";
}

KvCacheSpec ModelConfig::kv_cache_spec() const {
  if (is_mla()) return {1, kv_lora_rank + qk_rope_head_dim, true};
  return {n_kv_heads, head_dim, false};
}

int64_t ModelConfig::kv_bytes_per_token_per_layer(DType kv_dtype) const {
  const KvCacheSpec s = kv_cache_spec();
  return (s.v_shares_k ? 1 : 2) * int64_t{s.num_heads} * s.head_size *
         static_cast<int64_t>(dtype_size(kv_dtype));
}

int64_t ModelConfig::mha_kv_bytes_per_token_per_layer(DType kv_dtype) const {
  const int64_t elems = is_mla()
                            ? int64_t{n_heads} * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim)
                            : 2LL * n_heads * head_dim;
  return elems * static_cast<int64_t>(dtype_size(kv_dtype));
}

std::vector<float> ModelConfig::rope_inv_freq() const {
  const int32_t d = rope_dim(), half = d / 2;
  std::vector<float> inv(half);
  for (int32_t i = 0; i < half; ++i)  // run.c / transformers: 1 / theta^(2i / d), float32
    inv[i] = 1.0f / std::pow(rope_theta, static_cast<float>(2 * i) / static_cast<float>(d));
  const RopeScaling& rs = rope_scaling;
  if (rs.type == RopeScalingType::kLinear) {
    for (float& f : inv) f /= rs.factor;
  } else if (rs.type == RopeScalingType::kLlama3) {
    // transformers modeling_rope_utils._compute_llama3_parameters.
    const float old_len = static_cast<float>(rs.original_max_position_embeddings);
    const float low_wavelen = old_len / rs.low_freq_factor;
    const float high_wavelen = old_len / rs.high_freq_factor;
    for (float& f : inv) {
      const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
      if (wavelen < high_wavelen) continue;  // high frequency: kept
      if (wavelen > low_wavelen) {           // low frequency: interpolated
        f /= rs.factor;
        continue;
      }
      const float smooth =
          (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      f = (1.0f - smooth) * f / rs.factor + smooth * f;
    }
  } else if (rs.type == RopeScalingType::kYarn) {
    // transformers modeling_rope_utils._compute_yarn_parameters (float64 here, then float32).
    const double base = rope_theta, dim = d, orig = rs.original_max_position_embeddings;
    auto correction_dim = [&](double rotations) {
      return dim * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    double low = correction_dim(rs.beta_fast), high = correction_dim(rs.beta_slow);
    if (rs.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
    for (int32_t i = 0; i < half; ++i) {
      const double pos_freq = std::pow(base, 2.0 * i / dim);
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double keep = 1.0 - ramp;  // inv_freq_extrapolation_factor
      inv[i] = static_cast<float>(1.0 / (rs.factor * pos_freq) * (1.0 - keep) + 1.0 / pos_freq * keep);
    }
  } else if (rs.type == RopeScalingType::kLongRope) {
    // transformers: inv_freq = 1 / (ext_factors * base^(2i/d)), float32.
    const std::vector<float>& ext = rs.use_long_factor ? rs.long_factor : rs.short_factor;
    for (int32_t i = 0; i < half && i < static_cast<int32_t>(ext.size()); ++i)
      inv[i] = 1.0f / (ext[i] * std::pow(rope_theta, static_cast<float>(2 * i) / static_cast<float>(d)));
  }
  for (size_t i = 0; i < rope_freq_factors.size() && i < inv.size(); ++i)
    inv[i] /= rope_freq_factors[i];
  return inv;
}

void ModelConfig::select_longrope(int32_t max_model_len) {
  if (rope_scaling.type != RopeScalingType::kLongRope) return;
  const int32_t ctx = max_model_len > 0 ? max_model_len : max_position_embeddings;
  rope_scaling.use_long_factor = ctx > rope_scaling.original_max_position_embeddings;
}

std::vector<float> ModelConfig::rope_inv_freq_local() const {
  const int32_t d = rope_dim(), half = d / 2;
  std::vector<float> inv(half);
  for (int32_t i = 0; i < half; ++i)  // as rope_inv_freq, unscaled
    inv[i] = 1.0f / std::pow(rope_local_base_freq, static_cast<float>(2 * i) / static_cast<float>(d));
  return inv;
}

float ModelConfig::attention_scale() const {
  const float base = query_pre_attn_scalar > 0.0f ? query_pre_attn_scalar : static_cast<float>(head_dim);
  return 1.0f / std::sqrt(base) * softmax_scale_factor();
}

float ModelConfig::rope_attention_factor() const {
  if (rope_scaling.type == RopeScalingType::kLongRope)
    return rope_scaling.attention_factor > 0.0f ? rope_scaling.attention_factor : 1.0f;
  if (rope_scaling.type != RopeScalingType::kYarn) return 1.0f;
  if (rope_scaling.attention_factor > 0.0f) return rope_scaling.attention_factor;
  const double f = rope_scaling.factor;
  return f <= 1.0 ? 1.0f : static_cast<float>(0.1 * std::log(f) + 1.0);
}

float ModelConfig::softmax_scale_factor() const {
  const RopeScaling& rs = rope_scaling;
  if (rs.type != RopeScalingType::kYarn || !(rs.mscale_all_dim > 0.0f) || rs.factor <= 1.0f) return 1.0f;
  const double m = 0.1 * rs.mscale_all_dim * std::log(double(rs.factor)) + 1.0;
  return static_cast<float>(m * m);
}

}  // namespace llmserve
