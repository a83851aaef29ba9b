#include "common/weight_alloc.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>

namespace llmserve {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

std::shared_ptr<uint8_t> huge_block(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge));
  if (p == nullptr) return nullptr;
  madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // advisory
  return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
}

}  // namespace

std::shared_ptr<uint8_t> alloc_weight_block(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (bytes >= kHuge) return huge_block(bytes);
  // The slab being cut; held weakly, so a slab whose blocks are all freed goes with them.
  static std::mutex mu;
  static std::weak_ptr<uint8_t> slab;
  static size_t used = 0;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<uint8_t> s = slab.lock();
  if (s == nullptr || used + bytes > kWeightSlabBytes) {
    s = huge_block(kWeightSlabBytes);
    if (s == nullptr) return nullptr;
    slab = s;
    used = 0;
  }
  std::shared_ptr<uint8_t> block(s, s.get() + used);  // shares the slab's ownership
  used += bytes;
  return block;
}

}  // namespace llmserve
