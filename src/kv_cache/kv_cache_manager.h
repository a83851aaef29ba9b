// KVCacheManager: maps sequences onto pool blocks. A sequence's block table lists the block
// ids holding its tokens in order: token at position p lives in block_table[p / block_size]
// at offset p % block_size. Blocks are taken only as tokens are appended (no up-front
// reservation of max_model_len) and return to the pool when the sequence is freed.
//
// Automatic prefix caching (vLLM V1; on unless disabled): a sequence's full blocks, once
// computed, are indexed by their chained hashes (kv_cache/block_hash.h); a new sequence
// starts from the longest run of indexed blocks matching its tokens (find_cached_prefix),
// sharing them by reference count, and a block released by every sequence keeps its K/V as a
// cached, evictable block (kv_cache/block_pool.h) until an allocation needs it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kv_cache/block_hash.h"
#include "kv_cache/block_pool.h"

namespace llmserve {

class KVCacheManager {
 public:
  KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching = false);

  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t num_total_blocks() const { return pool_.num_total_blocks(); }
  /// Blocks an allocation can take: free and cached (evictable) ones.
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_used_blocks() const { return pool_.num_used_blocks(); }
  /// Cached blocks: nobody holds them, they keep their K/V and hash until evicted.
  int32_t num_cached_blocks() const { return pool_.num_cached_blocks(); }
  /// Fraction of blocks held by sequences, 0..1 (vllm:kv_cache_usage_perc: cached blocks
  /// count as free, as vLLM counts them).
  double usage() const {
    return static_cast<double>(num_used_blocks()) / num_total_blocks();
  }
  const BlockPool& pool() const { return pool_; }

  /// Blocks needed to hold num_tokens tokens.
  int32_t blocks_for_tokens(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }

  /// Appends to `hits` the blocks of the longest run of indexed blocks matching `hashes` (the
  /// sequence's full-block hashes, extend_block_hashes), at most `max_blocks` of them. Takes
  /// no reference (allocate_slots does). Nothing when prefix caching is off.
  void find_cached_prefix(std::span<const BlockHash> hashes, int32_t max_blocks,
                          std::vector<int32_t>& hits) const;

  /// Sliding-window prefix hit (vLLM's SlidingWindowManager): the longest prefix of P <=
  /// max_blocks blocks whose blocks a query at position P * block_size can see, i.e. [P *
  /// block_size - window + 1, P * block_size), are all indexed; blocks wholly before that need
  /// not be cached. Appends P entries to `hits`: kNullBlock for the blocks before the window,
  /// then the cached ids. Nothing when prefix caching is off.
  void find_cached_window_prefix(std::span<const BlockHash> hashes, int32_t max_blocks, int64_t window,
                                 std::vector<int32_t>& hits) const;

  /// Grows `block_table` so it covers `num_tokens` tokens in total; with `hits` (only for an
  /// empty table) those blocks, shared, come first and only the rest is allocated (a cached
  /// hit leaves the LRU list, so it does not count as allocatable; kNullBlock entries, from
  /// find_cached_window_prefix, stay null). Returns false, changing
  /// nothing, when the pool lacks the blocks (the caller preempts or waits).
  bool allocate_slots(std::vector<int32_t>& block_table, int64_t num_tokens,
                      std::span<const int32_t> hits = {});

  /// Indexes the blocks [*num_hashed, num_full) of `block_table`, which must be full and
  /// computed, by `hashes` (at least num_full of them); *num_hashed becomes num_full. Blocks
  /// whose hash already indexes another block stay unindexed. No-op when caching is off.
  void cache_full_blocks(std::span<const BlockHash> hashes, std::span<const int32_t> block_table,
                         int32_t num_full, int32_t* num_hashed);

  /// Releases the entries of `block_table` past its first `size` (in reverse) and truncates it:
  /// undoes an allocate_slots that grew the table from `size` entries.
  void shrink(std::vector<int32_t>& block_table, size_t size);

  /// Releases every block of `block_table` (in reverse, so a sequence's last blocks are the
  /// first evicted; kNullBlock entries skipped) and clears it.
  void free(std::vector<int32_t>& block_table);

  /// A block-table entry whose block was returned to the pool (sliding window): no position
  /// in it is read again. The table keeps its length, so position p still maps to entry
  /// p / block_size (vLLM's null block).
  static constexpr int32_t kNullBlock = -1;

  /// Sliding-window attention: releases the blocks of `block_table` that hold only positions
  /// before `first_needed` (the earliest position any later query of the sequence can see),
  /// replacing them by kNullBlock; with prefix caching their K/V stay cached, evictable.
  /// Returns how many were released. The null entries must form a prefix of the table (as
  /// repeated calls with a growing first_needed leave them).
  int32_t free_blocks_before(std::vector<int32_t>& block_table, int64_t first_needed);

  /// Blocks of `block_size` a sequence of `total_tokens` tokens holds at most at once when
  /// every layer has a sliding window of `window` tokens and steps compute up to
  /// `max_step_tokens` of its tokens: a step starting at position c reads [c - window + 1,
  /// c + step - 1], i.e. window + step - 1 consecutive positions, which touch at most
  /// ceil((window + step - 2) / block_size) + 1 blocks; never more than the sequence's own.
  /// window 0: every block of the sequence. int64 throughout (windows up to 2^31 - 1).
  static int64_t blocks_held(int64_t total_tokens, int64_t window, int64_t max_step_tokens, int64_t block_size) {
    const int64_t all = (total_tokens + block_size - 1) / block_size;
    if (window <= 0) return all;
    const int64_t step = std::max<int64_t>(1, std::min(max_step_tokens, total_tokens));
    const int64_t span = window + step - 1;  // positions read by one step
    return std::min(all, (span - 1 + block_size - 1) / block_size + 1);
  }

  /// The pool's invariants and, over `tables` (every block table that holds blocks), that each
  /// block's ref_count equals the number of tables holding it. CHECK-fails on violation.
  void check_invariants(std::span<const std::vector<int32_t>* const> tables) const;

 private:
  int32_t block_size_;
  bool prefix_caching_;
  BlockPool pool_;
};

}  // namespace llmserve
