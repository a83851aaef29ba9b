#include "models/llama.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "models/moe.h"
#include "models/qkv_epilogue.h"
#include "models/weight_loader.h"

namespace llmserve {
namespace {

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  WeightMatrix w_qkv;            // [(n_heads + 2 n_kv) * hd, dim] = Wq; Wk; Wv stacked
  std::vector<float> b_qkv;      // [(n_heads + 2 n_kv) * hd] = bq; bk; bv (Qwen2), or empty
  std::vector<float> q_norm, k_norm;  // [hd] per-head RMSNorm weights (Qwen3), or empty
  WeightMatrix wo;               // [dim, n_heads*hd]
  std::vector<float> ffn_norm;   // [dim]
  WeightMatrix w_gate_up;        // [2 ffn, dim] = Wgate; Wup stacked
  WeightMatrix w_down;           // [dim, ffn]
  MoeWeights moe;                // Qwen3-MoE: the experts instead of w_gate_up / w_down
};

class LlamaModel final : public Model {
 public:
  explicit LlamaModel(const ModelConfig& c)
      : cfg_(c), inv_freq_(c.rope_inv_freq()), attention_factor_(c.rope_attention_factor()) {}

  Status load(const ModelFile& file, const ModelLoadOptions& options) {
    WeightLoader w(file, options.dtype);
    const int64_t dim = cfg_.dim, q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
    const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
    LLMS_ASSIGN_OR_RETURN(EmbeddingAndHead ends, load_embedding_and_head(w, cfg_));
    embedding_ = ends.embedding;
    classifier_ = ends.classifier;
    final_norm_ = std::move(ends.final_norm);
    layers_.resize(cfg_.n_layers);
    // Each layer's matrices are repacked together on the load's threads once it is read (not
    // all at the end: the in-memory copies a repack releases, e.g. a float Wq;Wk;Wv stack,
    // would otherwise all be held at once).
    std::vector<PrepareJob> jobs;
    for (int32_t i = 0; i < cfg_.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LayerWeights& l = layers_[i];
      LLMS_ASSIGN_OR_RETURN(l.attn_norm, w.vector(p + "attn_norm.weight", dim));
      // Q, K, V (and gate, up) are stacked into one matrix each at load time, so that one
      // GEMM reads the normalised activations once (same dtype as the file; a copy).
      WeightMatrix qkv[3], gate_up[2];
      if (file.find_tensor(p + "attn_qkv.weight") != nullptr ||
          (cfg_.architecture == "phi3" && file.find_tensor(p + "attn_q.weight") == nullptr)) {  // Phi-3: fused
        LLMS_ASSIGN_OR_RETURN(l.w_qkv, w.matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, dim));
      } else {
        LLMS_ASSIGN_OR_RETURN(qkv[0], w.matrix(p + "attn_q.weight", q_dim, dim));
        LLMS_ASSIGN_OR_RETURN(qkv[1], w.matrix(p + "attn_k.weight", kv_dim, dim));
        LLMS_ASSIGN_OR_RETURN(qkv[2], w.matrix(p + "attn_v.weight", kv_dim, dim));
        LLMS_ASSIGN_OR_RETURN(l.w_qkv, concat_rows(qkv));
      }
      if (cfg_.attention_bias) {  // Qwen2: y = x·W^T + b for q, k and v
        LLMS_ASSIGN_OR_RETURN(std::vector<float> bq, w.vector(p + "attn_q.bias", q_dim));
        LLMS_ASSIGN_OR_RETURN(std::vector<float> bk, w.vector(p + "attn_k.bias", kv_dim));
        LLMS_ASSIGN_OR_RETURN(std::vector<float> bv, w.vector(p + "attn_v.bias", kv_dim));
        l.b_qkv = std::move(bq);
        l.b_qkv.insert(l.b_qkv.end(), bk.begin(), bk.end());
        l.b_qkv.insert(l.b_qkv.end(), bv.begin(), bv.end());
      }
      if (cfg_.qk_norm) {  // Qwen3: RMSNorm over each head of q and k before RoPE
        LLMS_ASSIGN_OR_RETURN(l.q_norm, w.vector(p + "attn_q_norm.weight", cfg_.head_dim));
        LLMS_ASSIGN_OR_RETURN(l.k_norm, w.vector(p + "attn_k_norm.weight", cfg_.head_dim));
      }
      for (const char* extra : {"attn_output.bias", "ffn_gate_inp.weight"}) {
        if (cfg_.is_moe() && std::string(extra) == "ffn_gate_inp.weight") continue;
        if (const TensorView* t = file.find_tensor(p + extra))
          return Unimplemented("{}: tensor {} is not supported (an output-projection bias, or an "
                               "MoE router in a file without {}.expert_count)", file.path(), t->name,
                               cfg_.architecture);
      }
      if (const TensorView* t = file.find_tensor(p + "attn_q.bias"); t && !cfg_.attention_bias)
        return InvalidArgument("{}: the checkpoint has q/k/v biases ({}) but the config says "
                               "attention_bias = false", file.path(), t->name);
      LLMS_ASSIGN_OR_RETURN(l.wo, w.matrix(p + "attn_output.weight", dim, q_dim));
      LLMS_ASSIGN_OR_RETURN(l.ffn_norm, w.vector(p + "ffn_norm.weight", dim));
      jobs = {{&l.w_qkv}, {&l.wo}};
      if (cfg_.is_moe()) {
        prepare_weights(jobs, options.pool);
        LLMS_ASSIGN_OR_RETURN(l.moe, load_moe_weights(w, cfg_, i, options.pool));
        continue;
      }
      if (cfg_.architecture == "phi3") {  // ffn_up holds gate then up (HF gate_up_proj)
        LLMS_ASSIGN_OR_RETURN(l.w_gate_up, w.matrix(p + "ffn_up.weight", 2 * int64_t{cfg_.ffn_dim}, dim));
      } else {
        LLMS_ASSIGN_OR_RETURN(gate_up[0], w.matrix(p + "ffn_gate.weight", cfg_.ffn_dim, dim));
        LLMS_ASSIGN_OR_RETURN(gate_up[1], w.matrix(p + "ffn_up.weight", cfg_.ffn_dim, dim));
        LLMS_ASSIGN_OR_RETURN(l.w_gate_up, concat_rows(gate_up));
      }
      LLMS_ASSIGN_OR_RETURN(l.w_down, w.matrix(p + "ffn_down.weight", dim, cfg_.ffn_dim));
      jobs.push_back({&l.w_gate_up, WeightUse::kSiluMul});
      jobs.push_back({&l.w_down});
      prepare_weights(jobs, options.pool);
    }
    w.mark_used("rope_freqs.weight");  // read into the config (llama3 frequency factors)
    w.mark_used("rope_factors_long.weight");   // read into the config (LongRoPE)
    w.mark_used("rope_factors_short.weight");
    LLMS_RETURN_IF_ERROR(w.check_all_used());
    w.log_conversions();
    if (!cfg_.tie_word_embeddings) prepare_weight(classifier_);
    return Status::Ok();
  }

  const ModelConfig& config() const override { return cfg_; }

  void forward(const ForwardBatch& b, const KVCacheLayer* kv_cache,
               const AttentionBackend& attention, ThreadPool* pool, float* logits) override {
    const int64_t T = b.num_tokens, dim = cfg_.dim, hd = cfg_.head_dim;
    const int32_t half = cfg_.rope_dim() / 2;
    const float eps = cfg_.rms_norm_eps;
    resize_scratch(T);
    // Embedding rows are converted (dequantized for quantized types) on lookup.
    const size_t emb_row = static_cast<size_t>(dtype_row_bytes(embedding_.dtype, dim));
    for (int64_t t = 0; t < T; ++t) {
      to_f32(static_cast<const uint8_t*>(embedding_.data) + b.token_ids[t] * emb_row,
             embedding_.dtype, dim, &x_[t * dim]);
      // RoPE angles depend only on the position: computed once per step, used by all layers.
      // YaRN's attention factor (DeepSeek: its mscale ratio) on cos and sin.
      rope_cos_sin(b.positions[t], inv_freq_.data(), half, &rope_cos_[t * half], &rope_sin_[t * half],
                   attention_factor_);
    }

    const AttentionShape shape{cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                               1.0f / std::sqrt(static_cast<float>(hd))};
    for (int64_t t = 0; t < T; ++t)
      rmsnorm(&x_[t * dim], layers_[0].attn_norm.data(), &xn_[t * dim], dim, eps);
    for (int32_t li = 0; li < cfg_.n_layers; ++li) {
      const LayerWeights& l = layers_[li];
      // Attention block: one QKV GEMM whose epilogue applies RoPE and writes K/V to the cache.
      AttentionShape layer_shape = shape;
      layer_shape.window = cfg_.layer_window(li);
      const AttentionMetadata& meta = b.attn_for(layer_shape.window > 0);
      const QkvEpilogue qkv_epilogue(cfg_, QkvEpilogue::Extras::of(l.b_qkv, l.q_norm, l.k_norm),
                                     rope_cos_.data(), rope_sin_.data(), meta.slot_mapping,
                                     kv_cache[li], q_.data());
      gemm(xn_.data(), T, l.w_qkv, qkv_.data(), pool, GemmOutput::kStore, &qkv_epilogue);
      attention.forward(meta, layer_shape, q_.data(), kv_cache[li], att_.data(), pool);
      gemm(att_.data(), T, l.wo, delta_.data(), pool);
      // Residual add fused with the MLP's RMSNorm.
      for (int64_t t = 0; t < T; ++t)
        fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], l.ffn_norm.data(), &xn_[t * dim], dim,
                          eps);
      // MLP block: gate and up in one GEMM with SiLU·mul in its epilogue, then down (for an
      // MoE model, those of each token's chosen experts).
      if (cfg_.is_moe()) {
        moe_.forward(cfg_, l.moe, xn_.data(), T, delta_.data(), pool);
      } else {
        gemm_silu_mul(xn_.data(), T, l.w_gate_up, h_.data(), pool);
        gemm(h_.data(), T, l.w_down, delta_.data(), pool);
      }
      if (li + 1 < cfg_.n_layers) {
        for (int64_t t = 0; t < T; ++t)
          fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], layers_[li + 1].attn_norm.data(),
                            &xn_[t * dim], dim, eps);
      }
    }
    // Last residual add + final norm only for the rows that need logits.
    for (int32_t i = 0; i < b.num_logits; ++i) {
      const int64_t t = b.logits_indices[i];
      fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], final_norm_.data(), &xn_[i * dim], dim,
                        eps);
    }
    gemm(xn_.data(), b.num_logits, classifier_, logits, pool);
  }

 private:
  void resize_scratch(int64_t T) {
    if (T <= scratch_tokens_) return;  // grows to the largest batch seen, then stays
    scratch_tokens_ = T;
    const int64_t q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
    const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
    x_.resize(T * cfg_.dim);
    xn_.resize(T * cfg_.dim);
    delta_.resize(T * cfg_.dim);
    qkv_.resize(T * (q_dim + 2 * kv_dim));
    q_.resize(T * q_dim);
    att_.resize(T * q_dim);
    h_.resize(T * cfg_.ffn_dim);
    rope_cos_.resize(T * (cfg_.rope_dim() / 2));
    rope_sin_.resize(T * (cfg_.rope_dim() / 2));
  }

  ModelConfig cfg_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  float attention_factor_;       // RoPE cos/sin multiplier (YaRN), else 1
  WeightMatrix embedding_, classifier_;
  std::vector<float> final_norm_;
  std::vector<LayerWeights> layers_;
  // Activation scratch, [num_tokens, width] row-major, reused across steps.
  int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, delta_, qkv_, q_, att_, h_, rope_cos_, rope_sin_;
  MoeMlp moe_;
};

}  // namespace

Expected<std::unique_ptr<Model>> create_llama_model(const ModelFile& file,
                                                    const ModelLoadOptions& options) {
  auto model = std::make_unique<LlamaModel>(config_for_load(file, options));
  LLMS_RETURN_IF_ERROR(model->load(file, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace llmserve
