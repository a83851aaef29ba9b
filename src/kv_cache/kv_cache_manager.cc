#include "kv_cache/kv_cache_manager.h"

#include <algorithm>

#include "common/check.h"

namespace llmserve {

KVCacheManager::KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), pool_(num_blocks) {
  LLMS_CHECK(block_size > 0, "block_size={}", block_size);
}

void KVCacheManager::find_cached_prefix(std::span<const BlockHash> hashes, int32_t max_blocks,
                                        std::vector<int32_t>& hits) const {
  if (!prefix_caching_) return;
  const size_t n = std::min(hashes.size(), static_cast<size_t>(std::max(0, max_blocks)));
  for (size_t i = 0; i < n; ++i) {
    const auto id = pool_.lookup(hashes[i]);
    if (!id) break;
    hits.push_back(*id);
  }
}

void KVCacheManager::find_cached_window_prefix(std::span<const BlockHash> hashes, int32_t max_blocks,
                                              int64_t window, std::vector<int32_t>& hits) const {
  if (!prefix_caching_) return;
  const int32_t n = static_cast<int32_t>(std::min(hashes.size(), static_cast<size_t>(std::max(0, max_blocks))));
  std::vector<int32_t> ids(n, kNullBlock), run(n, 0);  // run[i]: cached blocks ending at i
  for (int32_t i = 0; i < n; ++i) {
    if (const auto id = pool_.lookup(hashes[i])) {
      ids[i] = *id;
      run[i] = (i > 0 ? run[i - 1] : 0) + 1;
    }
  }
  for (int32_t p = n; p > 0; --p) {
    // Blocks wholly before the first position the next query sees (free_blocks_before's rule).
    const int64_t first_needed = int64_t{p} * block_size_ - window + 1;
    const int32_t before = static_cast<int32_t>(std::max<int64_t>(first_needed, 0) / block_size_);
    if (run[p - 1] < p - before) continue;
    hits.insert(hits.end(), before, kNullBlock);
    hits.insert(hits.end(), ids.begin() + before, ids.begin() + p);
    return;
  }
}

bool KVCacheManager::allocate_slots(std::vector<int32_t>& block_table, int64_t num_tokens,
                                    std::span<const int32_t> hits) {
  LLMS_CHECK(hits.empty() || block_table.empty(), "prefix hits for a non-empty block table");
  const int32_t needed = blocks_for_tokens(num_tokens) -
                         static_cast<int32_t>(block_table.size() + hits.size());
  // A cached (unreferenced) hit stops being allocatable once taken.
  int32_t cached_hits = 0;
  for (int32_t id : hits) cached_hits += id != kNullBlock && pool_.ref_count(id) == 0;
  if (std::max(0, needed) > pool_.num_free_blocks() - cached_hits) return false;
  for (int32_t id : hits) {
    if (id != kNullBlock) pool_.touch(id);
    block_table.push_back(id);
  }
  if (needed <= 0) return true;
  const bool ok = pool_.allocate(needed, block_table);
  LLMS_CHECK(ok, "allocate_slots: {} blocks counted free but not allocatable", needed);
  return true;
}

void KVCacheManager::cache_full_blocks(std::span<const BlockHash> hashes,
                                       std::span<const int32_t> block_table, int32_t num_full,
                                       int32_t* num_hashed) {
  if (!prefix_caching_) return;
  LLMS_CHECK(num_full <= static_cast<int32_t>(hashes.size()) &&
                 num_full <= static_cast<int32_t>(block_table.size()),
             "cache_full_blocks: {} full blocks, {} hashes, {} in the table", num_full,
             hashes.size(), block_table.size());
  for (int32_t i = *num_hashed; i < num_full; ++i) pool_.set_hash(block_table[i], hashes[i]);
  *num_hashed = std::max(*num_hashed, num_full);
}

void KVCacheManager::free(std::vector<int32_t>& block_table) {
  // Release in reverse: the tail of a sequence (least likely to be shared) is released first,
  // so it is the older entry in the LRU list and evicted first.
  for (auto it = block_table.rbegin(); it != block_table.rend(); ++it)
    if (*it != kNullBlock) pool_.release(*it);
  block_table.clear();
}

void KVCacheManager::shrink(std::vector<int32_t>& block_table, size_t size) {
  while (block_table.size() > size) {
    if (block_table.back() != kNullBlock) pool_.release(block_table.back());
    block_table.pop_back();
  }
}

int32_t KVCacheManager::free_blocks_before(std::vector<int32_t>& block_table, int64_t first_needed) {
  const int64_t n = std::min<int64_t>(std::max<int64_t>(first_needed, 0) / block_size_,
                                      static_cast<int64_t>(block_table.size()));
  int32_t released = 0;
  // In reverse, as free(): a sequence's first block, the one any prefix hit needs, is the
  // last of them evicted. Freed entries are always a prefix of the table (first_needed only
  // grows), so the first null met ends the walk: O(newly freed) per step, not O(context).
  for (int64_t b = n - 1; b >= 0; --b) {
    if (block_table[b] == kNullBlock) break;
    pool_.release(block_table[b]);
    block_table[b] = kNullBlock;
    ++released;
  }
  return released;
}

void KVCacheManager::check_invariants(std::span<const std::vector<int32_t>* const> tables) const {
  pool_.check_invariants();
  std::vector<int32_t> refs(pool_.num_total_blocks(), 0);
  for (const std::vector<int32_t>* t : tables)
    for (int32_t id : *t) {
      if (id == kNullBlock) continue;
      LLMS_CHECK(id >= 0 && id < pool_.num_total_blocks(), "block id {} out of range", id);
      ++refs[id];
    }
  int32_t used = 0;
  for (int32_t id = 0; id < pool_.num_total_blocks(); ++id) {
    LLMS_CHECK(refs[id] == pool_.ref_count(id), "block {}: ref_count {} but {} block tables hold it",
               id, pool_.ref_count(id), refs[id]);
    used += refs[id] > 0;
  }
  LLMS_CHECK(used + pool_.num_free_blocks() == pool_.num_total_blocks(),
             "used {} + free {} != total {}", used, pool_.num_free_blocks(),
             pool_.num_total_blocks());
}

}  // namespace llmserve
