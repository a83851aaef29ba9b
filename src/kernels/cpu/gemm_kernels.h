// Private to the GEMM implementation (gemm.cc): the per-ISA kernel table. The drivers in
// gemm.cc (threading, blocking, epilogues) are compiled once for the x86-64-v3 baseline and
// call the ISA's kernels through this table, so nothing compiled with AVX-512 enabled is ever
// shared (inline/template code) with baseline code.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llmserve::gemm_detail {

/// Rows of W handled together by the dot-product (small-M) kernel.
inline constexpr int kDotRows = 4;

struct GemmKernels {
  const char* name;
  /// Microkernel tile: mr rows of x by nr columns (rows of W).
  int mr, nr;
  /// Most x rows one dot() call handles (its register tile is dot_max_mb x kDotRows).
  int dot_max_mb;

  /// Small-M kernel: out[i * kDotRows + r] = dot(x[i, 0:k], rows[r][0:k]) for i < mb,
  /// r < kDotRows; x row stride ldx floats; rows[] point at W rows in `dtype`.
  void (*dot)(DType dtype, int mb, const float* x, int64_t ldx, const void* const* rows,
              int64_t k, float* out);

  /// Packs x[0:m_valid, 0:k] (row stride ldx) as [k][mr] (zero rows past m_valid).
  void (*pack_x)(const float* x, int64_t ldx, int64_t m_valid, int64_t k, float* dst);

  /// Packs W[0:n_valid, k0:k0+kc] (row stride ldw elements, `dtype`) converted to float32 as
  /// [kc][nr] (zero columns past n_valid).
  void (*pack_w)(DType dtype, const void* w, int64_t ldw, int64_t n_valid, int64_t k0,
                 int64_t kc, float* dst);

  /// c[0:m_valid, 0:n_valid] (row stride ldc) = (or += when accumulate) xp · wp over kc,
  /// xp packed [kc][mr] (row stride mr), wp packed [kc][nr].
  void (*micro)(const float* xp, const float* wp, int64_t kc, float* c, int64_t ldc,
                int m_valid, int n_valid, bool accumulate);

  /// out[i] = silu(g[i]) * u[i] (out may alias g or u).
  void (*silu_mul)(const float* g, const float* u, float* out, int64_t n);
};

const GemmKernels& gemm_kernels_avx2();
/// Only callable when cpu_isa() >= CpuIsa::kAvx512.
const GemmKernels& gemm_kernels_avx512();

}  // namespace llmserve::gemm_detail
