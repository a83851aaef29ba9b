// GGUF v3 reader (spec: ggml/docs/gguf.md in the ggml repository). Memory-maps the file,
// parses the metadata key/values and tensor infos, and validates: magic "GGUF", version 2 or 3,
// every length/count within the file, tensor data offsets aligned (general.alignment, default
// 32) and inside the file, tensors laid out back to back (each padded to the alignment, as
// every writer does, so a type or shape that does not match the data is caught), supported
// tensor types: F32=0, F16=1, BF16=30 and the quantized Q4_0=2, Q4_1=3, Q5_0=6, Q5_1=7,
// Q8_0=8, Q2_K=10, Q3_K=11, Q4_K=12, Q5_K=13, Q6_K=14, IQ4_NL=20, IQ4_XS=23 (common/dtype.h),
// whose row length (ne[0]) must be a multiple of the type's block.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "weights/mapped_file.h"
#include "weights/tensor_view.h"

namespace llmserve {

/// GGUF metadata value types (gguf_metadata_value_type in the spec).
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

/// One metadata value. Integers of any width are held as int64 (uint64 values above INT64_MAX
/// are rejected as corrupt); floats as double. Arrays hold their element type and elements.
struct GgufValue {
  struct Array {
    GgufType elem_type = GgufType::kUint8;
    std::vector<GgufValue> items;
  };
  GgufType type = GgufType::kUint8;
  std::variant<int64_t, double, bool, std::string, Array> value;
};

class GgufFile {
 public:
  /// Opens and validates `path`. Errors (one line, naming the file and the problem):
  /// NotFound if it cannot be opened; DataLoss for bad magic, truncation, out-of-bounds
  /// tensor data, absurd counts, a row length the tensor's type cannot hold, a size mismatch
  /// between a tensor's type/shape and its data; Unimplemented for an unsupported version or
  /// tensor type (naming the tensor and the type).
  static Expected<GgufFile> open(const std::string& path);
  /// True when `path` is a readable file starting with the magic "GGUF" (no validation).
  static bool has_magic(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }

  bool has_key(std::string_view key) const;
  /// Typed accessors. Errors: NotFound (missing key) or InvalidArgument (wrong type), naming
  /// the file and the key. get_int accepts any integer type; get_float any float or integer.
  Expected<int64_t> get_int(std::string_view key) const;
  Expected<double> get_float(std::string_view key) const;
  Expected<bool> get_bool(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<std::vector<std::string>> get_string_array(std::string_view key) const;
  Expected<std::vector<float>> get_float_array(std::string_view key) const;
  Expected<std::vector<int64_t>> get_int_array(std::string_view key) const;
  /// Raw access (nullptr if absent).
  const GgufValue* find_value(std::string_view key) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }

  /// Tensors in file order; shapes are row-major outermost-first (reversed GGUF ne[]).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  /// nullptr if there is no tensor of that name.
  const TensorView* find_tensor(std::string_view name) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
};

}  // namespace llmserve
