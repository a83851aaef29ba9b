#include "weights/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace llmserve {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufWriter::~GgufWriter() {
  if (file_) std::fclose(file_);
}

void GgufWriter::put_str(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void GgufWriter::key(std::string_view k, GgufType type) {
  keys_.emplace_back(k);
  ++kv_count_;
  put_str(kv_, k);
  put<uint32_t>(kv_, static_cast<uint32_t>(type));
}

void GgufWriter::add_uint8(std::string_view k, uint8_t v) { key(k, GgufType::kUint8); put(kv_, v); }
void GgufWriter::add_int8(std::string_view k, int8_t v) { key(k, GgufType::kInt8); put(kv_, v); }
void GgufWriter::add_uint16(std::string_view k, uint16_t v) {
  key(k, GgufType::kUint16);
  put(kv_, v);
}
void GgufWriter::add_int16(std::string_view k, int16_t v) { key(k, GgufType::kInt16); put(kv_, v); }
void GgufWriter::add_uint32(std::string_view k, uint32_t v) {
  key(k, GgufType::kUint32);
  put(kv_, v);
}
void GgufWriter::add_int32(std::string_view k, int32_t v) { key(k, GgufType::kInt32); put(kv_, v); }
void GgufWriter::add_uint64(std::string_view k, uint64_t v) {
  key(k, GgufType::kUint64);
  put(kv_, v);
}
void GgufWriter::add_int64(std::string_view k, int64_t v) { key(k, GgufType::kInt64); put(kv_, v); }
void GgufWriter::add_float32(std::string_view k, float v) {
  key(k, GgufType::kFloat32);
  put(kv_, v);
}
void GgufWriter::add_float64(std::string_view k, double v) {
  key(k, GgufType::kFloat64);
  put(kv_, v);
}
void GgufWriter::add_bool(std::string_view k, bool v) {
  key(k, GgufType::kBool);
  put<uint8_t>(kv_, v ? 1 : 0);
}
void GgufWriter::add_string(std::string_view k, std::string_view v) {
  key(k, GgufType::kString);
  put_str(kv_, v);
}
void GgufWriter::add_string_array(std::string_view k, const std::vector<std::string>& v) {
  key(k, GgufType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kString));
  put<uint64_t>(kv_, v.size());
  for (const std::string& s : v) put_str(kv_, s);
}
void GgufWriter::add_float32_array(std::string_view k, const std::vector<float>& v) {
  key(k, GgufType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kFloat32));
  put<uint64_t>(kv_, v.size());
  for (float x : v) put(kv_, x);
}
void GgufWriter::add_int32_array(std::string_view k, const std::vector<int32_t>& v) {
  key(k, GgufType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kInt32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}

void GgufWriter::put_value(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8: put<uint8_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kInt8: put<int8_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kUint16: put<uint16_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kInt16: put<int16_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kUint32: put<uint32_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kInt32: put<int32_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kUint64: put<uint64_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kInt64: put<int64_t>(kv_, std::get<int64_t>(v.value)); break;
    case GgufType::kFloat32: put<float>(kv_, static_cast<float>(std::get<double>(v.value))); break;
    case GgufType::kFloat64: put<double>(kv_, std::get<double>(v.value)); break;
    case GgufType::kBool: put<uint8_t>(kv_, std::get<bool>(v.value) ? 1 : 0); break;
    case GgufType::kString: put_str(kv_, std::get<std::string>(v.value)); break;
    case GgufType::kArray: {
      const auto& a = std::get<GgufValue::Array>(v.value);
      put<uint32_t>(kv_, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(kv_, a.items.size());
      for (const GgufValue& item : a.items) put_value(item);
      break;
    }
  }
}

void GgufWriter::add_value(std::string_view k, const GgufValue& v) {
  key(k, v.type);
  put_value(v);
}

void GgufWriter::add_tensor(std::string_view name, std::vector<int64_t> shape, GgmlType type) {
  const std::optional<DType> dtype = dtype_from_ggml_id(static_cast<uint32_t>(type));
  add_tensor(name, std::move(shape), dtype.value_or(DType::kF32));
  if (!dtype) {
    tensors_.back().type = static_cast<uint32_t>(type);
    tensors_.back().valid_type = false;
  }
}

void GgufWriter::add_tensor(std::string_view name, std::vector<int64_t> shape, DType type) {
  TensorInfo t;
  t.name = std::string(name);
  t.type = dtype_ggml_id(type);
  // Bytes = rows x whole blocks of the innermost dimension (elements x size for float types).
  const int64_t row = shape.empty() ? 1 : shape.back();
  t.valid_type = row > 0 && row % dtype_block_elems(type) == 0;
  uint64_t rows = 1;
  for (size_t j = 0; j + 1 < shape.size(); ++j) rows *= shape[j] > 0 ? static_cast<uint64_t>(shape[j]) : 0;
  t.bytes = t.valid_type ? rows * static_cast<uint64_t>(dtype_row_bytes(type, row)) : 0;
  t.shape = std::move(shape);
  t.offset = tensors_.empty()
                 ? 0
                 : align_up(tensors_.back().offset + tensors_.back().bytes, kAlignment);
  tensors_.push_back(std::move(t));
}

uint64_t GgufWriter::data_bytes() const {
  return tensors_.empty() ? 0
                          : align_up(tensors_.back().offset + tensors_.back().bytes, kAlignment);
}

Status GgufWriter::write_raw(const void* data, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  if (std::fwrite(data, 1, bytes, file_) != bytes)
    return DataLoss("{}: write failed: {}", path_, std::strerror(errno));
  pos_ += bytes;
  return Status::Ok();
}

Status GgufWriter::pad() {
  static const uint8_t kZeros[kAlignment] = {};
  return write_raw(kZeros, align_up(pos_, kAlignment) - pos_);
}

Status GgufWriter::begin(const std::string& path) {
  if (file_) return InvalidArgument("{}: GgufWriter::begin called twice", path);
  std::vector<std::string> keys = keys_;
  std::sort(keys.begin(), keys.end());
  if (auto it = std::adjacent_find(keys.begin(), keys.end()); it != keys.end())
    return InvalidArgument("{}: duplicate metadata key {}", path, *it);
  std::set<std::string_view> names;
  for (const TensorInfo& t : tensors_) {
    if (!names.insert(t.name).second)
      return InvalidArgument("{}: duplicate tensor name {}", path, t.name);
    if (t.shape.empty() || t.shape.size() > 4)
      return InvalidArgument("{}: tensor {} has {} dims (1 to 4 supported)", path, t.name,
                             t.shape.size());
    for (int64_t d : t.shape)
      if (d <= 0) return InvalidArgument("{}: tensor {} has a dimension {}", path, t.name, d);
    if (!t.valid_type) {
      const std::optional<DType> dt = dtype_from_ggml_id(t.type);
      if (!dt) return InvalidArgument("{}: tensor {} has unknown ggml type {}", path, t.name, t.type);
      return InvalidArgument("{}: tensor {} has a row length {} that {} cannot hold (not a "
                             "multiple of its {}-element block)", path, t.name, t.shape.back(),
                             dtype_ggml_name(*dt), dtype_block_elems(*dt));
    }
  }
  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) return NotFound("{}: cannot create file: {}", path, std::strerror(errno));
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_count_);
  LLMS_RETURN_IF_ERROR(write_raw(head.data(), head.size()));
  LLMS_RETURN_IF_ERROR(write_raw(kv_.data(), kv_.size()));
  std::vector<uint8_t> infos;
  for (const TensorInfo& t : tensors_) {
    put_str(infos, t.name);
    put<uint32_t>(infos, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it)
      put<uint64_t>(infos, static_cast<uint64_t>(*it));
    put<uint32_t>(infos, t.type);
    put<uint64_t>(infos, t.offset);
  }
  LLMS_RETURN_IF_ERROR(write_raw(infos.data(), infos.size()));
  LLMS_RETURN_IF_ERROR(pad());
  current_ = 0;
  current_written_ = 0;
  return Status::Ok();
}

Status GgufWriter::write(const void* data, size_t bytes) {
  if (!file_) return InvalidArgument("GgufWriter::write before begin");
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    if (current_ >= tensors_.size())
      return InvalidArgument("{}: more tensor data written than the tensors declare", path_);
    const TensorInfo& t = tensors_[current_];
    const uint64_t n = std::min<uint64_t>(bytes, t.bytes - current_written_);
    LLMS_RETURN_IF_ERROR(write_raw(p, n));
    p += n;
    bytes -= n;
    current_written_ += n;
    if (current_written_ == t.bytes) {
      LLMS_RETURN_IF_ERROR(pad());
      ++current_;
      current_written_ = 0;
    }
  }
  return Status::Ok();
}

Status GgufWriter::finish() {
  if (!file_) return InvalidArgument("GgufWriter::finish before begin");
  Status st = Status::Ok();
  if (current_ < tensors_.size())
    st = InvalidArgument("{}: tensor {} has {} of {} bytes written", path_,
                         tensors_[current_].name, current_written_, tensors_[current_].bytes);
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (st.ok() && close_failed)
    st = DataLoss("{}: close failed: {}", path_, std::strerror(errno));
  return st;
}

}  // namespace llmserve
