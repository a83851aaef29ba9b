// Elementwise kernels used by the model layers (GEMM: kernels/gemm.h). Activations are
// float32, row-major.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/thread_pool.h"
#include "config/model_config.h"
#include "kernels/gemm.h"

namespace llmserve {

/// Converts n elements of `src` (dtype) to float32. For a quantized dtype `src` is a row of
/// n / block_elems blocks (n a multiple of the block) and this is dequantize_row_ref.
void to_f32(const void* src, DType dtype, int64_t n, float* dst);

/// Converts n elements of `src` (`from`) to `to` (both float types: is_float_dtype), rounding
/// to nearest even when `to` is narrower. `dst` must not overlap `src`.
void convert_dtype(const void* src, DType from, void* dst, DType to, int64_t n);

/// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i] for one row of n (RMSNorm,
/// Zhang & Sennrich 2019). out may alias x.
void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);

/// Rotary position embedding (Su et al. 2021, RoFormer) in place on x[num_heads, head_dim]
/// for one token at `pos`: frequency of pair i is theta^(-2i/head_dim), angle pos * freq.
/// `inv_freq` holds the head_dim/2 frequencies. Pairing per `style`.
void rope(float* x, int32_t num_heads, int32_t head_dim, int32_t pos, const float* inv_freq,
          RopeStyle style);

/// Residual add fused with RMSNorm (vLLM's fused_add_rms_norm), one pass over the row:
/// x[i] += delta[i], then out = rmsnorm(x) as above. out may not alias x or delta.
void fused_add_rmsnorm(float* x, const float* delta, const float* weight, float* out, int64_t n,
                       float eps);

/// cos/sin tables for RoPE at one position: cos_out[i] = cos(pos * inv_freq[i]),
/// sin_out[i] = sin(pos * inv_freq[i]) for i < half (= head_dim / 2), each then multiplied by
/// `scale` when it is not 1 (YaRN's attention factor: q.k scaled by its square).
void rope_cos_sin(int32_t pos, const float* inv_freq, int32_t half, float* cos_out,
                  float* sin_out, float scale = 1.0f);

/// RoPE on one head x[head_dim] with precomputed cos/sin [head_dim / 2] (see rope()).
void rope_head(float* x, int32_t head_dim, const float* cos, const float* sin, RopeStyle style);

/// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)) (SwiGLU, Shazeer 2020).
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

/// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU, Shazeer 2020: Gemma's MLP), with the tanh
/// approximation of GELU (Hendrycks & Gimpel 2016; transformers' gelu_pytorch_tanh,
/// PyTorch's gelu(approximate="tanh")):
///   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
/// Evaluated as the equal x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))) with the exponent in
/// extra precision, so the result is within a few ulp of the exact value for every finite
/// input (no cancellation in 1 + tanh for negative x; tiny results underflow gradually,
/// |x| up to FLT_MAX gives no inf or NaN). out may alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);

/// x[i] = cap * tanh(x[i] / cap) in place (soft-capping: Gemma 2's final_logit_softcapping,
/// transformers' Gemma2ForCausalLM.forward); cap > 0. Vectorised (the attention kernels' tanh,
/// a few ulp).
void softcap_inplace(float* x, int64_t n, float cap);

/// x[i] += y[i].
void add_inplace(float* x, const float* y, int64_t n);

/// Dot product of two float32 vectors of length n.
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace llmserve
