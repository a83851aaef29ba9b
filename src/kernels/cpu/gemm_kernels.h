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

/// Width of a W micro-panel (columns = rows of W) in the packed layouts: prepare_weight's
/// [ceil(N/32)][K][32] panels in the file dtype (packed_format 1), and the float32 panels the
/// packed path builds per K block. The microkernels read them with row stride kPanel.
///
/// bf16 panels store each 32-element row permuted so that a zero-interleave (vpunpck[lh]wd)
/// of the 64-byte row yields columns in order, one shuffle per 16 columns instead of a
/// widen + shift: position 8l + j holds column 4l + j and position 8l + 4 + j holds column
/// 16 + 4l + j (l < 4, j < 4). AVX-512 unpacks the whole row (columns 0-15 | 16-31); AVX2
/// unpacks its 32-byte halves (low halves: columns 0-15, high halves: 16-31).
inline constexpr int kPanel = 32;
/// Position of column c within a stored bf16 panel row.
constexpr int bf16_panel_position(int c) {
  return c < 16 ? 8 * (c / 4) + c % 4 : 8 * ((c - 16) / 4) + 4 + (c - 16) % 4;
}
inline constexpr int32_t kPackedPanels = 1;  // WeightMatrix::packed_format

struct GemmKernels {
  const char* name;
  /// Microkernel: up to mr rows of x by nr columns (nr divides kPanel).
  int mr, nr;
  /// Most x rows one dot() call handles (its register tile is dot_max_mb x kDotRows).
  int dot_max_mb;

  /// Small-M kernel on row-major W: out[i * kDotRows + r] = dot(x[i, 0:k], rows[r][0:k]) for
  /// i < mb, r < kDotRows; x row stride ldx floats; rows[] point at W rows in `dtype`. When
  /// pf > 0, prefetches the same offsets pf elements further along each row (the next tile).
  void (*dot)(DType dtype, int mb, const float* x, int64_t ldx, const void* const* rows,
              int64_t k, int64_t pf, float* out);

  /// Packs x[0:m_valid, 0:k] (row stride ldx) as [k][mr] (zero rows past m_valid; mr <= the
  /// table's mr).
  void (*pack_x)(const float* x, int64_t ldx, int64_t m_valid, int64_t k, int mr, float* dst);

  /// Packs row-major W[0:n_valid, k0:k0+kc] (row stride ldw elements, `dtype`) converted to
  /// float32 as [kc][kPanel] (zero columns past n_valid).
  void (*pack_w)(DType dtype, const void* w, int64_t ldw, int64_t n_valid, int64_t k0,
                 int64_t kc, float* dst);

  /// dst[kc][kPanel] = kc rows of a prepared panel (`dtype`) converted to float32, columns
  /// in natural order.
  void (*convert)(DType dtype, const void* src, int64_t kc, float* dst);

  /// c[0:m_valid, 0:n_valid] (row stride ldc) = (or += when accumulate) xp · W over kc:
  /// xp packed [kc][mr] (1 <= mr <= the table's mr); W's rows (stride ldw elements) are
  /// kPanel-wide panel rows in `wtype` (f16/bf16: a prepared panel; f32: a packed one), of
  /// which columns [sub * nr, sub * nr + nr) are used. pf_bytes > 0: prefetch that far ahead.
  void (*micro)(DType wtype, int mr, const float* xp, const void* w, int sub, int64_t ldw,
                int64_t kc, float* c, int64_t ldc, int m_valid, int n_valid, bool accumulate,
                int64_t pf_bytes);

  /// micro() on two fully valid prepared panels at once (the second panel_stride bytes after
  /// the first, its output kPanel columns after the first's), for mr <= 3: twice the
  /// independent FMA chains, bitwise the same results as two micro() calls.
  void (*micro2)(DType wtype, int mr, const float* xp, const void* w, int64_t panel_stride,
                 int sub, int64_t ldw, int64_t kc, float* c, int64_t ldc, int m_valid,
                 bool accumulate, int64_t pf_bytes);

  /// out[i] = silu(g[i]) * u[i] (out may alias g or u).
  void (*silu_mul)(const float* g, const float* u, float* out, int64_t n);

  /// out[i] = gelu_tanh(g[i]) * u[i] (ops.h gelu_tanh_mul; out may alias g or u).
  void (*gelu_tanh_mul)(const float* g, const float* u, float* out, int64_t n);
};

/// Tuning knobs (benchmark experiments only; defaults are the measured best).
struct GemmTuning {
  int64_t pf_rows = 6;
  int64_t kc = 256;
  int64_t nc = 256;
  int64_t mc = 512;
  int64_t max_direct_m = 128;  // prepared W: largest M reading panels in place (no f32 copy)
  int64_t panel_pf = 4096;       // prepared W, direct: prefetch distance in bytes
};
GemmTuning& gemm_tuning();

const GemmKernels& gemm_kernels_avx2();
/// Only callable when cpu_isa() >= CpuIsa::kAvx512.
const GemmKernels& gemm_kernels_avx512();

}  // namespace llmserve::gemm_detail
