// DeepSeek-V2 forward pass with Multi-head Latent Attention in the absorbed ("weight
// absorption") form. Sources: DeepSeek-V2 paper (arXiv:2405.04434) sec. 2.1, eqs. 9-19 and
// the remark that W^UK can be absorbed into W^Q and W^UV into W^O; Hugging Face
// modeling_deepseek.py (DeepseekV2Attention) for tensor layouts, the q_a/kv_a RMSNorms, the
// RoPE placement (q_pe and k_pe only, k_pe shared by all heads) and the softmax scale
// 1/sqrt(qk_nope_head_dim + qk_rope_head_dim). The code is our own.
//
// Per token and layer (nope = qk_nope_head_dim, rope = qk_rope_head_dim, L = kv_lora_rank):
//   q      = W_q x                 or  W_qb rmsnorm(W_qa x)       [H, nope + rope]
//   kv_a   = W_kva x = [c_kv (L) | k_pe (rope)]
//   cache <- [rmsnorm(c_kv) | rope(k_pe)]                          (L + rope values)
//   q_abs_h = [W_UK_h^T q_nope_h (L) | rope(q_pe_h)]
//   attention over the cache rows with V = K (one latent "KV head" for every query head):
//     q_abs_h . row = q_nope_h . (W_UK_h c_kv) + q_pe_h . k_pe    = the paper's q_t,i . k_j,i
//     out_h = [sum p c_kv (L) | sum p k_pe (unused)]
//   o_h = W_UV_h out_h[:L]   (v_head_dim), concatenated over heads, then W_o.
// so per-head keys and values are never materialised, and prefill and decode share one path.
#include "models/deepseek2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "models/moe.h"
#include "models/weight_loader.h"

namespace llmserve {
namespace {

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  /// x -> [q_a (q_lora_rank) or q (H * (nope + rope)) | c_kv (L) | k_pe (rope)]: W_qa (or
  /// W_q) stacked over W_kva, so one GEMM reads the normalised activations once (vLLM's
  /// fused_qkv_a_proj).
  WeightMatrix w_qa_kva;
  std::vector<float> q_a_norm;   // [q_lora_rank]; empty when q_lora_rank == 0
  WeightMatrix w_q_b;            // [H * (nope + rope), q_lora_rank]; unused when q_lora == 0
  std::vector<float> kv_a_norm;  // [L]
  std::vector<WeightMatrix> w_uk_t;  // per head W_UK_h^T [L, nope]: q_nope_h -> latent query
  std::vector<WeightMatrix> w_uv;    // per head W_UV_h [v_head_dim, L]: latent out -> value
  WeightMatrix wo;               // [dim, H * v_head_dim]
  std::vector<float> ffn_norm;   // [dim]
  WeightMatrix w_gate_up;        // [2 ffn, dim] = Wgate; Wup stacked (dense layers)
  WeightMatrix w_down;           // [dim, ffn]
  bool moe = false;              // the MLP is a mixture of experts (after the leading dense layers)
  MoeWeights moe_w;
};

/// A matrix view of `data` (file-backed, or owned by `storage`).
WeightMatrix view(const void* data, DType dtype, int64_t rows, int64_t cols,
                  std::shared_ptr<const void> storage = nullptr) {
  WeightMatrix m;
  m.data = data;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  m.storage = std::move(storage);
  return m;
}

/// Tensors whose presence marks a mixture-of-experts layer (llama.cpp GGUF names).
constexpr const char* kMoeTensors[] = {"ffn_gate_inp.weight", "ffn_gate_exps.weight",
                                       "ffn_up_exps.weight",  "ffn_down_exps.weight",
                                       "ffn_gate_shexp.weight", "exp_probs_b.bias"};

class Deepseek2Model final : public Model {
 public:
  explicit Deepseek2Model(const ModelConfig& c)
      : cfg_(c), inv_freq_(c.rope_inv_freq()), attention_factor_(c.rope_attention_factor()), H_(c.n_heads), nope_(c.qk_nope_head_dim),
        rope_(c.qk_rope_head_dim), qk_(c.qk_nope_head_dim + c.qk_rope_head_dim),
        L_(c.kv_lora_rank), vh_(c.v_head_dim), qr_(c.q_lora_rank),
        qa_width_(c.q_lora_rank > 0 ? c.q_lora_rank : int64_t{c.n_heads} * qk_),
        lat_(c.kv_lora_rank + c.qk_rope_head_dim) {}

  Status load(const ModelFile& file, const ModelLoadOptions& options) {
    const std::string& path = file.path();
    if (!cfg_.is_mla() || cfg_.qk_rope_head_dim <= 0 || cfg_.qk_nope_head_dim <= 0 ||
        cfg_.v_head_dim <= 0 || cfg_.n_kv_heads != 1 || cfg_.head_dim != qk_)
      return InvalidArgument(
          "{}: deepseek2 needs MLA dimensions (kv_lora_rank {}, qk_nope_head_dim {}, "
          "qk_rope_head_dim {}, v_head_dim {}, n_kv_heads {} == 1, head_dim {} == nope + rope)",
          path, cfg_.kv_lora_rank, cfg_.qk_nope_head_dim, cfg_.qk_rope_head_dim,
          cfg_.v_head_dim, cfg_.n_kv_heads, cfg_.head_dim);
    if (cfg_.sliding_window > 0)
      return Unimplemented("{}: sliding-window attention (window {}) is not supported with MLA", path,
                           cfg_.sliding_window);
    WeightLoader w(file, options.dtype);
    const int64_t dim = cfg_.dim, q_dim = H_ * qk_;
    LLMS_ASSIGN_OR_RETURN(EmbeddingAndHead ends, load_embedding_and_head(w, cfg_));
    embedding_ = ends.embedding;
    classifier_ = ends.classifier;
    final_norm_ = std::move(ends.final_norm);
    layers_.resize(cfg_.n_layers);
    for (int32_t i = 0; i < cfg_.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LayerWeights& l = layers_[i];
      l.moe = cfg_.is_moe_layer(i);
      if (!l.moe)
        for (const char* moe : kMoeTensors)
          if (file.find_tensor(p + moe) != nullptr)
            return InvalidArgument("{}: tensor {}{}: layer {} is a dense layer by the metadata "
                                   "(expert_count {}, leading_dense_block_count {}) but has "
                                   "mixture-of-experts tensors", path, p, moe, i, cfg_.n_experts,
                                   cfg_.n_dense_leading_layers);
      LLMS_ASSIGN_OR_RETURN(l.attn_norm, w.vector(p + "attn_norm.weight", dim));

      // Query (direct or low-rank) and the KV down-projection, stacked into one matrix.
      WeightMatrix a[2];
      if (qr_ > 0) {
        LLMS_ASSIGN_OR_RETURN(a[0], w.matrix(p + "attn_q_a.weight", qr_, dim));
        LLMS_ASSIGN_OR_RETURN(l.q_a_norm, w.vector(p + "attn_q_a_norm.weight", qr_));
        LLMS_ASSIGN_OR_RETURN(l.w_q_b, w.matrix(p + "attn_q_b.weight", q_dim, qr_));
      } else {
        LLMS_ASSIGN_OR_RETURN(a[0], w.matrix(p + "attn_q.weight", q_dim, dim));
      }
      LLMS_ASSIGN_OR_RETURN(a[1], w.matrix(p + "attn_kv_a_mqa.weight", lat_, dim));
      LLMS_ASSIGN_OR_RETURN(l.w_qa_kva, concat_rows(a));
      LLMS_ASSIGN_OR_RETURN(l.kv_a_norm, w.vector(p + "attn_kv_a_norm.weight", L_));
      LLMS_RETURN_IF_ERROR(load_absorbed(file, w, p, l));

      LLMS_ASSIGN_OR_RETURN(l.wo, w.matrix(p + "attn_output.weight", dim, H_ * vh_));
      LLMS_ASSIGN_OR_RETURN(l.ffn_norm, w.vector(p + "ffn_norm.weight", dim));
      if (l.moe) {
        LLMS_ASSIGN_OR_RETURN(l.moe_w, load_moe_weights(w, cfg_, i, options.pool));
      } else {
        WeightMatrix gate_up[2];
        LLMS_ASSIGN_OR_RETURN(gate_up[0], w.matrix(p + "ffn_gate.weight", cfg_.ffn_dim, dim));
        LLMS_ASSIGN_OR_RETURN(gate_up[1], w.matrix(p + "ffn_up.weight", cfg_.ffn_dim, dim));
        LLMS_ASSIGN_OR_RETURN(l.w_gate_up, concat_rows(gate_up));
        LLMS_ASSIGN_OR_RETURN(l.w_down, w.matrix(p + "ffn_down.weight", dim, cfg_.ffn_dim));
        prepare_weight(l.w_gate_up, WeightUse::kSiluMul);
        prepare_weight(l.w_down);
      }

      prepare_weight(l.w_qa_kva);
      if (qr_ > 0) prepare_weight(l.w_q_b);
      for (WeightMatrix& m : l.w_uk_t) prepare_weight(m);
      for (WeightMatrix& m : l.w_uv) prepare_weight(m);
      prepare_weight(l.wo);
    }
    w.mark_used("rope_freqs.weight");  // read into the config (llama3 frequency factors)
    LLMS_RETURN_IF_ERROR(w.check_all_used());
    w.log_conversions();
    if (!cfg_.tie_word_embeddings) prepare_weight(classifier_);
    return Status::Ok();
  }

  const ModelConfig& config() const override { return cfg_; }

  void forward(const ForwardBatch& b, const KVCacheLayer* kv_cache,
               const AttentionBackend& attention, ThreadPool* pool, float* logits) override {
    const int64_t T = b.num_tokens, dim = cfg_.dim;
    const int32_t rope = static_cast<int32_t>(rope_), half = rope / 2;
    const float eps = cfg_.rms_norm_eps;
    const RopeStyle style = cfg_.rope_style;
    resize_scratch(T);
    // Embedding rows are converted (dequantized for quantized types) on lookup.
    const size_t emb_row = static_cast<size_t>(dtype_row_bytes(embedding_.dtype, dim));
    for (int64_t t = 0; t < T; ++t) {
      to_f32(static_cast<const uint8_t*>(embedding_.data) + b.token_ids[t] * emb_row,
             embedding_.dtype, dim, &x_[t * dim]);
      // YaRN's attention factor (DeepSeek: its mscale ratio) on cos and sin.
      rope_cos_sin(b.positions[t], inv_freq_.data(), half, &rope_cos_[t * half], &rope_sin_[t * half],
                   attention_factor_);
    }
    // One latent KV "head" of width L + rope read by every query head; the scale is that of
    // the unabsorbed per-head dot product (paper eq. 17 / HF softmax_scale, times YaRN's
    // mscale(mscale_all_dim)^2).
    const AttentionShape shape{static_cast<int32_t>(H_), 1, static_cast<int32_t>(lat_),
                               cfg_.softmax_scale_factor() / std::sqrt(static_cast<float>(qk_))};
    const int64_t a_ld = qa_width_ + lat_;  // row stride of the stacked q_a/kv_a output
    const int64_t qabs_ld = H_ * lat_;      // row stride of the absorbed queries / att output

    for (int64_t t = 0; t < T; ++t)
      rmsnorm(&x_[t * dim], layers_[0].attn_norm.data(), &xn_[t * dim], dim, eps);
    for (int32_t li = 0; li < cfg_.n_layers; ++li) {
      const LayerWeights& l = layers_[li];
      const KVCacheLayer cache = kv_cache[li];
      gemm(xn_.data(), T, l.w_qa_kva, qa_.data(), pool);
      for (int64_t t = 0; t < T; ++t) {
        float* row = &qa_[t * a_ld];
        float* kv = row + qa_width_;  // [c_kv | k_pe]
        rmsnorm(kv, l.kv_a_norm.data(), kv, L_, eps);
        rope_head(kv + L_, rope, &rope_cos_[t * half], &rope_sin_[t * half], style);
        store_kv_values(cache.k, cache.dtype, b.attn.slot_mapping[t] * lat_, kv, lat_);
        if (qr_ > 0) rmsnorm(row, l.q_a_norm.data(), &qan_[t * qr_], qr_, eps);
      }
      const float* q = qa_.data();  // [T, H, nope + rope] with row stride q_ld
      int64_t q_ld = a_ld;
      if (qr_ > 0) {
        gemm(qan_.data(), T, l.w_q_b, q_.data(), pool);
        q = q_.data();
        q_ld = H_ * qk_;
      }
      // Absorbed queries: q_abs_h = [W_UK_h^T q_nope_h | rope(q_pe_h)].
      for (int32_t h = 0; h < H_; ++h) {
        for (int64_t t = 0; t < T; ++t)
          std::copy_n(q + t * q_ld + h * qk_, nope_, &head_in_[t * nope_]);
        gemm(head_in_.data(), T, l.w_uk_t[h], head_out_.data(), pool);
        for (int64_t t = 0; t < T; ++t) {
          float* dst = &qabs_[t * qabs_ld + h * lat_];
          std::copy_n(&head_out_[t * L_], L_, dst);
          std::copy_n(q + t * q_ld + h * qk_ + nope_, rope_, dst + L_);
          rope_head(dst + L_, rope, &rope_cos_[t * half], &rope_sin_[t * half], style);
        }
      }
      attention.forward(b.attn, shape, qabs_.data(), cache, attn_out_.data(), pool);
      // Per head: the first L output values are the attention-weighted latent; W_UV_h maps it
      // to the head's value (the trailing rope values are the weighted k_pe, unused).
      for (int32_t h = 0; h < H_; ++h) {
        for (int64_t t = 0; t < T; ++t)
          std::copy_n(&attn_out_[t * qabs_ld + h * lat_], L_, &head_in_[t * L_]);
        gemm(head_in_.data(), T, l.w_uv[h], head_out_.data(), pool);
        for (int64_t t = 0; t < T; ++t)
          std::copy_n(&head_out_[t * vh_], vh_, &att_[t * H_ * vh_ + h * vh_]);
      }
      gemm(att_.data(), T, l.wo, delta_.data(), pool);
      for (int64_t t = 0; t < T; ++t)
        fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], l.ffn_norm.data(), &xn_[t * dim], dim,
                          eps);
      if (l.moe) {
        moe_.forward(cfg_, l.moe_w, xn_.data(), T, delta_.data(), pool);
      } else {  // dense SwiGLU MLP (as in llama.cc)
        gemm_silu_mul(xn_.data(), T, l.w_gate_up, h_.data(), pool);
        gemm(h_.data(), T, l.w_down, delta_.data(), pool);
      }
      if (li + 1 < cfg_.n_layers) {
        for (int64_t t = 0; t < T; ++t)
          fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], layers_[li + 1].attn_norm.data(),
                            &xn_[t * dim], dim, eps);
      }
    }
    for (int32_t i = 0; i < b.num_logits; ++i) {
      const int64_t t = b.logits_indices[i];
      fused_add_rmsnorm(&x_[t * dim], &delta_[t * dim], final_norm_.data(), &xn_[i * dim], dim,
                        eps);
    }
    gemm(xn_.data(), b.num_logits, classifier_, logits, pool);
  }

 private:
  /// Fills l.w_uk_t / l.w_uv from the split attn_k_b [H, L, nope] + attn_v_b [H, v_head, L]
  /// (llama.cpp's convert_hf_to_gguf splits kv_b_proj so) or from the unsplit attn_kv_b
  /// [H * (nope + v_head), L] (HF kv_b_proj: per head nope rows of W_UK_h, then v_head rows of
  /// W_UV_h), transposing each W_UK_h into an owned [L, nope] matrix in the loaded dtype
  /// (the file's, or --dtype's; a quantized one is dequantized to float32 first: its blocks
  /// run along L, and the transpose needs them along nope; L x nope floats per head). Per-head
  /// views of quantized tensors start at whole rows, so they stay quantized.
  Status load_absorbed(const ModelFile& file, WeightLoader& w, const std::string& p,
                       LayerWeights& l) {
    const std::string kb = p + "attn_k_b.weight", vb = p + "attn_v_b.weight",
                      kvb = p + "attn_kv_b.weight";
    l.w_uk_t.resize(H_);
    l.w_uv.resize(H_);
    if (file.find_tensor(kb) != nullptr || file.find_tensor(vb) != nullptr) {
      LLMS_ASSIGN_OR_RETURN(WeightLoader::Data k, w.data(kb, {H_, L_, nope_}));
      LLMS_ASSIGN_OR_RETURN(WeightLoader::Data v, w.data(vb, {H_, vh_, L_}));
      const int64_t k_row = dtype_row_bytes(k.dtype, nope_), v_row = dtype_row_bytes(v.dtype, L_);
      for (int64_t h = 0; h < H_; ++h) {
        l.w_uk_t[h] = view(static_cast<const uint8_t*>(k.data) + h * L_ * k_row, k.dtype, L_,
                           nope_, k.storage);
        l.w_uv[h] = view(static_cast<const uint8_t*>(v.data) + h * vh_ * v_row, v.dtype, vh_,
                         L_, v.storage);
      }
      return Status::Ok();
    }
    if (file.find_tensor(kvb) == nullptr)
      return NotFound("{}: tensor {} not found (nor the split {} and {})", file.path(), kvb, kb,
                      vb);
    LLMS_ASSIGN_OR_RETURN(WeightLoader::Data kv, w.data(kvb, {H_ * (nope_ + vh_), L_}));
    const int64_t row = dtype_row_bytes(kv.dtype, L_);
    // The transposed copy's dtype: the loaded one, or float32 for a quantized file.
    const DType t_dtype = is_quantized(kv.dtype) ? DType::kF32 : kv.dtype;
    const size_t es = dtype_size(t_dtype);
    const auto* base = static_cast<const uint8_t*>(kv.data);
    std::vector<float> deq(is_quantized(kv.dtype) ? nope_ * L_ : 0);
    for (int64_t h = 0; h < H_; ++h) {
      const uint8_t* head = base + h * (nope_ + vh_) * row;
      const uint8_t* uk = head;  // W_UK_h [nope, L], row-major in t_dtype
      if (is_quantized(kv.dtype)) {
        for (int64_t n = 0; n < nope_; ++n) to_f32(head + n * row, kv.dtype, L_, &deq[n * L_]);
        uk = reinterpret_cast<const uint8_t*>(deq.data());
      }
      auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[L_ * nope_ * es]);
      for (int64_t n = 0; n < nope_; ++n)  // W_UK_h[n, c] -> W_UK_h^T[c, n]
        for (int64_t c = 0; c < L_; ++c)
          std::memcpy(&buf[(c * nope_ + n) * es], uk + (n * L_ + c) * es, es);
      l.w_uk_t[h] = view(buf.get(), t_dtype, L_, nope_, buf);
      l.w_uv[h] = view(head + nope_ * row, kv.dtype, vh_, L_, kv.storage);
    }
    return Status::Ok();
  }

  void resize_scratch(int64_t T) {
    if (T <= scratch_tokens_) return;  // grows to the largest batch seen, then stays
    scratch_tokens_ = T;
    x_.resize(T * cfg_.dim);
    xn_.resize(T * cfg_.dim);
    delta_.resize(T * cfg_.dim);
    qa_.resize(T * (qa_width_ + lat_));
    if (qr_ > 0) {
      qan_.resize(T * qr_);
      q_.resize(T * H_ * qk_);
    }
    head_in_.resize(T * std::max(nope_, L_));
    head_out_.resize(T * std::max(L_, vh_));
    qabs_.resize(T * H_ * lat_);
    attn_out_.resize(T * H_ * lat_);
    att_.resize(T * H_ * vh_);
    h_.resize(T * cfg_.ffn_dim);
    rope_cos_.resize(T * (rope_ / 2));
    rope_sin_.resize(T * (rope_ / 2));
  }

  ModelConfig cfg_;
  std::vector<float> inv_freq_;  // [qk_rope_head_dim / 2]
  float attention_factor_;       // RoPE cos/sin multiplier (YaRN), else 1
  const int64_t H_, nope_, rope_, qk_, L_, vh_, qr_;
  const int64_t qa_width_;  // q_lora_rank, or H * (nope + rope) for the direct projection
  const int64_t lat_;       // L + rope: one cached latent row
  WeightMatrix embedding_, classifier_;
  std::vector<float> final_norm_;
  std::vector<LayerWeights> layers_;
  MoeMlp moe_;
  // Activation scratch, [num_tokens, width] row-major, reused across steps.
  int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, delta_, qa_, qan_, q_, head_in_, head_out_, qabs_, attn_out_,
      att_, h_, rope_cos_, rope_sin_;
};

}  // namespace

Expected<std::unique_ptr<Model>> create_deepseek2_model(const ModelFile& file,
                                                        const ModelLoadOptions& options) {
  auto model = std::make_unique<Deepseek2Model>(config_for_load(file, options));
  LLMS_RETURN_IF_ERROR(model->load(file, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace llmserve
