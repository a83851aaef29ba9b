// BlockPool: the fixed set of physical KV blocks, allocated once; a free list and per-block
// reference counts (ref_count > 1 is reserved for prefix sharing). Pure bookkeeping: the KV
// tensors themselves live with the model runner, indexed by block id.
#pragma once

#include <cstdint>
#include <vector>

namespace llmserve {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_total_blocks() const { return static_cast<int32_t>(ref_count_.size()); }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_used_blocks() const { return num_total_blocks() - num_free_blocks(); }

  /// Pops `n` free blocks into `out` (appended, ref_count 1). All or nothing: returns false
  /// and changes nothing if fewer than n are free.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  /// Drops one reference; the block returns to the free list at ref_count 0.
  /// CHECK-fails on double free or an out-of-range id.
  void release(int32_t block_id);
  int32_t ref_count(int32_t block_id) const { return ref_count_[block_id]; }

 private:
  std::vector<int32_t> free_list_;  // stack; lowest ids handed out first
  std::vector<int32_t> ref_count_;
};

}  // namespace llmserve
