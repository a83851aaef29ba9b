// NumPy .npy files (format version 1.0/2.0: magic "\x93NUMPY", header dict, raw data), float32
// little-endian C-order only. Used by `llmserve logits` and by tests reading reference logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace llmserve {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // C order
};

/// Reads a '<f4' C-order array. Errors: NotFound, DataLoss (bad magic/header/size),
/// Unimplemented (other dtype or Fortran order).
Expected<NpyArray> read_npy(const std::string& path);

/// Writes data with the given shape as '<f4', format version 1.0. Errors: NotFound (cannot
/// create), InvalidArgument (shape product != data size).
Status write_npy(const std::string& path, const std::vector<int64_t>& shape,
                 const float* data, size_t count);

}  // namespace llmserve
