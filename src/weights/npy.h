// NumPy .npy files (format version 1.0/2.0: magic "\x93NUMPY", header dict, raw data), float32
// little-endian C-order only. Used by `llmserve logits` and by tests reading reference logits.
#pragma once

#include <cstdint>
#include <cstdio>
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

/// Streams a '<f4' C-order array (format 1.0) to a file: the header on create(), then the
/// values in as many write() calls as the caller likes (an array need not fit in memory).
class NpyWriter {
 public:
  /// Creates `path` and writes the header. Errors: NotFound (cannot create), InvalidArgument
  /// (negative or absurd shape).
  static Expected<NpyWriter> create(const std::string& path, const std::vector<int64_t>& shape);
  NpyWriter(NpyWriter&& other) noexcept;
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;
  ~NpyWriter();  // closes the file (an unfinished file is left short)

  /// Appends `count` values. Errors: InvalidArgument (more values than the shape holds),
  /// Internal (write failed).
  Status write(const float* data, size_t count);
  /// Closes the file. Errors: InvalidArgument (fewer values written than the shape holds),
  /// Internal (write failed).
  Status finish();

 private:
  NpyWriter() = default;
  std::string path_;
  std::FILE* fp_ = nullptr;
  uint64_t total_ = 0, written_ = 0;
};

}  // namespace llmserve
