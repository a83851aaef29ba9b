// KVCacheManager: maps sequences onto pool blocks. A sequence's block table lists the block
// ids holding its tokens in order: token at position p lives in block_table[p / block_size]
// at offset p % block_size. Blocks are taken only as tokens are appended (no up-front
// reservation of max_model_len) and all return to the pool when the sequence is freed.
#pragma once

#include <cstdint>
#include <vector>

#include "kv_cache/block_pool.h"

namespace llmserve {

class KVCacheManager {
 public:
  KVCacheManager(int32_t num_blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int32_t num_total_blocks() const { return pool_.num_total_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_used_blocks() const { return pool_.num_used_blocks(); }
  /// Fraction of blocks in use, 0..1 (vllm:kv_cache_usage_perc).
  double usage() const {
    return static_cast<double>(num_used_blocks()) / num_total_blocks();
  }

  /// Blocks needed to hold num_tokens tokens.
  int32_t blocks_for_tokens(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }

  /// Grows `block_table` so it covers `num_tokens` tokens in total. Returns false, changing
  /// nothing, when the pool lacks the blocks (the caller preempts or waits).
  bool allocate_slots(std::vector<int32_t>& block_table, int64_t num_tokens);

  /// Returns every block of `block_table` to the pool and clears it.
  void free(std::vector<int32_t>& block_table);

 private:
  int32_t block_size_;
  BlockPool pool_;
};

}  // namespace llmserve
