// GGUF v3 writer (spec: ggml/docs/gguf.md). Streams: metadata key/values and tensor infos are
// declared first, then begin() writes the header, and the tensor data is appended in the
// declared order, in as many pieces as the caller likes, so a model never has to be held in
// memory whole. Layout: "GGUF", version 3, tensor count, KV count, the KVs, the tensor infos
// (name, n_dims, ne[] innermost-first, type, offset relative to the data section), padding to
// the alignment (32), then each tensor's bytes padded to the alignment.
#pragma once

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "weights/gguf.h"

namespace llmserve {

/// A ggml tensor type id as GGUF stores it. Named here: the float types; every DType has one
/// (ggml_type_of), including the quantized types (Q4_0 = 2, ..., IQ4_XS = 23).
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kBF16 = 30 };

constexpr GgmlType ggml_type_of(DType t) { return static_cast<GgmlType>(dtype_ggml_id(t)); }

class GgufWriter {
 public:
  static constexpr uint64_t kAlignment = 32;

  GgufWriter() = default;
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, written in the order added. A repeated key is an error reported by begin().
  void add_uint8(std::string_view key, uint8_t v);
  void add_int8(std::string_view key, int8_t v);
  void add_uint16(std::string_view key, uint16_t v);
  void add_int16(std::string_view key, int16_t v);
  void add_uint32(std::string_view key, uint32_t v);
  void add_int32(std::string_view key, int32_t v);
  void add_uint64(std::string_view key, uint64_t v);
  void add_int64(std::string_view key, int64_t v);
  void add_float32(std::string_view key, float v);
  void add_float64(std::string_view key, double v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);
  void add_string_array(std::string_view key, const std::vector<std::string>& v);
  void add_float32_array(std::string_view key, const std::vector<float>& v);
  void add_int32_array(std::string_view key, const std::vector<int32_t>& v);
  /// Any value in the reader's representation (copying metadata from one file to another).
  void add_value(std::string_view key, const GgufValue& v);

  /// Declares a tensor. `shape` is row-major outermost-first (as GgufFile::tensors() reports
  /// it); the file stores ne[] innermost-first. A quantized type's data is whole blocks per
  /// row (shape.back() a multiple of its block; ggml-common.h layouts, see quant/), so the
  /// tensor is rows x dtype_row_bytes bytes; begin() refuses other row lengths.
  void add_tensor(std::string_view name, std::vector<int64_t> shape, DType type);
  /// The same by ggml type id (begin() refuses an id with no DType).
  void add_tensor(std::string_view name, std::vector<int64_t> shape, GgmlType type);

  /// Creates `path` and writes header, metadata and tensor infos. Errors: InvalidArgument
  /// (duplicate key or tensor name, empty/negative shape, unknown type, a row length the type
  /// cannot hold), NotFound (cannot create the file).
  Status begin(const std::string& path);
  /// Appends bytes of the current tensor (the first declared tensor not yet complete); a
  /// tensor is complete when all its bytes have been written, and padding follows it.
  /// Errors: InvalidArgument (more bytes than the tensors declared), DataLoss (write failed).
  Status write(const void* data, size_t bytes);
  /// Checks every tensor was written completely, flushes and closes. Errors: InvalidArgument
  /// (incomplete tensor data), DataLoss (write/close failed).
  Status finish();

  /// Bytes of the data section for the declared tensors (each padded to the alignment).
  uint64_t data_bytes() const;

 private:
  struct TensorInfo {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type;   // ggml type id
    bool valid_type;  // a DType exists for it and shape.back() is whole blocks of it
    uint64_t bytes = 0;
    uint64_t offset = 0;
  };
  template <typename T>
  void put(std::vector<uint8_t>& out, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void put_str(std::vector<uint8_t>& out, std::string_view s);
  void key(std::string_view k, GgufType type);
  void put_value(const GgufValue& v);
  Status write_raw(const void* data, size_t bytes);
  Status pad();

  std::vector<uint8_t> kv_;  // encoded key/value pairs
  uint64_t kv_count_ = 0;
  std::vector<std::string> keys_;
  std::vector<TensorInfo> tensors_;

  std::FILE* file_ = nullptr;
  std::string path_;
  uint64_t pos_ = 0;          // bytes written to the file
  size_t current_ = 0;        // index of the tensor being written
  uint64_t current_written_ = 0;
};

}  // namespace llmserve
