#include "weights/npy.h"

#include <fmt/ranges.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>

#include "weights/mapped_file.h"

namespace llmserve {

namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kWriteAlignment = 64;

/// The three keys of a .npy header dict.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

/// Parser for the Python-literal dict in a .npy header, e.g.
/// {'descr': '<f4', 'fortran_order': False, 'shape': (24, 512), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  /// Returns false (with pos() at the problem) on malformed input or missing/unknown keys.
  bool parse(NpyHeader* h) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    if (!consume('{')) return false;
    while (!consume('}')) {
      std::string key;
      if (!parse_string(&key) || !consume(':')) return false;
      if (key == "descr" && !seen_descr) {
        seen_descr = parse_string(&h->descr);
        if (!seen_descr) return false;
      } else if (key == "fortran_order" && !seen_fortran) {
        seen_fortran = parse_bool(&h->fortran_order);
        if (!seen_fortran) return false;
      } else if (key == "shape" && !seen_shape) {
        seen_shape = parse_tuple(&h->shape);
        if (!seen_shape) return false;
      } else {
        return false;  // unknown or repeated key
      }
      if (!consume(',')) {
        if (!consume('}')) return false;
        break;
      }
    }
    skip_ws();
    return seen_descr && seen_fortran && seen_shape && pos_ == s_.size();
  }

  size_t pos() const { return pos_; }

 private:
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool parse_string(std::string* out) {
    skip_ws();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    out->assign(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool parse_bool(bool* out) {
    skip_ws();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (s_.substr(pos_).starts_with(word)) {
        pos_ += std::strlen(word);
        *out = value;
        return true;
      }
    }
    return false;
  }
  bool parse_int(int64_t* out) {
    skip_ws();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_++] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return false;
      v = v * 10 + digit;
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
    *out = v;
    return pos_ > start;
  }
  bool parse_tuple(std::vector<int64_t>* out) {
    if (!consume('(')) return false;
    while (!consume(')')) {
      int64_t v = 0;
      if (!parse_int(&v)) return false;
      out->push_back(v);
      if (!consume(',')) return consume(')');
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

/// The header text made printable and short enough for a one-line message.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 160)) out += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > 160) out += "...";
  return out;
}

/// Locates the header dict: returns its text and the offset where the data starts.
Status locate_header(const MappedFile& f, std::string_view* header, size_t* data_start) {
  const std::string& path = f.path();
  if (f.size() < 10)
    return DataLoss("{}: truncated: {} bytes, too short for a .npy preamble", path, f.size());
  if (std::memcmp(f.data(), kMagic, 6) != 0) return DataLoss("{}: bad .npy magic", path);
  const uint8_t major = f.data()[6];
  size_t len = 0, start = 0;
  if (major == 1) {
    len = f.data()[8] | (size_t{f.data()[9]} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (f.size() < 12) return DataLoss("{}: truncated .npy v{} preamble", path, major);
    uint32_t len32;
    std::memcpy(&len32, f.data() + 8, 4);
    len = len32;
    start = 12;
  } else {
    return Unimplemented("{}: unsupported .npy format version {}.{}", path, major, f.data()[7]);
  }
  if (len > f.size() - start) {
    return DataLoss("{}: truncated: .npy header of {} bytes extends past end of file (size {})",
                    path, len, f.size());
  }
  *header = std::string_view(reinterpret_cast<const char*>(f.data() + start), len);
  *data_start = start + len;
  return Status::Ok();
}

/// Checks dtype/order and that the data size matches the shape exactly; returns numel.
Expected<size_t> check_header(const MappedFile& f, const NpyHeader& h, size_t data_bytes) {
  if (h.descr != "<f4") {
    return Unimplemented("{}: .npy dtype '{}' is not supported (only '<f4')", f.path(),
                         printable(h.descr));
  }
  if (h.fortran_order) return Unimplemented("{}: Fortran-order .npy is not supported", f.path());
  uint64_t numel = 1;
  const uint64_t max_numel = data_bytes / sizeof(float) + 1;
  for (int64_t d : h.shape) {
    if (d != 0 && numel > max_numel / static_cast<uint64_t>(d)) {
      numel = max_numel + 1;  // saturate: certainly larger than the data
      break;
    }
    numel *= static_cast<uint64_t>(d);
  }
  if (numel > max_numel || numel * sizeof(float) != data_bytes) {
    return DataLoss("{}: {}: shape ({}) needs {} bytes of data, file has {}", f.path(),
                    numel * sizeof(float) > data_bytes ? "truncated" : "size mismatch",
                    fmt::join(h.shape, ", "),
                    numel > max_numel ? std::string("more") : std::to_string(numel * 4),
                    data_bytes);
  }
  return static_cast<size_t>(numel);
}

std::string header_dict(const std::vector<int64_t>& shape) {
  std::string dims = fmt::format("{}", fmt::join(shape, ", "));
  if (shape.size() == 1) dims += ",";
  return fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
}

}  // namespace

Expected<NpyArray> read_npy(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  std::string_view text;
  size_t data_start = 0;
  LLMS_RETURN_IF_ERROR(locate_header(f, &text, &data_start));
  NpyHeader h;
  HeaderParser parser(text);
  if (!parser.parse(&h)) {
    return DataLoss("{}: malformed .npy header at column {}: {}", path, parser.pos(),
                    printable(text));
  }
  LLMS_ASSIGN_OR_RETURN(size_t numel, check_header(f, h, f.size() - data_start));
  NpyArray arr;
  arr.shape = std::move(h.shape);
  arr.data.resize(numel);
  if (numel > 0) std::memcpy(arr.data.data(), f.data() + data_start, numel * sizeof(float));
  return arr;
}

NpyWriter::~NpyWriter() {
  if (fp_ != nullptr) std::fclose(fp_);
}

NpyWriter::NpyWriter(NpyWriter&& o) noexcept
    : path_(std::move(o.path_)), fp_(o.fp_), total_(o.total_), written_(o.written_) {
  o.fp_ = nullptr;
}

Expected<NpyWriter> NpyWriter::create(const std::string& path, const std::vector<int64_t>& shape) {
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("{}: negative dimension {} in npy shape", path, d);
    if (d != 0 && numel > (uint64_t{1} << 62) / static_cast<uint64_t>(d))
      return InvalidArgument("{}: npy shape ({}) is too large", path, fmt::join(shape, ", "));
    numel *= static_cast<uint64_t>(d);
  }
  std::string header = header_dict(shape);
  const size_t unpadded = 10 + header.size() + 1;  // preamble + dict + '\n'
  header.append((kWriteAlignment - unpadded % kWriteAlignment) % kWriteAlignment, ' ');
  header += '\n';
  if (header.size() > 0xffff) return InvalidArgument("{}: npy shape too long", path);

  NpyWriter w;
  w.path_ = path;
  w.total_ = numel;
  w.fp_ = std::fopen(path.c_str(), "wb");
  if (w.fp_ == nullptr) return NotFound("{}: cannot create: {}", path, std::strerror(errno));
  const uint8_t len_le[2] = {uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)};
  const uint8_t version[2] = {1, 0};
  const bool ok = std::fwrite(kMagic, 1, 6, w.fp_) == 6 && std::fwrite(version, 1, 2, w.fp_) == 2 &&
                  std::fwrite(len_le, 1, 2, w.fp_) == 2 &&
                  std::fwrite(header.data(), 1, header.size(), w.fp_) == header.size();
  if (!ok) return Status(StatusCode::kInternal, fmt::format("{}: write failed", path));
  return w;
}

Status NpyWriter::write(const float* data, size_t count) {
  if (fp_ == nullptr) return InvalidArgument("{}: npy writer is closed", path_);
  if (count > total_ - written_)
    return InvalidArgument("{}: {} more values than the npy shape holds", path_,
                           count - (total_ - written_));
  if (count > 0 && std::fwrite(data, sizeof(float), count, fp_) != count)
    return Status(StatusCode::kInternal, fmt::format("{}: write failed", path_));
  written_ += count;
  return Status::Ok();
}

Status NpyWriter::finish() {
  if (fp_ == nullptr) return InvalidArgument("{}: npy writer is closed", path_);
  const bool ok = std::fclose(fp_) == 0;
  fp_ = nullptr;
  if (written_ != total_)
    return InvalidArgument("{}: {} of {} values written", path_, written_, total_);
  if (!ok) return Status(StatusCode::kInternal, fmt::format("{}: write failed", path_));
  return Status::Ok();
}

Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data,
                 size_t count) {
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("{}: negative dimension {} in npy shape", path, d);
    if (d != 0 && numel > count / static_cast<uint64_t>(d))
      numel = uint64_t(count) + 1;
    else
      numel *= static_cast<uint64_t>(d);
  }
  if (numel != count) {
    return InvalidArgument("{}: npy shape ({}) does not hold {} values", path,
                           fmt::join(shape, ", "), count);
  }
  LLMS_ASSIGN_OR_RETURN(NpyWriter w, NpyWriter::create(path, shape));
  LLMS_RETURN_IF_ERROR(w.write(data, count));
  return w.finish();
}

}  // namespace llmserve
