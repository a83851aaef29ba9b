// The epilogue of a fused Q/K/V projection, shared by the models whose attention is
// multi-head / grouped-query with per-head RoPE (llama.cc, gemma.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "config/model_config.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"

namespace llmserve {

/// Epilogue of the fused QKV projection (vLLM's rotary_embedding + reshape_and_cache in the
/// GEMM's tile epilogue): for each finished [tokens x heads] tile of y = x·[Wq;Wk;Wv]^T it
/// adds the q/k/v biases (Qwen2), applies the per-head q/k RMSNorm (Qwen3) and RoPE to the Q
/// and K heads, copies Q to the attention input and stores K and V into the paged cache at
/// the tokens' slots (converted to the cache dtype), while the tile is hot.
class QkvEpilogue final : public GemmEpilogue {
 public:
  /// A layer's optional per-column parts (null = absent).
  struct Extras {
    const float* bias = nullptr;    // [(n_heads + 2 n_kv) * hd]: bq; bk; bv (Qwen2)
    const float* q_norm = nullptr;  // [hd] RMSNorm weight of each query head (Qwen3, Gemma 3)
    const float* k_norm = nullptr;  // [hd] the same for key heads
    /// From vectors that are empty when the part is absent.
    static Extras of(const std::vector<float>& bias, const std::vector<float>& q_norm,
                     const std::vector<float>& k_norm) {
      auto ptr = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
      return {ptr(bias), ptr(q_norm), ptr(k_norm)};
    }
  };

  /// cos / sin: [tokens, rope_dim / 2] tables of this layer's RoPE; slots: [tokens] cache
  /// slots; q_out: [tokens, n_heads * hd].
  QkvEpilogue(const ModelConfig& c, Extras extras, const float* cos, const float* sin,
              const int64_t* slots, KVCacheLayer cache, float* q_out)
      : hd_(c.head_dim), rd_(c.rope_dim()), q_dim_(int64_t{c.n_heads} * c.head_dim),
        kv_dim_(int64_t{c.n_kv_heads} * c.head_dim), style_(c.rope_style), eps_(c.rms_norm_eps),
        bias_(extras.bias), q_norm_(extras.q_norm), k_norm_(extras.k_norm), cos_(cos), sin_(sin),
        slots_(slots), cache_(cache), q_out_(q_out) {}

  int64_t column_alignment() const override { return hd_; }

  void apply(int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* y,
             int64_t ldy) const override {
    const int32_t half = rd_ / 2;
    for (int64_t t = m0; t < m1; ++t) {
      const float* c = cos_ + t * half;
      const float* s = sin_ + t * half;
      for (int64_t col = n0; col < n1; col += hd_) {
        float* head = y + t * ldy + col;
        if (bias_ != nullptr) add_inplace(head, bias_ + col, hd_);
        if (col < q_dim_) {  // query head
          if (q_norm_ != nullptr) rmsnorm(head, q_norm_, head, hd_, eps_);
          rope_head(head, rd_, c, s, style_);  // the first rope_dim values (partial rotary)
          std::copy_n(head, hd_, q_out_ + t * q_dim_ + col);
        } else if (col < q_dim_ + kv_dim_) {  // key head: RoPE, then into the cache
          if (k_norm_ != nullptr) rmsnorm(head, k_norm_, head, hd_, eps_);
          rope_head(head, rd_, c, s, style_);
          store_kv_values(cache_.k, cache_.dtype, slots_[t] * kv_dim_ + (col - q_dim_), head,
                          hd_);
        } else {  // value head
          store_kv_values(cache_.v, cache_.dtype,
                          slots_[t] * kv_dim_ + (col - q_dim_ - kv_dim_), head, hd_);
        }
      }
    }
  }

 private:
  int32_t hd_, rd_;
  int64_t q_dim_, kv_dim_;
  RopeStyle style_;
  float eps_;
  const float *bias_, *q_norm_, *k_norm_;
  const float *cos_, *sin_;
  const int64_t* slots_;
  KVCacheLayer cache_;
  float* q_out_;
};

}  // namespace llmserve
