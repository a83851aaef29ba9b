#include "weights/gguf.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <utility>

namespace llmserve {

static_assert(std::endian::native == std::endian::little, "GGUF reader assumes little-endian");

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
// Total elements of all metadata arrays: 16x the largest real vocabularies (tokens, scores,
// types and merges of a 256K vocab hold ~1M elements).
constexpr uint64_t kMaxArrayItems = uint64_t{1} << 24;
// Smallest possible encodings, used to reject counts that cannot fit in the remaining bytes.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims=0, type, offset

/// "DataLoss: <path>: <message>".
template <typename... Args>
Status Corrupt(const std::string& path, fmt::format_string<Args...> f, Args&&... args) {
  return DataLoss("{}: {}", path, fmt::format(f, std::forward<Args>(args)...));
}

constexpr std::string_view value_type_name(GgufType t) {
  constexpr std::string_view kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                         "int32",  "float32", "bool",   "string", "array",
                                         "uint64", "int64",   "float64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

constexpr bool is_valid_value_type(uint32_t t) { return t <= 12; }

constexpr bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

constexpr bool is_float_type(GgufType t) {
  return t == GgufType::kFloat32 || t == GgufType::kFloat64;
}

/// Encoded size of one scalar value (0 for string/array, which are variable-length).
constexpr uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

/// Smallest encoding of one value of type t (string: its length; array: type + count).
constexpr uint64_t min_value_size(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 4 + 8;
  return scalar_size(t);
}

/// ggml tensor type names, for error messages.
std::string ggml_type_name(uint32_t id) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {0, "F32"},     {1, "F16"},      {2, "Q4_0"},   {3, "Q4_1"},    {6, "Q5_0"},
      {7, "Q5_1"},    {8, "Q8_0"},     {9, "Q8_1"},   {10, "Q2_K"},   {11, "Q3_K"},
      {12, "Q4_K"},   {13, "Q5_K"},    {14, "Q6_K"},  {15, "Q8_K"},   {16, "IQ2_XXS"},
      {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},
      {22, "IQ2_S"},  {23, "IQ4_XS"},  {24, "I8"},    {25, "I16"},    {26, "I32"},
      {27, "I64"},    {28, "F64"},     {29, "IQ1_M"}, {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"},  {39, "MXFP4"},   {40, "NVFP4"}, {41, "Q1_0"}};
  for (const auto& [k, name] : kNames) {
    if (k == id) return std::string(name);
  }
  return "unknown";
}

/// "F32, F16, BF16, Q4_0, ...": the types the reader accepts (common/dtype.h), for errors.
std::string supported_type_names() {
  std::string out;
  for (const DTypeInfo& i : kDTypeInfo) out += (out.empty() ? "" : ", ") + std::string(i.ggml_name);
  return out;
}

/// `s` for a one-line error message: non-printable bytes escaped, long text cut short.
std::string printable(std::string_view s) {
  constexpr size_t kMax = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > kMax) out += fmt::format("...({} bytes)", s.size());
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

/// Bounds-checked little-endian reader over a mapped file. Every read checks the remaining
/// byte count first; nothing is read past the end.
class Cursor {
 public:
  explicit Cursor(const MappedFile& f) : data_(f.data()), size_(f.size()), path_(f.path()) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& path() const { return path_; }

  /// Takes `n` from the budget of metadata array elements; false once it is exhausted. Each
  /// element costs a GgufValue (~50 bytes) however small its encoding, so without a cap a
  /// file of byte arrays would need ~50x its size in memory.
  bool take_array_items(uint64_t n) {
    if (n > array_items_left_) return false;
    array_items_left_ -= n;
    return true;
  }

  /// Reads a trivially copyable T, or returns a "truncated" error describing `what`.
  template <typename T, typename What>
  Status read(T* out, const What& what) {
    if (remaining() < sizeof(T)) return truncated(what());
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  /// Reads a GGUF string (uint64 length + bytes); the length is checked before allocating.
  template <typename What>
  Status read_string(std::string* out, const What& what) {
    uint64_t len = 0;
    LLMS_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining()) {
      return Corrupt(path_,
                     "truncated: {} has length {} at offset {} but only {} bytes remain "
                     "(file size {})",
                     what(), len, pos_ - 8, remaining(), size_);
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }

  Status truncated(const std::string& what) const {
    return Corrupt(path_, "truncated: {} at offset {} extends past end of file (size {})", what,
                   pos_, size_);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& path_;
  size_t pos_ = 0;
  uint64_t array_items_left_ = kMaxArrayItems;
};

/// Label builder for error messages, formatted only when an error happens.
auto label(std::string_view prefix, std::string_view key) {
  return [prefix, key] { return fmt::format("{} '{}'", prefix, printable(key)); };
}

Status parse_value(Cursor& cur, GgufType type, int depth, std::string_view key, GgufValue* out);

/// Reads one little-endian T and widens it to int64.
template <typename T, typename What>
Status read_int(Cursor& cur, const What& what, int64_t* v) {
  T x = 0;
  LLMS_RETURN_IF_ERROR(cur.read(&x, what));
  *v = static_cast<int64_t>(x);
  return Status::Ok();
}

/// Reads the integer scalar of `type` into out->value as int64.
Status parse_integer(Cursor& cur, GgufType type, std::string_view key, GgufValue* out) {
  auto what = label("value of metadata", key);
  int64_t v = 0;
  Status st;
  switch (type) {
    case GgufType::kUint8:
      st = read_int<uint8_t>(cur, what, &v);
      break;
    case GgufType::kInt8:
      st = read_int<int8_t>(cur, what, &v);
      break;
    case GgufType::kUint16:
      st = read_int<uint16_t>(cur, what, &v);
      break;
    case GgufType::kInt16:
      st = read_int<int16_t>(cur, what, &v);
      break;
    case GgufType::kUint32:
      st = read_int<uint32_t>(cur, what, &v);
      break;
    case GgufType::kInt32:
      st = read_int<int32_t>(cur, what, &v);
      break;
    case GgufType::kInt64:
      st = read_int<int64_t>(cur, what, &v);
      break;
    case GgufType::kUint64: {
      uint64_t x = 0;
      LLMS_RETURN_IF_ERROR(cur.read(&x, what));
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Corrupt(cur.path(), "metadata '{}': uint64 value {} exceeds INT64_MAX",
                       printable(key), x);
      }
      v = static_cast<int64_t>(x);
      break;
    }
    default:
      break;
  }
  LLMS_RETURN_IF_ERROR(st);
  out->value = v;
  return Status::Ok();
}

/// Reads an array header and its elements (recursively for arrays of arrays).
Status parse_array(Cursor& cur, int depth, std::string_view key, GgufValue* out) {
  if (depth >= kMaxArrayDepth) {
    return Corrupt(cur.path(), "metadata '{}': arrays nested deeper than {}", printable(key),
                   kMaxArrayDepth);
  }
  uint32_t elem_type = 0;
  uint64_t count = 0;
  LLMS_RETURN_IF_ERROR(cur.read(&elem_type, label("array element type of metadata", key)));
  if (!is_valid_value_type(elem_type)) {
    return Corrupt(cur.path(), "metadata '{}': unknown array element type {}", printable(key),
                   elem_type);
  }
  LLMS_RETURN_IF_ERROR(cur.read(&count, label("array length of metadata", key)));
  const auto etype = static_cast<GgufType>(elem_type);
  if (count > cur.remaining() / min_value_size(etype)) {
    return Corrupt(cur.path(),
                   "truncated: metadata '{}': array of {} {} elements cannot fit in "
                   "the {} bytes remaining (file size {})",
                   printable(key), count, value_type_name(etype), cur.remaining(), cur.size());
  }
  if (!cur.take_array_items(count)) {
    return Corrupt(cur.path(),
                   "metadata '{}': array of {} elements exceeds the limit of {} "
                   "metadata array elements in total",
                   printable(key), count, kMaxArrayItems);
  }
  GgufValue::Array arr;
  arr.elem_type = etype;
  arr.items.resize(static_cast<size_t>(count));
  for (GgufValue& item : arr.items) {
    LLMS_RETURN_IF_ERROR(parse_value(cur, etype, depth + 1, key, &item));
  }
  out->value = std::move(arr);
  return Status::Ok();
}

Status parse_value(Cursor& cur, GgufType type, int depth, std::string_view key, GgufValue* out) {
  out->type = type;
  auto what = label("value of metadata", key);
  switch (type) {
    case GgufType::kFloat32: {
      float f = 0;
      LLMS_RETURN_IF_ERROR(cur.read(&f, what));
      out->value = static_cast<double>(f);
      return Status::Ok();
    }
    case GgufType::kFloat64: {
      double d = 0;
      LLMS_RETURN_IF_ERROR(cur.read(&d, what));
      out->value = d;
      return Status::Ok();
    }
    case GgufType::kBool: {
      uint8_t b = 0;
      LLMS_RETURN_IF_ERROR(cur.read(&b, what));
      if (b > 1)
        return Corrupt(cur.path(), "metadata '{}': bool value {} is not 0 or 1", printable(key), b);
      out->value = b == 1;
      return Status::Ok();
    }
    case GgufType::kString: {
      std::string s;
      LLMS_RETURN_IF_ERROR(cur.read_string(&s, what));
      out->value = std::move(s);
      return Status::Ok();
    }
    case GgufType::kArray:
      return parse_array(cur, depth, key, out);
    default:
      return parse_integer(cur, type, key, out);
  }
}

struct Header {
  uint32_t version = 0;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
};

Status parse_header(Cursor& cur, Header* h) {
  char magic[4];
  LLMS_RETURN_IF_ERROR(cur.read(&magic, [] { return std::string("magic"); }));
  if (std::memcmp(magic, kMagic, 4) != 0) {
    return Corrupt(cur.path(), "bad magic {:02x} {:02x} {:02x} {:02x} (expected \"GGUF\")",
                   uint8_t(magic[0]), uint8_t(magic[1]), uint8_t(magic[2]), uint8_t(magic[3]));
  }
  LLMS_RETURN_IF_ERROR(cur.read(&h->version, [] { return std::string("version"); }));
  if (h->version != 2 && h->version != 3) {
    if ((h->version & 0xffff) == 0 && h->version != 0) {
      return Unimplemented("{}: big-endian GGUF (version field {:#x}) is not supported", cur.path(),
                           h->version);
    }
    return Unimplemented("{}: unsupported GGUF version {} (supported: 2, 3)", cur.path(),
                         h->version);
  }
  LLMS_RETURN_IF_ERROR(cur.read(&h->tensor_count, [] { return std::string("tensor count"); }));
  LLMS_RETURN_IF_ERROR(cur.read(&h->kv_count, [] { return std::string("metadata kv count"); }));
  if (h->kv_count > cur.remaining() / kMinKvBytes) {
    return Corrupt(cur.path(),
                   "corrupt metadata kv count {}: cannot fit in the {} bytes after "
                   "the header (file size {})",
                   h->kv_count, cur.remaining(), cur.size());
  }
  if (h->tensor_count > cur.remaining() / kMinTensorInfoBytes) {
    return Corrupt(cur.path(),
                   "corrupt tensor count {}: cannot fit in the {} bytes after the "
                   "header (file size {})",
                   h->tensor_count, cur.remaining(), cur.size());
  }
  return Status::Ok();
}

using Metadata = std::map<std::string, GgufValue, std::less<>>;

Status parse_metadata(Cursor& cur, uint64_t kv_count, Metadata* md) {
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    LLMS_RETURN_IF_ERROR(
        cur.read_string(&key, [i] { return fmt::format("key of metadata kv {}", i); }));
    uint32_t type = 0;
    LLMS_RETURN_IF_ERROR(cur.read(&type, label("value type of metadata", key)));
    if (!is_valid_value_type(type)) {
      return Corrupt(cur.path(), "metadata '{}' has unknown value type {}", printable(key), type);
    }
    GgufValue value;
    LLMS_RETURN_IF_ERROR(parse_value(cur, static_cast<GgufType>(type), 0, key, &value));
    if (md->count(key) != 0)
      return Corrupt(cur.path(), "duplicate metadata key '{}'", printable(key));
    md->emplace(std::move(key), std::move(value));
  }
  return Status::Ok();
}

/// general.alignment if present (a power of two), else 32.
Expected<uint64_t> alignment_of(const std::string& path, const Metadata& md) {
  auto it = md.find("general.alignment");
  if (it == md.end()) return kDefaultAlignment;
  const GgufValue& v = it->second;
  if (!is_integer_type(v.type)) {
    return Corrupt(path, "general.alignment has type {}, expected an integer",
                   value_type_name(v.type));
  }
  const int64_t a = std::get<int64_t>(v.value);
  if (a <= 0 || static_cast<uint64_t>(a) > kMaxAlignment || !std::has_single_bit(uint64_t(a))) {
    return Corrupt(path, "general.alignment {} is not a power of two in [1, 2^30]", a);
  }
  return static_cast<uint64_t>(a);
}

/// One tensor info as read, before its data offset is resolved.
struct RawTensor {
  TensorView view;
  uint64_t offset = 0;  // relative to the data section
};

/// Reads ne[] (innermost first) into an outermost-first shape, checking each dimension and
/// that the byte size cannot exceed the file size (so it cannot overflow either).
Status parse_dims(Cursor& cur, const std::string& name, TensorView* t) {
  uint32_t n_dims = 0;
  LLMS_RETURN_IF_ERROR(cur.read(&n_dims, label("dimension count of tensor", name)));
  if (n_dims > kMaxDims) {
    return Corrupt(cur.path(), "tensor '{}' has {} dimensions (max {})", printable(name), n_dims,
                   kMaxDims);
  }
  uint64_t ne[kMaxDims] = {};
  for (uint32_t j = 0; j < n_dims; ++j) {
    LLMS_RETURN_IF_ERROR(cur.read(&ne[j], label("dimensions of tensor", name)));
    if (ne[j] == 0)
      return Corrupt(cur.path(), "tensor '{}' has dimension {} of size 0", printable(name), j);
  }
  t->shape.assign(n_dims, 0);
  for (uint32_t j = 0; j < n_dims; ++j) {
    t->shape[n_dims - 1 - j] = static_cast<int64_t>(std::min<uint64_t>(ne[j], INT64_MAX));
  }
  return Status::Ok();
}

/// Checks that the tensor's byte size fits in the file and sets t->nbytes: numel * element
/// size for float types; for a quantized type, whole blocks of each row (the innermost
/// dimension, ne[0], must be a multiple of the block) of block_bytes each. Every product is
/// bounded by the file size first, so none can overflow.
Status compute_nbytes(const Cursor& cur, TensorView* t) {
  const DTypeInfo& info = dtype_info(t->dtype);
  const uint64_t block_elems = static_cast<uint64_t>(info.block_elems);
  const uint64_t row = t->shape.empty() ? 1 : static_cast<uint64_t>(t->shape.back());
  if (row % block_elems != 0) {
    return Corrupt(cur.path(),
                   "tensor '{}' of shape {} has a row length {} that {} cannot hold (not a "
                   "multiple of its {}-element block)",
                   printable(t->name), shape_string(t->shape), row, info.ggml_name, block_elems);
  }
  // Blocks = numel / block_elems = (row / block_elems) * outer dimensions.
  const uint64_t limit = cur.size() / static_cast<uint64_t>(info.block_bytes);
  uint64_t blocks = 1;
  for (size_t j = 0; j < t->shape.size(); ++j) {
    uint64_t d = static_cast<uint64_t>(t->shape[j]);
    if (j + 1 == t->shape.size()) d /= block_elems;
    if (d > limit / blocks) {
      return Corrupt(cur.path(),
                     "truncated: tensor '{}' of shape {} ({}) is larger than the "
                     "file (size {})",
                     printable(t->name), shape_string(t->shape), info.ggml_name, cur.size());
    }
    blocks *= d;
  }
  t->nbytes = static_cast<size_t>(blocks * static_cast<uint64_t>(info.block_bytes));
  return Status::Ok();
}

Status parse_tensor_info(Cursor& cur, uint64_t index, RawTensor* out) {
  TensorView& t = out->view;
  LLMS_RETURN_IF_ERROR(
      cur.read_string(&t.name, [index] { return fmt::format("name of tensor info {}", index); }));
  LLMS_RETURN_IF_ERROR(parse_dims(cur, t.name, &t));
  uint32_t type = 0;
  LLMS_RETURN_IF_ERROR(cur.read(&type, label("type of tensor", t.name)));
  LLMS_RETURN_IF_ERROR(cur.read(&out->offset, label("data offset of tensor", t.name)));
  const std::optional<DType> dtype = dtype_from_ggml_id(type);
  if (!dtype) {
    return Unimplemented("{}: tensor '{}' has unsupported type {} ({}); supported: {}",
                         cur.path(), printable(t.name), type, ggml_type_name(type),
                         supported_type_names());
  }
  t.dtype = *dtype;
  return compute_nbytes(cur, &t);
}

/// Resolves data pointers: offsets aligned, data inside the file, no two tensors overlapping.
Status place_tensors(const MappedFile& file, uint64_t data_start, uint64_t alignment,
                     std::vector<RawTensor>& raw) {
  const uint64_t size = file.size();
  for (RawTensor& r : raw) {
    TensorView& t = r.view;
    if (r.offset % alignment != 0) {
      return Corrupt(file.path(),
                     "tensor '{}' data offset {} is not a multiple of the "
                     "alignment {}",
                     printable(t.name), r.offset, alignment);
    }
    if (data_start > size || r.offset > size - data_start ||
        t.nbytes > size - data_start - r.offset) {
      return Corrupt(file.path(),
                     "truncated: data of tensor '{}' ({} bytes at data offset {}, "
                     "data section at {}) extends past end of file (size {})",
                     printable(t.name), t.nbytes, r.offset, data_start, size);
    }
    // Float elements are read in place, so they must be aligned to their size; quantized
    // blocks are copied out (no alignment needed).
    const uint64_t elem_align = is_quantized(t.dtype) ? 1 : dtype_size(t.dtype);
    if ((data_start + r.offset) % elem_align != 0) {
      return Corrupt(file.path(), "tensor '{}' data at file offset {} is misaligned for {}", t.name,
                     data_start + r.offset, dtype_name(t.dtype));
    }
    t.data = file.data() + data_start + r.offset;
  }
  std::vector<const RawTensor*> by_offset;
  for (const RawTensor& r : raw) by_offset.push_back(&r);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const RawTensor* a, const RawTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const RawTensor& prev = *by_offset[i - 1];
    const RawTensor& next = *by_offset[i];
    if (prev.offset + prev.view.nbytes > next.offset) {
      return Corrupt(file.path(), "data of tensors '{}' and '{}' overlap",
                     printable(prev.view.name), printable(next.view.name));
    }
    // Writers (ggml's gguf, gguf-py, ours) lay tensors out back to back, each padded to the
    // alignment (llama.cpp refuses any other offset). More room than that before the next
    // tensor means the type or shape does not describe the data (e.g. a wrong type id).
    const uint64_t padded = (prev.offset + prev.view.nbytes + alignment - 1) / alignment * alignment;
    if (next.offset != padded) {
      return Corrupt(file.path(),
                     "size mismatch: tensor '{}' ({} of shape {}) has {} bytes, but the next "
                     "tensor '{}' starts {} bytes after it (its type or shape does not match "
                     "its data)",
                     printable(prev.view.name), dtype_ggml_name(prev.view.dtype),
                     shape_string(prev.view.shape), prev.view.nbytes, printable(next.view.name),
                     next.offset - prev.offset);
    }
  }
  return Status::Ok();
}

Status parse_tensors(Cursor& cur, const MappedFile& file, uint64_t count, uint64_t alignment,
                     std::vector<TensorView>* out) {
  std::vector<RawTensor> raw(static_cast<size_t>(count));
  std::unordered_set<std::string_view> names;
  for (uint64_t i = 0; i < count; ++i) {
    LLMS_RETURN_IF_ERROR(parse_tensor_info(cur, i, &raw[i]));
    if (!names.insert(raw[i].view.name).second) {
      return Corrupt(cur.path(), "duplicate tensor name '{}'", printable(raw[i].view.name));
    }
  }
  const uint64_t data_start = (cur.pos() + alignment - 1) / alignment * alignment;
  LLMS_RETURN_IF_ERROR(place_tensors(file, data_start, alignment, raw));
  out->clear();
  out->reserve(raw.size());
  for (RawTensor& r : raw) out->push_back(std::move(r.view));
  return Status::Ok();
}

}  // namespace

bool GgufFile::has_magic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return n == 4 && magic[0] == 'G' && magic[1] == 'G' && magic[2] == 'U' && magic[3] == 'F';
}

Expected<GgufFile> GgufFile::open(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
  GgufFile g;
  g.file_ = std::move(mapped);
  Cursor cur(g.file_);
  Header h;
  LLMS_RETURN_IF_ERROR(parse_header(cur, &h));
  g.version_ = h.version;
  LLMS_RETURN_IF_ERROR(parse_metadata(cur, h.kv_count, &g.metadata_));
  LLMS_ASSIGN_OR_RETURN(uint64_t alignment, alignment_of(path, g.metadata_));
  LLMS_RETURN_IF_ERROR(parse_tensors(cur, g.file_, h.tensor_count, alignment, &g.tensors_));
  for (size_t i = 0; i < g.tensors_.size(); ++i) g.tensor_index_.emplace(g.tensors_[i].name, i);
  return g;
}

bool GgufFile::has_key(std::string_view key) const { return find_value(key) != nullptr; }

const GgufValue* GgufFile::find_value(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorView* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

/// Looks up `key`, returning NotFound naming the file and key if absent.
Expected<const GgufValue*> lookup(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find_value(key);
  if (v == nullptr) return NotFound("{}: metadata key '{}' not found", f.path(), key);
  return v;
}

Status wrong_type(const GgufFile& f, std::string_view key, const GgufValue& v,
                  std::string_view expected) {
  std::string actual(value_type_name(v.type));
  if (v.type == GgufType::kArray) {
    actual =
        fmt::format("array of {}", value_type_name(std::get<GgufValue::Array>(v.value).elem_type));
  }
  return InvalidArgument("{}: metadata key '{}' has type {}, expected {}", f.path(), key, actual,
                         expected);
}

/// Returns the array held by `v` if its elements satisfy `pred`, else nullptr.
template <typename Pred>
const GgufValue::Array* array_of(const GgufValue& v, Pred pred) {
  if (v.type != GgufType::kArray) return nullptr;
  const auto& arr = std::get<GgufValue::Array>(v.value);
  return pred(arr.elem_type) ? &arr : nullptr;
}

}  // namespace

Expected<int64_t> GgufFile::get_int(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  if (!is_integer_type(v->type)) return wrong_type(*this, key, *v, "an integer");
  return std::get<int64_t>(v->value);
}

Expected<double> GgufFile::get_float(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  if (is_float_type(v->type)) return std::get<double>(v->value);
  if (is_integer_type(v->type)) return static_cast<double>(std::get<int64_t>(v->value));
  return wrong_type(*this, key, *v, "a float or integer");
}

Expected<bool> GgufFile::get_bool(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  if (v->type != GgufType::kBool) return wrong_type(*this, key, *v, "bool");
  return std::get<bool>(v->value);
}

Expected<std::string> GgufFile::get_string(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  if (v->type != GgufType::kString) return wrong_type(*this, key, *v, "string");
  return std::get<std::string>(v->value);
}

Expected<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  const auto* arr = array_of(*v, [](GgufType t) { return t == GgufType::kString; });
  if (arr == nullptr) return wrong_type(*this, key, *v, "array of string");
  std::vector<std::string> out;
  out.reserve(arr->items.size());
  for (const GgufValue& item : arr->items) out.push_back(std::get<std::string>(item.value));
  return out;
}

Expected<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  const auto* arr = array_of(*v, [](GgufType t) { return is_float_type(t) || is_integer_type(t); });
  if (arr == nullptr) return wrong_type(*this, key, *v, "array of float");
  std::vector<float> out;
  out.reserve(arr->items.size());
  for (const GgufValue& item : arr->items) {
    out.push_back(is_float_type(item.type) ? static_cast<float>(std::get<double>(item.value))
                                           : static_cast<float>(std::get<int64_t>(item.value)));
  }
  return out;
}

Expected<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  LLMS_ASSIGN_OR_RETURN(const GgufValue* v, lookup(*this, key));
  const auto* arr = array_of(*v, is_integer_type);
  if (arr == nullptr) return wrong_type(*this, key, *v, "array of integer");
  std::vector<int64_t> out;
  out.reserve(arr->items.size());
  for (const GgufValue& item : arr->items) out.push_back(std::get<int64_t>(item.value));
  return out;
}

}  // namespace llmserve
