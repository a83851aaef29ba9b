// Elementwise and GEMM kernels used by the model layers. All activations are float32,
// row-major; weights may be f32, f16 or bf16 and are converted on the fly (never up front).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/thread_pool.h"
#include "config/model_config.h"

namespace llmserve {

/// A weight matrix W[N, K] (row-major, out_features x in_features) in its file dtype.
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  // N (out features)
  int64_t cols = 0;  // K (in features)
};

/// y[M, N] = x[M, K] · W[N, K]^T. Each weight row is read once per call and applied to all M
/// activation rows (so a batched step reads the weights once for every sequence).
/// Parallel over N on `pool` (may be null = single thread).
void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool);

/// Converts n elements of `src` (dtype) to float32.
void to_f32(const void* src, DType dtype, int64_t n, float* dst);

/// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i] for one row of n (RMSNorm,
/// Zhang & Sennrich 2019). out may alias x.
void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);

/// Rotary position embedding (Su et al. 2021, RoFormer) in place on x[num_heads, head_dim]
/// for one token at `pos`: frequency of pair i is theta^(-2i/head_dim), angle pos * freq.
/// `inv_freq` holds the head_dim/2 frequencies. Pairing per `style`.
void rope(float* x, int32_t num_heads, int32_t head_dim, int32_t pos, const float* inv_freq,
          RopeStyle style);

/// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)) (SwiGLU, Shazeer 2020).
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

/// x[i] += y[i].
void add_inplace(float* x, const float* y, int64_t n);

/// Dot product of two float32 vectors of length n.
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace llmserve
