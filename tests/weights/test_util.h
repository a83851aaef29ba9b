// Helpers for the weights tests: temp files, a tiny GGUF writer, error assertions.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/status.h"

namespace llmserve::testing {

inline std::string shared_path(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/" + rel;
}

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "llmserve_weights_XXXXXX");
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const void* data, size_t n) {
  // A new inode each time: rewriting a truncated file makes ext4 flush it on close, which
  // turns the thousands of rewrites below into seconds of disk waits.
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  ASSERT_TRUE(out.good()) << path;
}
inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file(path, bytes.data(), bytes.size());
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

/// Asserts a failed result whose message is one line naming `path` (and `substr` if given).
template <typename R>
::testing::AssertionResult IsErrorNaming(const R& r, const std::string& path,
                                         std::string_view substr = {}) {
  if (r.ok()) return ::testing::AssertionFailure() << "expected an error, got ok";
  const std::string& msg = r.status().message();
  if (msg.find(path) == std::string::npos) {
    return ::testing::AssertionFailure() << "message does not name " << path << ": " << msg;
  }
  if (msg.find('\n') != std::string::npos) {
    return ::testing::AssertionFailure() << "message is not one line: " << msg;
  }
  if (!substr.empty() && msg.find(substr) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << substr << "': " << msg;
  }
  return ::testing::AssertionSuccess() << msg;
}

/// Little-endian byte appender.
class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    buf_.insert(buf_.end(), b, b + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    buf_.insert(buf_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& b) {
    buf_.insert(buf_.end(), b.begin(), b.end());
    return *this;
  }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& vec() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

/// Writes a small GGUF file per the spec (ggml docs/gguf.md), recording where fields are so
/// tests can corrupt them.
class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;  // innermost first, as stored
    uint32_t type;
    std::vector<uint8_t> data;
  };
  /// Positions of fields inside the built file.
  struct Layout {
    size_t tensor_count_pos = 8, kv_count_pos = 16, first_kv_pos = 24;
    std::vector<size_t> ndims_pos, type_pos, offset_pos;
    size_t data_start = 0;
  };

  uint32_t version = 3;
  uint64_t alignment = 32;

  /// A key/value with pre-encoded value bytes (type id + value).
  GgufWriter& kv(const std::string& key, uint32_t type, const std::vector<uint8_t>& value) {
    kvs_.push_back({key, type, value});
    return *this;
  }
  template <typename T>
  GgufWriter& kv_scalar(const std::string& key, uint32_t type, T v) {
    Bytes b;
    b.put(v);
    return kv(key, type, b.vec());
  }
  GgufWriter& kv_string(const std::string& key, const std::string& s) {
    Bytes b;
    b.str(s);
    return kv(key, 8, b.vec());
  }
  GgufWriter& kv_string_array(const std::string& key, const std::vector<std::string>& items) {
    Bytes b;
    b.put<uint32_t>(8).put<uint64_t>(items.size());
    for (const auto& s : items) b.str(s);
    return kv(key, 9, b.vec());
  }
  GgufWriter& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                     std::vector<uint8_t> data) {
    tensors_.push_back({name, std::move(ne), type, std::move(data)});
    return *this;
  }
  /// F32 tensor with the given values.
  GgufWriter& tensor_f32(const std::string& name, std::vector<uint64_t> ne,
                         const std::vector<float>& values) {
    std::vector<uint8_t> data(values.size() * 4);
    if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
    return tensor(name, std::move(ne), 0, std::move(data));
  }

  std::vector<uint8_t> build(Layout* layout = nullptr) const {
    Layout lay;
    Bytes b;
    b.put<uint32_t>(0x46554747).put<uint32_t>(version);  // "GGUF"
    b.put<uint64_t>(tensors_.size()).put<uint64_t>(kvs_.size());
    for (const auto& kv : kvs_) {
      b.str(kv.key).put<uint32_t>(kv.type).raw(kv.value);
    }
    std::vector<uint64_t> offsets;
    uint64_t off = 0;
    for (const auto& t : tensors_) {
      offsets.push_back(off);
      off += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      b.str(t.name);
      lay.ndims_pos.push_back(b.size());
      b.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) b.put<uint64_t>(d);
      lay.type_pos.push_back(b.size());
      b.put<uint32_t>(t.type);
      lay.offset_pos.push_back(b.size());
      b.put<uint64_t>(offsets[i]);
    }
    if (!tensors_.empty()) {
      while (b.size() % alignment != 0) b.put<uint8_t>(0);
    }
    lay.data_start = b.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      b.raw(tensors_[i].data);
      if (i + 1 < tensors_.size()) {  // pad between tensors, not after the last
        while ((b.size() - lay.data_start) % alignment != 0) b.put<uint8_t>(0);
      }
    }
    if (layout) *layout = lay;
    return b.vec();
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;
  };
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

/// Overwrites sizeof(T) bytes at `pos` with v.
template <typename T>
void patch(std::vector<uint8_t>& bytes, size_t pos, T v) {
  ASSERT_LE(pos + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + pos, &v, sizeof(T));
}

}  // namespace llmserve::testing
