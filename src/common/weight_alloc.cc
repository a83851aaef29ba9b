#include "common/weight_alloc.h"

#include <sys/mman.h>

#include <cstdlib>

namespace llmserve {

void* alloc_weight_memory(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes < kHuge) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(kHuge, (bytes + 4095) / 4096 * 4096);
  if (p != nullptr) madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // advisory
  return p;
}

}  // namespace llmserve
