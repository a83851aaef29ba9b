// A read-only memory-mapped file (mmap, MAP_PRIVATE). Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace llmserve {

/// Reads a small text file (JSON configs) whole. Errors (naming the file): NotFound when it
/// cannot be opened (incl. symlink loops), InvalidArgument when it is not a regular file
/// (a directory, FIFO, device) or larger than `max_bytes`.
Expected<std::string> read_text_file(const std::string& path, size_t max_bytes = size_t{64} << 20);

class MappedFile {
 public:
  /// Maps `path` read-only. Errors: NotFound (cannot open), DataLoss (empty / cannot map).
  /// Messages name the file.
  static Expected<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace llmserve
