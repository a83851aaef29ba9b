#include "config/model_config.h"

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
  if (head_dim % 2 != 0)
    return InvalidArgument("model config: head_dim ({}) must be even for RoPE", head_dim);
  if (!(rms_norm_eps > 0.0f) || !(rope_theta > 0.0f))
    return InvalidArgument("model config: rms_norm_eps ({}) and rope_theta ({}) must be > 0",
                           rms_norm_eps, rope_theta);
  return Status::Ok();
}

std::string ModelConfig::attention_type() const {
  if (n_kv_heads == n_heads) return "MHA";
  if (n_kv_heads == 1) return "MQA";
  return "GQA";
}

}  // namespace llmserve
