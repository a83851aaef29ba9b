#include "models/llama.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace llmserve {
namespace {

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  WeightMatrix wq, wk, wv, wo;   // [n_heads*hd, dim], [n_kv*hd, dim] x2, [dim, n_heads*hd]
  std::vector<float> ffn_norm;   // [dim]
  WeightMatrix w_gate, w_up;     // [ffn, dim]
  WeightMatrix w_down;           // [dim, ffn]
};

/// Loads tensors by GGUF name and checks their shapes against the config.
class WeightLoader {
 public:
  explicit WeightLoader(const ModelFile& file) : file_(file) {}

  Expected<WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, file_.tensor(name));
    LLMS_RETURN_IF_ERROR(check_shape(*t, {rows, cols}));
    return WeightMatrix{t->data, t->dtype, rows, cols};
  }

  Expected<std::vector<float>> vector(const std::string& name, int64_t n) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, file_.tensor(name));
    LLMS_RETURN_IF_ERROR(check_shape(*t, {n}));
    std::vector<float> out(n);
    to_f32(t->data, t->dtype, n, out.data());
    return out;
  }

 private:
  Status check_shape(const TensorView& t, const std::vector<int64_t>& want) {
    if (t.shape != want)
      return DataLoss("{}: tensor {} has shape [{}], expected [{}] from the model config",
                      file_.path(), t.name, fmt::join(t.shape, ", "), fmt::join(want, ", "));
    return Status::Ok();
  }
  const ModelFile& file_;
};

class LlamaModel final : public Model {
 public:
  explicit LlamaModel(const ModelConfig& c) : cfg_(c) {
    inv_freq_.resize(c.head_dim / 2);
    for (int32_t i = 0; i < c.head_dim / 2; ++i)  // run.c: 1 / theta^(2i / head_dim)
      inv_freq_[i] = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * i) / c.head_dim);
  }

  Status load(const ModelFile& file) {
    WeightLoader w(file);
    const int64_t dim = cfg_.dim, q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
    const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
    LLMS_ASSIGN_OR_RETURN(embedding_, w.matrix("token_embd.weight", cfg_.vocab_size, dim));
    LLMS_ASSIGN_OR_RETURN(final_norm_, w.vector("output_norm.weight", dim));
    if (cfg_.tie_word_embeddings) {
      classifier_ = embedding_;
    } else {
      LLMS_ASSIGN_OR_RETURN(classifier_, w.matrix("output.weight", cfg_.vocab_size, dim));
    }
    layers_.resize(cfg_.n_layers);
    for (int32_t i = 0; i < cfg_.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LayerWeights& l = layers_[i];
      LLMS_ASSIGN_OR_RETURN(l.attn_norm, w.vector(p + "attn_norm.weight", dim));
      LLMS_ASSIGN_OR_RETURN(l.wq, w.matrix(p + "attn_q.weight", q_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.wk, w.matrix(p + "attn_k.weight", kv_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.wv, w.matrix(p + "attn_v.weight", kv_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.wo, w.matrix(p + "attn_output.weight", dim, q_dim));
      LLMS_ASSIGN_OR_RETURN(l.ffn_norm, w.vector(p + "ffn_norm.weight", dim));
      LLMS_ASSIGN_OR_RETURN(l.w_gate, w.matrix(p + "ffn_gate.weight", cfg_.ffn_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.w_up, w.matrix(p + "ffn_up.weight", cfg_.ffn_dim, dim));
      LLMS_ASSIGN_OR_RETURN(l.w_down, w.matrix(p + "ffn_down.weight", dim, cfg_.ffn_dim));
    }
    return Status::Ok();
  }

  const ModelConfig& config() const override { return cfg_; }

  void forward(const ForwardBatch& b, const KVCacheLayer* kv_cache,
               const AttentionBackend& attention, ThreadPool* pool, float* logits) override {
    const int64_t T = b.num_tokens, dim = cfg_.dim, hd = cfg_.head_dim;
    const int64_t q_dim = cfg_.n_heads * hd, kv_dim = cfg_.n_kv_heads * hd;
    resize_scratch(T);
    const size_t emb_row = dim * dtype_size(embedding_.dtype);
    for (int64_t t = 0; t < T; ++t)
      to_f32(static_cast<const uint8_t*>(embedding_.data) + b.token_ids[t] * emb_row,
             embedding_.dtype, dim, &x_[t * dim]);

    const AttentionShape shape{cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                               1.0f / std::sqrt(static_cast<float>(hd))};
    for (int32_t li = 0; li < cfg_.n_layers; ++li) {
      const LayerWeights& l = layers_[li];
      // Attention block.
      for (int64_t t = 0; t < T; ++t)
        rmsnorm(&x_[t * dim], l.attn_norm.data(), &xn_[t * dim], dim, cfg_.rms_norm_eps);
      matmul(xn_.data(), T, l.wq, q_.data(), pool);
      matmul(xn_.data(), T, l.wk, k_.data(), pool);
      matmul(xn_.data(), T, l.wv, v_.data(), pool);
      for (int64_t t = 0; t < T; ++t) {
        rope(&q_[t * q_dim], cfg_.n_heads, cfg_.head_dim, b.positions[t], inv_freq_.data(),
             cfg_.rope_style);
        rope(&k_[t * kv_dim], cfg_.n_kv_heads, cfg_.head_dim, b.positions[t], inv_freq_.data(),
             cfg_.rope_style);
      }
      attention.write_kv(b.attn, shape, k_.data(), v_.data(), kv_cache[li]);
      attention.forward(b.attn, shape, q_.data(), kv_cache[li], att_.data(), pool);
      matmul(att_.data(), T, l.wo, xn_.data(), pool);
      add_inplace(x_.data(), xn_.data(), T * dim);
      // MLP block.
      for (int64_t t = 0; t < T; ++t)
        rmsnorm(&x_[t * dim], l.ffn_norm.data(), &xn_[t * dim], dim, cfg_.rms_norm_eps);
      matmul(xn_.data(), T, l.w_gate, gate_.data(), pool);
      matmul(xn_.data(), T, l.w_up, up_.data(), pool);
      silu_mul(gate_.data(), up_.data(), gate_.data(), T * cfg_.ffn_dim);
      matmul(gate_.data(), T, l.w_down, xn_.data(), pool);
      add_inplace(x_.data(), xn_.data(), T * dim);
    }
    // Final norm and classifier only for the rows that need logits.
    for (int32_t i = 0; i < b.num_logits; ++i)
      rmsnorm(&x_[int64_t{b.logits_indices[i]} * dim], final_norm_.data(), &xn_[i * dim], dim,
              cfg_.rms_norm_eps);
    matmul(xn_.data(), b.num_logits, classifier_, logits, pool);
  }

 private:
  void resize_scratch(int64_t T) {
    if (T <= scratch_tokens_) return;  // grows to the largest batch seen, then stays
    scratch_tokens_ = T;
    const int64_t q_dim = int64_t{cfg_.n_heads} * cfg_.head_dim;
    const int64_t kv_dim = int64_t{cfg_.n_kv_heads} * cfg_.head_dim;
    x_.resize(T * cfg_.dim);
    xn_.resize(T * std::max<int64_t>(cfg_.dim, q_dim));
    q_.resize(T * q_dim);
    att_.resize(T * q_dim);
    k_.resize(T * kv_dim);
    v_.resize(T * kv_dim);
    gate_.resize(T * cfg_.ffn_dim);
    up_.resize(T * cfg_.ffn_dim);
  }

  ModelConfig cfg_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  WeightMatrix embedding_, classifier_;
  std::vector<float> final_norm_;
  std::vector<LayerWeights> layers_;
  // Activation scratch, [num_tokens, width] row-major, reused across steps.
  int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_, up_;
};

}  // namespace

Expected<std::unique_ptr<Model>> create_llama_model(const ModelFile& file) {
  auto model = std::make_unique<LlamaModel>(file.config());
  LLMS_RETURN_IF_ERROR(model->load(file));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace llmserve
