// Memory for weights repacked at load (GEMM panels, quantized tiles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace llmserve {

/// `bytes` of 64-byte-aligned memory for weights that every decode step streams once,
/// owned by the returned pointer (null when out of memory). From 2 MiB up a block is its own
/// 2 MiB-aligned allocation advised as transparent huge pages (Linux madvise(MADV_HUGEPAGE);
/// a no-op where THP is off): 4 KiB pages cost a TLB miss per page and stop the hardware
/// prefetchers at each page boundary (its tail past the last whole 2 MiB stays in small
/// pages). Smaller blocks (a MoE model's experts: thousands of matrices under 2 MiB) are cut
/// one after another from shared huge-page slabs of kWeightSlabBytes, each slab freed with
/// its last block, so loading them faults in a few huge pages instead of one small page per
/// 4 KiB (on a virtual machine each fault costs tens of microseconds). Thread-safe.
std::shared_ptr<uint8_t> alloc_weight_block(size_t bytes);

/// The size of the slabs small weight blocks share.
inline constexpr size_t kWeightSlabBytes = size_t{16} << 20;

}  // namespace llmserve
