// Finite-scale check of quantized tensor data: every block's half-float scales (d, and m /
// dmin where the type has one; quant/block_formats.h) must be finite. A NaN or infinite scale
// (a corrupt or badly converted file) would otherwise make every logit NaN with no message;
// llama.cpp checks the same fields with --check-tensors (ggml_validate_row_data), off by
// default there, while the model loader here always does: it reads two bytes per block.
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.h"

namespace llmserve::quant {

/// A block with a non-finite scale: its index and which field ("d", "m" or "dmin") holds what.
struct BadScale {
  int64_t block = -1;  // -1: none
  const char* field = "";
  float value = 0;
};

/// The first block of `blocks` consecutive blocks of `type` (a quantized type) at `data`
/// whose scale is NaN or infinite, or block = -1.
BadScale first_nonfinite_scale(DType type, const void* data, int64_t blocks);

}  // namespace llmserve::quant
