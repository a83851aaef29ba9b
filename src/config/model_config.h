// ModelConfig: the hyperparameters of a decoder-only transformer, filled by a weights loader
// (GGUF metadata, llama2.c header, Hugging Face config.json) and checked by validate().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace llmserve {

/// How RoPE pairs dimensions within a head.
enum class RopeStyle {
  kAdjacentPairs,  // (x[2i], x[2i+1]) rotate together: llama2.c, GGUF "llama" (GPT-J style),
                   // DeepSeek-V2 (HF and GGUF)
  kRotateHalf,     // (x[i], x[i + rope_dim/2]): Hugging Face Llama/Qwen, GGUF qwen2/qwen3
                   // (GPT-NeoX style)
};

/// How a mixture-of-experts router turns logits into expert scores.
enum class MoeScoring {
  kSoftmax,  // softmax over all experts (Qwen-MoE, Mixtral, DeepSeek-V2)
  kSigmoid,  // an independent sigmoid per expert (DeepSeek-V3 scoring_func "sigmoid")
};

/// How group-limited routing scores a group of experts (n_expert_groups > 1).
enum class MoeGroupScore {
  kMax,      // its best expert's score (DeepSeek-V2 topk_method "group_limited_greedy")
  kTop2Sum,  // the sum of its two best selection scores (DeepSeek-V3 "noaux_tc")
};

/// The activation of the MLP's gate (the product with `up` is the same for both).
enum class MlpActivation {
  kSilu,      // SwiGLU (Shazeer 2020): Llama, Mistral, Qwen, Phi-3, DeepSeek
  kGeluTanh,  // GeGLU with the tanh approximation of GELU (Gemma's hidden_activation
              // "gelu_pytorch_tanh"; Hendrycks & Gimpel 2016)
};

/// RoPE frequency scaling (HF config.json "rope_scaling"; GGUF rope.scaling.* / rope_freqs).
enum class RopeScalingType {
  kNone,
  kLinear,  // position interpolation (Chen et al. 2023): every inv_freq / factor
  kLlama3,  // Llama 3.1: low frequencies / factor, high kept, smooth ramp between
            // (transformers' _compute_llama3_parameters)
  kYarn,    // YaRN (Peng et al. 2023, arXiv 2309.00071; transformers'
            // _compute_yarn_parameters): frequencies blended between interpolated and kept by
            // a linear ramp over the dimensions, cos and sin scaled by an attention factor
  kLongRope,  // LongRoPE (Ding et al. 2024, arXiv 2402.13753; Phi-3 "longrope", transformers'
              // _compute_longrope_parameters): inv_freq[i] / ext[i] with per-dimension factors,
              // the long ones when the context exceeds original_max_position_embeddings
};

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;    // llama3
  float high_freq_factor = 4.0f;   // llama3
  int32_t original_max_position_embeddings = 8192;  // llama3, yarn
  float beta_fast = 32.0f;        // yarn: rotations where the ramp starts (kept above)
  float beta_slow = 1.0f;         // yarn: rotations where it ends (interpolated below)
  bool truncate = true;           // yarn: correction range floored / ceiled to whole dims
  /// yarn: cos and sin are multiplied by this (q.k by its square); 0 = the default
  /// 0.1 ln(factor) + 1 (get_mscale), or get_mscale(factor, mscale) /
  /// get_mscale(factor, mscale_all_dim) when the config gives both.
  float attention_factor = 0.0f;
  /// DeepSeek's YaRN (modeling_deepseek.py DeepseekV2Attention): the softmax scale
  /// 1/sqrt(qk_head_dim) is also multiplied by get_mscale(factor, mscale_all_dim)^2; 0 = not.
  float mscale_all_dim = 0.0f;
  /// longrope: per-dimension divisors of inv_freq ([rope_dim / 2] each), `long_factor` for
  /// contexts longer than original_max_position_embeddings, `short_factor` otherwise;
  /// attention_factor (cos/sin multiplier) is set by the loader (transformers' default
  /// sqrt(1 + ln(s) / ln(original)), s = max_position_embeddings / original).
  std::vector<float> long_factor, short_factor;
  /// longrope: which list applies. Chosen once per engine from the context it serves
  /// (select_longrope: max_model_len > original_max_position_embeddings, llama.cpp's rule by
  /// n_ctx), so a sequence's RoPE never depends on what else is batched or on its own length.
  bool use_long_factor = true;
};

/// What one token occupies in one layer's KV cache. K (and V, unless v_shares_k) are each
/// [num_blocks, block_size, num_heads, head_size] tensors.
struct KvCacheSpec {
  int32_t num_heads = 0;   // n_kv_heads; 1 for MLA
  int32_t head_size = 0;   // head_dim; kv_lora_rank + qk_rope_head_dim for MLA
  /// MLA: one latent tensor [c_kv | k_rope]; attention reads V as the first kv_lora_rank
  /// values of each K row (no V tensor exists).
  bool v_shares_k = false;
};

struct ModelConfig {
  /// Internal architecture name (GGUF general.architecture spelling): "llama", "qwen2",
  /// "qwen3", "deepseek2". Mistral loads as "llama".
  std::string architecture = "llama";
  std::string name;                    // served model name default (file / directory stem)
  int32_t vocab_size = 0;
  int32_t dim = 0;          // hidden size
  int32_t n_layers = 0;
  int32_t n_heads = 0;      // query heads
  /// Key/value heads as cached: == n_heads MHA, 1 MQA, otherwise GQA. MLA: 1 (the latent).
  int32_t n_kv_heads = 0;
  /// Query/key head size: usually dim / n_heads; MLA: qk_nope_head_dim + qk_rope_head_dim.
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;      // SwiGLU hidden size
  int32_t max_position_embeddings = 0;  // trained / declared context length (tokens)
  /// Sliding-window attention span (tokens; 0 = none): a sliding layer's query at position p
  /// attends to p - sliding_window + 1 .. p (AttentionShape::window; transformers'
  /// sliding_window mask). Which layers slide: sliding_layers.
  int32_t sliding_window = 0;
  /// Per layer, 1 when it uses the window (Qwen2's use_sliding_window: layers >=
  /// max_window_layers; HF layer_types "sliding_attention"); empty = every layer (Mistral,
  /// Phi-3, a GGUF attention.sliding_window).
  std::vector<uint8_t> sliding_layers;
  /// The window of layer `layer` (0 = full attention).
  int32_t layer_window(int32_t layer) const {
    if (sliding_window <= 0) return 0;
    if (sliding_layers.empty()) return sliding_window;
    return layer >= 0 && layer < static_cast<int32_t>(sliding_layers.size()) && sliding_layers[layer] ? sliding_window
                                                                                                        : 0;
  }
  /// Whether every layer slides: then a sequence's blocks wholly before the window of its
  /// next query can return to the pool (the scheduler does so).
  bool all_layers_sliding() const {
    if (sliding_window <= 0) return false;
    for (uint8_t s : sliding_layers)
      if (!s) return false;
    return true;
  }
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
  RopeScaling rope_scaling;
  /// GGUF rope_freqs.weight (llama.cpp's precomputed llama3 factors): inv_freq[i] /= f[i].
  std::vector<float> rope_freq_factors;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2; HF attention_bias)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  /// Partial rotary embeddings (Phi-3/Phi-4-mini partial_rotary_factor, GGUF
  /// rope.dimension_count < head_dim): RoPE rotates each q/k head's first rotary_dim values,
  /// the rest pass through; 0 = the whole head.
  int32_t rotary_dim = 0;

  // Gemma 2 / Gemma 3 (transformers' modeling_gemma2 / modeling_gemma3; Gemma Team 2024,
  // arXiv:2408.00118 and arXiv:2503.19786).
  /// The MLP gate's activation (HF hidden_activation).
  MlpActivation hidden_activation = MlpActivation::kSilu;
  /// Attention soft-capping (Gemma 2 attn_logit_softcapping, GGUF attn_logit_softcapping):
  /// each score s = q.k * scale becomes cap * tanh(s / cap) before the mask; 0 = off.
  float attn_logit_softcapping = 0.0f;
  /// The same on the final logits (Gemma 2 final_logit_softcapping); 0 = off.
  float final_logit_softcapping = 0.0f;
  /// Gemma's query_pre_attn_scalar: the attention scale is 1/sqrt(it) instead of
  /// 1/sqrt(head_dim); 0 = head_dim.
  float query_pre_attn_scalar = 0.0f;
  /// RoPE base of the sliding-window layers (Gemma 3 rope_local_base_freq, GGUF
  /// rope.freq_base_swa), which also skip rope_scaling (it applies to the full-attention
  /// layers only, as transformers' rotary_emb_local and llama.cpp's freq_scale_swa = 1);
  /// 0 = every layer uses rope_theta and rope_scaling.
  float rope_local_base_freq = 0.0f;
  /// Whether layer `layer` uses the local RoPE (rope_inv_freq_local) instead of rope_inv_freq.
  /// A Gemma3ForConditionalGeneration checkpoint: its vision tower's tensors are present but not
  /// loaded (the text model is served); any such tensor elsewhere is an unsupported feature.
  bool vision_tower_not_loaded = false;
  bool uses_local_rope(int32_t layer) const { return rope_local_base_freq > 0 && layer_window(layer) > 0; }

  // Mixture of experts in every layer's MLP (Qwen3-MoE; Fedus et al. 2021, "Switch
  // Transformers"; transformers' Qwen3MoeSparseMoeBlock): n_experts > 0 marks an MoE model.
  int32_t n_experts = 0;         // routed experts per layer (HF num_experts)
  int32_t n_experts_used = 0;    // experts each token uses (top-k, HF num_experts_per_tok)
  int32_t expert_ffn_dim = 0;    // one expert's SwiGLU hidden size (HF moe_intermediate_size)
  bool norm_topk_prob = true;    // renormalise the top-k router probabilities to sum to 1
  /// Qwen2-MoE's shared expert (0 = none): a SwiGLU MLP of this width every token goes
  /// through, scaled by sigmoid(x . shared_expert_gate), added to the routed experts' sum.
  int32_t shared_expert_ffn_dim = 0;
  /// Whether the shared expert is gated (Qwen2-MoE's sigmoid gate) or added as is (DeepSeek's
  /// n_shared_experts, one SwiGLU MLP of n_shared_experts * moe_intermediate_size).
  bool shared_expert_gated = true;
  /// Leading layers whose MLP is dense (DeepSeek first_k_dense_replace, GGUF
  /// leading_dense_block_count); the layers after them are MoE layers.
  int32_t n_dense_leading_layers = 0;
  /// Router scores from the logits: softmax over all experts (Qwen, Mixtral, DeepSeek-V2) or
  /// an elementwise sigmoid (DeepSeek-V3 scoring_func "sigmoid", GGUF expert_gating_func 2).
  MoeScoring moe_scoring = MoeScoring::kSoftmax;
  /// Group-limited routing (DeepSeek-V2 group_limited_greedy, V3 noaux_tc; DeepSeek-V3
  /// report sec. 2.1.2): the experts form n_expert_groups contiguous groups, each scored by
  /// moe_group_score over its selection scores; only the n_expert_groups_used best groups'
  /// experts can be chosen. 1 = no grouping.
  int32_t n_expert_groups = 1;
  int32_t n_expert_groups_used = 1;
  MoeGroupScore moe_group_score = MoeGroupScore::kMax;
  /// The routed experts' weights are multiplied by this after any renormalisation
  /// (DeepSeek routed_scaling_factor, GGUF expert_weights_scale).
  float routed_scaling_factor = 1.0f;
  /// Whether a layer's MLP is a mixture of experts (all of them but the leading dense ones).
  bool is_moe_layer(int32_t layer) const { return n_experts > 0 && layer >= n_dense_leading_layers; }
  bool is_moe() const { return n_experts > 0; }
  /// dtype of the token embedding (informational; for a GGUF quantized with llama-quantize
  /// the type of token_embd.weight, e.g. Q4_K in a Q4_K_M file, whose tensors mix types).
  DType weight_dtype = DType::kF32;

  // Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 sec. 2.1); kv_lora_rank > 0
  // marks an MLA model.
  int32_t q_lora_rank = 0;       // 0: q_proj directly (DeepSeek-V2-Lite)
  int32_t kv_lora_rank = 0;      // latent c_kv width
  int32_t qk_nope_head_dim = 0;  // per-head query/key part without RoPE
  int32_t qk_rope_head_dim = 0;  // decoupled RoPE key, shared by all heads
  int32_t v_head_dim = 0;        // per-head value width

  bool is_mla() const { return kv_lora_rank > 0; }
  /// The model's float dtype: the weights' dtype for float weights, float32 for quantized
  /// ones (their activations and float tensors). `--kv-cache-dtype auto` follows it, except
  /// float16 for quantized weights (auto_kv_dtype, models/model.h).
  DType default_kv_dtype() const {
    return is_quantized(weight_dtype) ? DType::kF32 : weight_dtype;
  }
  /// Dimensions RoPE rotates per head: qk_rope_head_dim for MLA, else head_dim.
  int32_t rope_dim() const {
    return is_mla() ? qk_rope_head_dim : rotary_dim > 0 ? rotary_dim : head_dim;
  }
  /// Width of one head of attention output (o_proj input per head).
  int32_t value_head_dim() const { return is_mla() ? v_head_dim : head_dim; }

  /// LongRoPE: picks long_factor when the served context (max_model_len; 0 = max_position_embeddings)
  /// exceeds original_max_position_embeddings, else short_factor. No effect for other scalings.
  void select_longrope(int32_t max_model_len);
  /// What RoPE's cos and sin are multiplied by: YaRN's or LongRoPE's attention factor, else 1.
  float rope_attention_factor() const;
  /// What the attention softmax scale is multiplied by: DeepSeek YaRN's
  /// get_mscale(factor, mscale_all_dim)^2 (get_mscale(s, m) = 0.1 m ln s + 1 for s > 1), else 1.
  float softmax_scale_factor() const;
  /// The attention softmax scale: 1/sqrt(query_pre_attn_scalar, else head_dim) times
  /// softmax_scale_factor() (the dense and Gemma models; MLA computes its own).
  float attention_scale() const;

  /// Checks positivity and divisibility (n_heads % n_kv_heads == 0, RoPE dims even, MLA
  /// dims consistent). Error messages name the field and value.
  Status validate() const;

  /// "MHA", "GQA", "MQA" from n_heads / n_kv_heads, or "MLA".
  std::string attention_type() const;

  /// The per-token, per-layer cache layout this attention needs.
  KvCacheSpec kv_cache_spec() const;

  /// KV cache bytes for one token in one layer: MHA/GQA/MQA 2 (K and V) * n_kv_heads *
  /// head_dim * elem; MLA (kv_lora_rank + qk_rope_head_dim) * elem.
  int64_t kv_bytes_per_token_per_layer(DType kv_dtype) const;

  /// The same for the model's MHA equivalent (every query head caches its own K and V):
  /// 2 * n_heads * head_dim * elem; MLA: n_heads * (qk_nope + qk_rope + v_head_dim) * elem
  /// (what DeepSeek-V2 would cache without the latent; paper table 1).
  int64_t mha_kv_bytes_per_token_per_layer(DType kv_dtype) const;

  /// inv_freq[i], i < rope_dim()/2: theta^(-2i/rope_dim), then rope_scaling and
  /// rope_freq_factors applied.
  std::vector<float> rope_inv_freq() const;
  /// The sliding layers' inv_freq when rope_local_base_freq is set: rope_local_base_freq^(-2i/rope_dim),
  /// unscaled.
  std::vector<float> rope_inv_freq_local() const;
};

}  // namespace llmserve
