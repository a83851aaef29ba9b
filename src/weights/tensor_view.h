// A named, typed, non-owning view of a weight tensor inside a mapped file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace llmserve {

/// `shape` is row-major, outermost dimension first (PyTorch / Hugging Face order): a linear
/// layer's weight is [out_features, in_features] and element (r, c) is at r * shape[1] + c.
/// (GGUF lists dimensions innermost first as ne[0], ne[1], ...; readers reverse them.)
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // points into a MappedFile that outlives the view
  /// Bytes of data: numel * dtype_size for float types; for quantized types every row
  /// (shape.back() elements) is dtype_row_bytes(dtype, shape.back()) bytes of whole blocks.
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace llmserve
