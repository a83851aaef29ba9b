// Scalar reference dequantizer for every type in common/dtype.h: the slow, obviously-correct
// definition that faster kernels are tested against. Bit for bit equal to gguf-py
// (gguf-py/gguf/quants.py, `dequantize`): the same float32 operations in the same order, each
// rounded (no fused multiply-add), half-float scales widened exactly (f16_to_f32).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llmserve {

/// Writes n float32 values to `out` from a row of `type` at `src`: n / block_elems blocks for
/// a quantized type (layouts: quant/block_formats.h), n elements for f32/f16/bf16. `src` needs
/// no alignment. n must be a multiple of dtype_block_elems(type) (a bug otherwise: aborts).
void dequantize_row_ref(DType type, const void* src, float* out, int64_t n);

}  // namespace llmserve
