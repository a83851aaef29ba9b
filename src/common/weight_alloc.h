// Memory for weights repacked at load (GEMM panels, quantized tiles).
#pragma once

#include <cstddef>

namespace llmserve {

/// `bytes` of 64-byte-aligned memory for weights that every decode step streams once. From
/// 2 MiB up it is 2 MiB-aligned and advised as transparent huge pages (Linux
/// madvise(MADV_HUGEPAGE); a no-op where THP is off): 4 KiB pages cost a TLB miss per page
/// and stop the hardware prefetchers at each page boundary. The tail past the last whole
/// 2 MiB stays in small pages, so nothing is wasted. Returns null when out of memory; free
/// with std::free.
void* alloc_weight_memory(size_t bytes);

}  // namespace llmserve
