// Helpers shared by the libFuzzer targets.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/dtype.h"

namespace llmserve::fuzz {

/// Aborts (a libFuzzer crash with this message) when an invariant does not hold.
#define FUZZ_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d): ", #cond,       \
                   __FILE__, __LINE__);                                     \
      std::fprintf(stderr, __VA_ARGS__);                                    \
      std::fprintf(stderr, "\n");                                           \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

/// An in-memory file (memfd) reachable by path (/proc/self/fd/N), rewritten per input: the
/// file readers take paths and mmap them. Note that reads past the end of the data but inside
/// its last page see zeros and are not reported by ASan; the targets touch every byte of every
/// view the reader returns (a view beyond the mapping faults) and bound its size by the input's.
class MemFile {
 public:
  MemFile() {
    fd_ = ::memfd_create("llmserve-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 || ::ftruncate(fd_, static_cast<off_t>(size)) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

/// Reads every byte of a tensor view (a view outside the mapping faults) and checks that its
/// byte size matches dtype x shape and fits in the input.
template <class View>
inline void touch_view(const View& t, size_t input_size) {
  int64_t numel = 1;
  for (int64_t d : t.shape) {
    FUZZ_CHECK(d >= 0, "tensor %s has a negative dimension", t.name.c_str());
    numel *= d;
  }
  FUZZ_CHECK(t.nbytes <= input_size, "tensor %s: %zu bytes > input %zu", t.name.c_str(), t.nbytes,
             input_size);
  // Rows (the innermost dimension) are whole blocks: numel x element size for float types.
  const int64_t row = t.shape.empty() ? 1 : t.shape.back();
  FUZZ_CHECK(row % dtype_block_elems(t.dtype) == 0, "tensor %s: row %lld is not whole blocks",
             t.name.c_str(), static_cast<long long>(row));
  // An empty row (a 0 in the last dimension) holds no bytes whatever the other dimensions say.
  const int64_t rows = row == 0 ? 0 : numel / row;
  FUZZ_CHECK(t.nbytes == static_cast<size_t>(rows * dtype_row_bytes(t.dtype, row)),
             "tensor %s: nbytes %zu != rows x row bytes (numel %lld)", t.name.c_str(), t.nbytes,
             static_cast<long long>(numel));
  volatile uint8_t sink = 0;
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < t.nbytes; ++i) sink = sink ^ p[i];
  (void)sink;
}

}  // namespace llmserve::fuzz
