#include "kv_cache/kv_cache_manager.h"

#include "common/check.h"

namespace llmserve {

KVCacheManager::KVCacheManager(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), pool_(num_blocks) {
  LLMS_CHECK(block_size > 0, "block_size={}", block_size);
}

bool KVCacheManager::allocate_slots(std::vector<int32_t>& block_table, int64_t num_tokens) {
  const int32_t needed = blocks_for_tokens(num_tokens) - static_cast<int32_t>(block_table.size());
  if (needed <= 0) return true;
  return pool_.allocate(needed, block_table);
}

void KVCacheManager::free(std::vector<int32_t>& block_table) {
  // Release in reverse so the most recently used blocks are reused first.
  for (auto it = block_table.rbegin(); it != block_table.rend(); ++it) pool_.release(*it);
  block_table.clear();
}

}  // namespace llmserve
