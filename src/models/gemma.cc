#include "models/gemma.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "models/qkv_epilogue.h"
#include "models/weight_loader.h"

namespace llmserve {
namespace {

struct GemmaLayer {
  std::vector<float> attn_norm, post_attention_norm, ffn_norm, post_ffw_norm;  // [dim], 1 + w
  std::vector<float> q_norm, k_norm;  // [head_dim] (Gemma 3), or empty
  WeightMatrix w_qkv;                 // [(n_heads + 2 n_kv) * hd, dim] = Wq; Wk; Wv
  WeightMatrix wo;                    // [dim, n_heads * hd]
  WeightMatrix w_gate_up;             // [2 ffn, dim] = Wgate; Wup
  WeightMatrix w_down;                // [dim, ffn]
};

class GemmaModel final : public Model {
 public:
  explicit GemmaModel(const ModelConfig& c)
      : cfg_(c), inv_freq_(c.rope_inv_freq()),
        inv_freq_local_(c.rope_local_base_freq > 0 ? c.rope_inv_freq_local() : std::vector<float>{}),
        attention_factor_(c.rope_attention_factor()) {}

  Status load(const ModelFile& file, const ModelLoadOptions& options) {
    WeightLoader w(file, options.dtype);
    const int64_t dim = cfg_.dim, q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
    const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
    LLMS_ASSIGN_OR_RETURN(EmbeddingAndHead ends, load_embedding_and_head(w, cfg_));
    embedding_ = ends.embedding;
    classifier_ = ends.classifier;
    final_norm_ = std::move(ends.final_norm);
    layers_.resize(cfg_.n_layers);
    for (int32_t i = 0; i < cfg_.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      GemmaLayer& l = layers_[i];
      LLMS_ASSIGN_OR_RETURN(l.attn_norm, w.vector(p + "attn_norm.weight", dim));
      LLMS_ASSIGN_OR_RETURN(l.post_attention_norm, w.vector(p + "post_attention_norm.weight", dim));
      LLMS_ASSIGN_OR_RETURN(l.ffn_norm, w.vector(p + "ffn_norm.weight", dim));
      LLMS_ASSIGN_OR_RETURN(l.post_ffw_norm, w.vector(p + "post_ffw_norm.weight", dim));
      if (cfg_.qk_norm) {
        LLMS_ASSIGN_OR_RETURN(l.q_norm, w.vector(p + "attn_q_norm.weight", cfg_.head_dim));
        LLMS_ASSIGN_OR_RETURN(l.k_norm, w.vector(p + "attn_k_norm.weight", cfg_.head_dim));
      }
      WeightMatrix qkv[3], gate_up[2];
      LLMS_ASSIGN_OR_RETURN(qkv[0], w.matrix(p + "attn_q.weight", q_dim, dim));
      LLMS_ASSIGN_OR_RETURN(qkv[1], w.matrix(p + "attn_k.weight", kv_dim, dim));
      LLMS_ASSIGN_OR_RETURN(qkv[2], w.matrix(p + "attn_v.weight", kv_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.w_qkv, concat_rows(qkv));
      LLMS_ASSIGN_OR_RETURN(l.wo, w.matrix(p + "attn_output.weight", dim, q_dim));
      LLMS_ASSIGN_OR_RETURN(gate_up[0], w.matrix(p + "ffn_gate.weight", cfg_.ffn_dim, dim));
      LLMS_ASSIGN_OR_RETURN(gate_up[1], w.matrix(p + "ffn_up.weight", cfg_.ffn_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.w_gate_up, concat_rows(gate_up));
      LLMS_ASSIGN_OR_RETURN(l.w_down, w.matrix(p + "ffn_down.weight", dim, cfg_.ffn_dim));
      prepare_weight(l.w_qkv);
      prepare_weight(l.wo);
      prepare_weight(l.w_gate_up);
      prepare_weight(l.w_down);
    }
    LLMS_RETURN_IF_ERROR(w.check_all_used());
    w.log_conversions();
    if (!cfg_.tie_word_embeddings) prepare_weight(classifier_);
    return Status::Ok();
  }

  const ModelConfig& config() const override { return cfg_; }

  void forward(const ForwardBatch& b, const KVCacheLayer* kv_cache, const AttentionBackend& attention,
               ThreadPool* pool, float* logits) override {
    const int64_t T = b.num_tokens, dim = cfg_.dim, F = cfg_.ffn_dim;
    const int32_t half = cfg_.rope_dim() / 2;
    const float eps = cfg_.rms_norm_eps;
    const bool local_rope = !inv_freq_local_.empty();
    resize_scratch(T);
    // transformers: hidden_states * hidden_size**0.5 (llama.cpp: sqrtf(n_embd)).
    const float embed_scale = std::sqrt(static_cast<float>(dim));
    const size_t emb_row = static_cast<size_t>(dtype_row_bytes(embedding_.dtype, dim));
    for (int64_t t = 0; t < T; ++t) {
      float* x = &x_[t * dim];
      to_f32(static_cast<const uint8_t*>(embedding_.data) + b.token_ids[t] * emb_row, embedding_.dtype, dim, x);
      for (int64_t i = 0; i < dim; ++i) x[i] *= embed_scale;
      rope_cos_sin(b.positions[t], inv_freq_.data(), half, &rope_cos_[t * half], &rope_sin_[t * half],
                   attention_factor_);
      if (local_rope)
        rope_cos_sin(b.positions[t], inv_freq_local_.data(), half, &local_cos_[t * half], &local_sin_[t * half]);
      rmsnorm(x, layers_[0].attn_norm.data(), &xn_[t * dim], dim, eps);
    }
    AttentionShape shape{cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim, cfg_.attention_scale()};
    shape.softcap = cfg_.attn_logit_softcapping;
    for (int32_t li = 0; li < cfg_.n_layers; ++li) {
      const GemmaLayer& l = layers_[li];
      const bool local = local_rope && cfg_.uses_local_rope(li);
      AttentionShape layer_shape = shape;
      layer_shape.window = cfg_.layer_window(li);
      const AttentionMetadata& meta = b.attn_for(layer_shape.window > 0);
      const QkvEpilogue qkv_epilogue(cfg_, QkvEpilogue::Extras::of({}, l.q_norm, l.k_norm),
                                     local ? local_cos_.data() : rope_cos_.data(),
                                     local ? local_sin_.data() : rope_sin_.data(), meta.slot_mapping, kv_cache[li],
                                     q_.data());
      gemm(xn_.data(), T, l.w_qkv, qkv_.data(), pool, GemmOutput::kStore, &qkv_epilogue);
      attention.forward(meta, layer_shape, q_.data(), kv_cache[li], att_.data(), pool);
      gemm(att_.data(), T, l.wo, delta_.data(), pool);
      // h += post_attention_norm(attention out); x = ffn_norm(h).
      for (int64_t t = 0; t < T; ++t) {
        float* d = &delta_[t * dim];
        rmsnorm(d, l.post_attention_norm.data(), d, dim, eps);
        fused_add_rmsnorm(&x_[t * dim], d, l.ffn_norm.data(), &xn_[t * dim], dim, eps);
      }
      // GeGLU: gate and up in one GEMM, then gelu_tanh(gate) * up per row, then down.
      gemm(xn_.data(), T, l.w_gate_up, gate_up_.data(), pool);
      for (int64_t t = 0; t < T; ++t) {
        const float* gu = &gate_up_[t * 2 * F];
        gelu_tanh_mul(gu, gu + F, &h_[t * F], F);
      }
      gemm(h_.data(), T, l.w_down, delta_.data(), pool);
      const float* next_norm = li + 1 < cfg_.n_layers ? layers_[li + 1].attn_norm.data() : nullptr;
      for (int64_t t = 0; t < T; ++t) {
        float* d = &delta_[t * dim];
        rmsnorm(d, l.post_ffw_norm.data(), d, dim, eps);
        if (next_norm != nullptr) fused_add_rmsnorm(&x_[t * dim], d, next_norm, &xn_[t * dim], dim, eps);
      }
    }
    // Last residual add + final norm only for the rows that need logits.
    for (int32_t i = 0; i < b.num_logits; ++i) {
      const int64_t t = b.logits_indices[i];
      fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], final_norm_.data(), &xn_[i * dim], dim, eps);
    }
    gemm(xn_.data(), b.num_logits, classifier_, logits, pool);
    if (cfg_.final_logit_softcapping > 0)  // logits = cap * tanh(logits / cap)
      softcap_inplace(logits, int64_t{b.num_logits} * cfg_.vocab_size, cfg_.final_logit_softcapping);
  }

 private:
  void resize_scratch(int64_t T) {
    if (T <= scratch_tokens_) return;  // grows to the largest batch seen, then stays
    scratch_tokens_ = T;
    const int64_t q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
    const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
    const int64_t half = cfg_.rope_dim() / 2;
    x_.resize(T * cfg_.dim);
    xn_.resize(T * cfg_.dim);
    delta_.resize(T * cfg_.dim);
    qkv_.resize(T * (q_dim + 2 * kv_dim));
    q_.resize(T * q_dim);
    att_.resize(T * q_dim);
    gate_up_.resize(T * 2 * cfg_.ffn_dim);
    h_.resize(T * cfg_.ffn_dim);
    rope_cos_.resize(T * half);
    rope_sin_.resize(T * half);
    if (!inv_freq_local_.empty()) {
      local_cos_.resize(T * half);
      local_sin_.resize(T * half);
    }
  }

  ModelConfig cfg_;
  std::vector<float> inv_freq_;        // [rope_dim / 2]: global (full-attention) layers
  std::vector<float> inv_freq_local_;  // [rope_dim / 2]: sliding layers (Gemma 3), or empty
  float attention_factor_;
  WeightMatrix embedding_, classifier_;
  std::vector<float> final_norm_;
  std::vector<GemmaLayer> layers_;
  int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, delta_, qkv_, q_, att_, gate_up_, h_, rope_cos_, rope_sin_, local_cos_, local_sin_;
};

}  // namespace

Expected<std::unique_ptr<Model>> create_gemma_model(const ModelFile& file, const ModelLoadOptions& options) {
  auto model = std::make_unique<GemmaModel>(config_for_load(file, options));
  LLMS_RETURN_IF_ERROR(model->load(file, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace llmserve
