// BlockPool: the fixed set of physical KV blocks, allocated once, with automatic prefix
// caching's bookkeeping (vLLM V1's KV cache manager). Pure bookkeeping: the KV tensors live
// with the model runner, indexed by block id.
//
// Every block is in exactly one of three states:
//  - used: ref_count > 0, i.e. held by that many block tables (prefix blocks are shared);
//  - cached: ref_count 0 but holding a full block's K/V and its hash (indexed by it), in an
//    LRU list by the time it was released: a later request with the same prefix takes it back
//    (touch); allocation evicts the least recently released one, only when no free block is
//    left;
//  - free: ref_count 0 and no hash (never used, or released before it was ever full).
// Used blocks may be hashed too (a full block of a running sequence): the index maps each hash
// to one block, the first registered; a later block with the same content stays unindexed.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv_cache/block_hash.h"

namespace llmserve {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_total_blocks() const { return static_cast<int32_t>(ref_count_.size()); }
  /// Blocks an allocation can take: free plus cached (evictable).
  int32_t num_free_blocks() const { return num_free_uncached() + num_cached_blocks(); }
  int32_t num_used_blocks() const { return num_total_blocks() - num_free_blocks(); }
  /// Blocks with ref_count 0 that hold an indexed hash (the LRU list).
  int32_t num_cached_blocks() const { return num_lru_; }
  int32_t num_free_uncached() const { return static_cast<int32_t>(free_list_.size()); }

  /// Takes `n` blocks into `out` (appended, ref_count 1, no hash): free ones first, then the
  /// least recently released cached ones (their hashes leave the index). All or nothing:
  /// returns false and changes nothing if fewer than n are free or cached.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  /// Drops one reference. At ref_count 0 a hashed block becomes cached (the most recently
  /// released), an unhashed one free. CHECK-fails on double free or an out-of-range id.
  void release(int32_t block_id);
  int32_t ref_count(int32_t block_id) const { return ref_count_[block_id]; }

  /// The block indexed by `hash`, if any (used or cached).
  std::optional<int32_t> lookup(const BlockHash& hash) const;
  /// Adds a reference to a block found by lookup; a cached block leaves the LRU list.
  void touch(int32_t block_id);
  /// Indexes a used, full block by its hash. No-op (returns false) when the hash already
  /// indexes a block or the block already has one.
  bool set_hash(int32_t block_id, const BlockHash& hash);
  /// Whether the block holds an indexed hash (and which).
  bool has_hash(int32_t block_id) const { return has_hash_[block_id] != 0; }
  const BlockHash& hash(int32_t block_id) const { return hash_[block_id]; }
  /// Cached block ids from least to most recently released (the eviction order).
  std::vector<int32_t> cached_lru_order() const;

  /// Every state invariant above (CHECK-fail on violation): the LRU list holds exactly the
  /// ref_count-0 hashed blocks, the free list exactly the ref_count-0 unhashed ones, and the
  /// index maps each hashed block's hash to it.
  void check_invariants() const;

 private:
  void lru_unlink(int32_t id);
  void lru_push_back(int32_t id);

  std::vector<int32_t> free_list_;  // stack; lowest ids handed out first
  std::vector<int32_t> ref_count_;
  std::vector<BlockHash> hash_;
  std::vector<uint8_t> has_hash_;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> index_;
  // LRU list of cached blocks (doubly linked through block ids; -1 ends).
  std::vector<int32_t> prev_, next_;
  std::vector<uint8_t> in_lru_;
  int32_t lru_head_ = -1, lru_tail_ = -1, num_lru_ = 0;
};

}  // namespace llmserve
