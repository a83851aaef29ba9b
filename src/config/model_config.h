// ModelConfig: the hyperparameters of a decoder-only transformer, filled by a weights loader
// (GGUF metadata, llama2.c header, later HF config.json) and checked by validate().
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace llmserve {

/// How RoPE pairs dimensions within a head.
enum class RopeStyle {
  kAdjacentPairs,  // (x[2i], x[2i+1]) rotate together: llama2.c, GGUF "llama" (GPT-J style)
  kRotateHalf,     // (x[i], x[i + head_dim/2]): Hugging Face / GPT-NeoX style
};

struct ModelConfig {
  std::string architecture = "llama";  // GGUF general.architecture
  std::string name;                    // served model name default (file stem)
  int32_t vocab_size = 0;
  int32_t dim = 0;          // hidden size
  int32_t n_layers = 0;
  int32_t n_heads = 0;      // query heads
  int32_t n_kv_heads = 0;   // key/value heads: == n_heads MHA, 1 MQA, otherwise GQA
  int32_t head_dim = 0;     // usually dim / n_heads
  int32_t ffn_dim = 0;      // SwiGLU hidden size
  int32_t max_position_embeddings = 0;  // trained / declared context length (tokens)
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
  bool tie_word_embeddings = false;
  DType weight_dtype = DType::kF32;  // dtype of the largest weights (informational)

  /// Checks positivity and divisibility (n_heads % n_kv_heads == 0, head_dim even).
  /// Error messages name the field and value.
  Status validate() const;

  /// "MHA", "GQA" or "MQA" from n_heads / n_kv_heads.
  std::string attention_type() const;

  /// KV cache bytes for one token in one layer: 2 (K and V) * n_kv_heads * head_dim * elem.
  int64_t kv_bytes_per_token_per_layer(DType kv_dtype) const {
    return 2LL * n_kv_heads * head_dim * static_cast<int64_t>(dtype_size(kv_dtype));
  }
};

}  // namespace llmserve
