// Quantizers: float32 rows -> ggml blocks (layouts: quant/block_formats.h), the inverse of
// dequantize_row_ref. Our own algorithms, not ports of ggml's reference quantizers, aiming at
// a lower squared error than llama-quantize without an importance matrix (measured in
// tests/quant/test_quantize.cc and docs/models.md):
//  - Q8_0, Q4_0, Q5_0 (x = d q) and Q4_1, Q5_1 (x = d q + m): per 32-value block, the
//    least-squares scale (and offset) over a grid search plus Lloyd refinement
//    (quant/quantize_fit.h); the scale is rounded to f16 before the codes are chosen, so the
//    codes fit the scale the file stores.
//  - Q4_K, Q5_K (8 sub-blocks of 32, x = (d sc) q - (dmin mn), 6-bit sc/mn) and Q6_K (16
//    sub-blocks of 16, x = (d sc) q, 8-bit signed sc): an affine / symmetric fit per
//    sub-block, the super-block scales from the largest ones, then a few rounds of weighted
//    least squares over the whole super-block: (d, dmin) refitted to all codes, each
//    sub-block's integer sc/mn re-chosen among the neighbours of its ideal value with the
//    codes re-rounded, keeping the best state seen.
// Each row is quantized independently and deterministically (the same bytes whatever the
// thread count), so in-memory quantization at load time equals a file written by
// `llmserve quantize`.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/status.h"

namespace llmserve {

class ThreadPool;

/// True for the types quantize_row can write: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
/// Q6_K (and the float types f32, f16, bf16, which are plain conversions).
bool can_quantize(DType type);

/// Writes one row of n values as `type` to `out` (dtype_row_bytes(type, n) bytes; no alignment
/// needed). n must be a multiple of dtype_block_elems(type) and `type` one can_quantize
/// accepts (a bug otherwise: aborts). Values should be finite (quantize_rows checks).
void quantize_row(DType type, const float* x, void* out, int64_t n);

/// quantize_row over `rows` rows of n values (row r at x + r * n, output row r at out + r *
/// dtype_row_bytes(type, n)), split over `pool` when given. Errors: InvalidArgument when a
/// value is not finite (naming the row and column).
Status quantize_rows(DType type, const float* x, void* out, int64_t rows, int64_t n,
                     ThreadPool* pool = nullptr);

}  // namespace llmserve
