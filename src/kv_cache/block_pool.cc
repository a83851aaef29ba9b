#include "kv_cache/block_pool.h"

#include "common/check.h"

namespace llmserve {

BlockPool::BlockPool(int32_t num_blocks) : ref_count_(num_blocks, 0) {
  LLMS_CHECK(num_blocks > 0, "num_blocks={}", num_blocks);
  free_list_.reserve(num_blocks);
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_list_.push_back(i);
}

bool BlockPool::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n > num_free_blocks()) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = free_list_.back();
    free_list_.pop_back();
    ref_count_[id] = 1;
    out.push_back(id);
  }
  return true;
}

void BlockPool::release(int32_t block_id) {
  LLMS_CHECK(block_id >= 0 && block_id < num_total_blocks(), "block_id={} num_blocks={}",
             block_id, num_total_blocks());
  LLMS_CHECK(ref_count_[block_id] > 0, "double free of block {}", block_id);
  if (--ref_count_[block_id] == 0) free_list_.push_back(block_id);
}

}  // namespace llmserve
