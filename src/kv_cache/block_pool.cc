#include "kv_cache/block_pool.h"

#include "common/check.h"

namespace llmserve {

BlockPool::BlockPool(int32_t num_blocks)
    : ref_count_(num_blocks, 0),
      hash_(num_blocks),
      has_hash_(num_blocks, 0),
      prev_(num_blocks, -1),
      next_(num_blocks, -1),
      in_lru_(num_blocks, 0) {
  LLMS_CHECK(num_blocks > 0, "num_blocks={}", num_blocks);
  free_list_.reserve(num_blocks);
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_list_.push_back(i);
}

void BlockPool::lru_unlink(int32_t id) {
  const int32_t p = prev_[id], n = next_[id];
  (p >= 0 ? next_[p] : lru_head_) = n;
  (n >= 0 ? prev_[n] : lru_tail_) = p;
  prev_[id] = next_[id] = -1;
  in_lru_[id] = 0;
  --num_lru_;
}

void BlockPool::lru_push_back(int32_t id) {
  prev_[id] = lru_tail_;
  next_[id] = -1;
  (lru_tail_ >= 0 ? next_[lru_tail_] : lru_head_) = id;
  lru_tail_ = id;
  in_lru_[id] = 1;
  ++num_lru_;
}

bool BlockPool::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n > num_free_blocks()) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t id;
    if (!free_list_.empty()) {
      id = free_list_.back();
      free_list_.pop_back();
    } else {  // evict the least recently released cached block
      id = lru_head_;
      lru_unlink(id);
      index_.erase(hash_[id]);
      has_hash_[id] = 0;
    }
    ref_count_[id] = 1;
    out.push_back(id);
  }
  return true;
}

void BlockPool::release(int32_t block_id) {
  LLMS_CHECK(block_id >= 0 && block_id < num_total_blocks(), "block_id={} num_blocks={}",
             block_id, num_total_blocks());
  LLMS_CHECK(ref_count_[block_id] > 0, "double free of block {}", block_id);
  if (--ref_count_[block_id] > 0) return;
  if (has_hash_[block_id]) {
    lru_push_back(block_id);
  } else {
    free_list_.push_back(block_id);
  }
}

std::optional<int32_t> BlockPool::lookup(const BlockHash& hash) const {
  const auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::touch(int32_t block_id) {
  LLMS_CHECK(has_hash_[block_id], "touch of unhashed block {}", block_id);
  if (ref_count_[block_id]++ == 0) lru_unlink(block_id);
}

bool BlockPool::set_hash(int32_t block_id, const BlockHash& hash) {
  LLMS_CHECK(ref_count_[block_id] > 0, "set_hash on unused block {}", block_id);
  if (has_hash_[block_id] || index_.count(hash)) return false;
  hash_[block_id] = hash;
  has_hash_[block_id] = 1;
  index_.emplace(hash, block_id);
  return true;
}

std::vector<int32_t> BlockPool::cached_lru_order() const {
  std::vector<int32_t> out;
  for (int32_t id = lru_head_; id >= 0; id = next_[id]) out.push_back(id);
  return out;
}

void BlockPool::check_invariants() const {
  const int32_t n = num_total_blocks();
  std::vector<uint8_t> in_free(n, 0);
  for (int32_t id : free_list_) {
    LLMS_CHECK(!in_free[id], "block {} twice in the free list", id);
    in_free[id] = 1;
    LLMS_CHECK(ref_count_[id] == 0 && !has_hash_[id], "free block {}: ref {} hashed {}", id,
               ref_count_[id], has_hash_[id]);
  }
  int32_t walked = 0;
  for (int32_t id = lru_head_; id >= 0; id = next_[id]) {
    LLMS_CHECK(++walked <= n, "LRU list loops");
    LLMS_CHECK(in_lru_[id] && ref_count_[id] == 0 && has_hash_[id],
               "cached block {}: ref {} hashed {}", id, ref_count_[id], has_hash_[id]);
  }
  LLMS_CHECK(walked == num_lru_, "LRU list holds {} blocks, counted {}", walked, num_lru_);
  size_t hashed = 0;
  for (int32_t id = 0; id < n; ++id) {
    const bool unused = ref_count_[id] == 0;
    LLMS_CHECK(ref_count_[id] >= 0, "block {} ref {}", id, ref_count_[id]);
    LLMS_CHECK(!unused || in_free[id] || in_lru_[id], "unused block {} is neither free nor cached",
               id);
    LLMS_CHECK(unused || (!in_free[id] && !in_lru_[id]), "used block {} is free or cached", id);
    if (has_hash_[id]) {
      ++hashed;
      const auto it = index_.find(hash_[id]);
      LLMS_CHECK(it != index_.end() && it->second == id, "block {}'s hash is not indexed to it",
                 id);
    }
  }
  LLMS_CHECK(hashed == index_.size(), "{} hashed blocks, {} index entries", hashed, index_.size());
}

}  // namespace llmserve
