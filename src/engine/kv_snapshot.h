// A picture of the paged KV cache at one moment, for the live dashboard (GET /ui/events):
// every physical block's reference count, the cached (evictable) blocks, and each sequence's
// block table in order. Taken on the engine thread between steps.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace llmserve {

struct KvSnapshot {
  int64_t step_idx = 0;  // the step after which it was taken
  /// ref_counts[block id]: sequences holding the block (0 = free or cached). Size: the pool.
  std::vector<int32_t> ref_counts;
  /// Blocks no sequence holds that keep K/V and a hash (prefix caching), least recently
  /// released first (the eviction order).
  std::vector<int32_t> cached;
  /// (request id, block table in order) for every request holding blocks.
  std::vector<std::pair<int64_t, std::vector<int32_t>>> block_tables;
};

}  // namespace llmserve
