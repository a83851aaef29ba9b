// Prefix caching's bookkeeping (kv_cache/block_hash.h, block_pool.h, kv_cache_manager.h):
// chained hashes, the three block states, LRU eviction only when no free block is left,
// shared references, and a randomized run against a plain model of the states whose every
// step must keep the pool's invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv_cache/block_hash.h"
#include "kv_cache/block_pool.h"
#include "kv_cache/kv_cache_manager.h"

namespace llmserve {
namespace {

std::vector<int32_t> seq(int32_t n, int32_t first = 10) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

TEST(BlockHash, ChainsOverParentTokensAndSalt) {
  const auto t = seq(32);
  std::vector<BlockHash> a, b, salted, other_salt;
  extend_block_hashes(t, 16, "", a);
  extend_block_hashes(t, 16, "", b);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);  // deterministic
  EXPECT_NE(a[0], a[1]);
  // The second block's hash depends on the first block: same 16 tokens, other first block.
  auto t2 = t;
  t2[0] = 999;
  std::vector<BlockHash> c;
  extend_block_hashes(t2, 16, "", c);
  EXPECT_NE(c[0], a[0]);
  EXPECT_NE(c[1], a[1]);
  EXPECT_EQ(hash_block(&c[0], std::span(t).subspan(16, 16), ""), c[1]);
  // The salt enters block 0 and, through the chain, every later block.
  extend_block_hashes(t, 16, "tenant-a", salted);
  extend_block_hashes(t, 16, "tenant-b", other_salt);
  EXPECT_NE(salted[0], a[0]);
  EXPECT_NE(salted[1], a[1]);
  EXPECT_NE(salted[0], other_salt[0]);
  // A first block never equals a later block with the same tokens.
  EXPECT_NE(hash_block(nullptr, std::span(t).subspan(16, 16), ""), a[1]);
  // Only full blocks get a hash; extending is incremental.
  std::vector<BlockHash> partial;
  extend_block_hashes(std::span(t).first(20), 16, "", partial);
  EXPECT_EQ(partial.size(), 1u);
  extend_block_hashes(t, 16, "", partial);
  EXPECT_EQ(partial, a);
}

TEST(BlockPool, CachedBlocksAreEvictedOnlyWhenNoFreeBlockIsLeftLeastRecentFirst) {
  BlockPool pool(4);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.allocate(3, ids));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(pool.set_hash(ids[i], BlockHash{uint64_t(i + 1), 7}));
  EXPECT_FALSE(pool.set_hash(ids[0], BlockHash{99, 7}));  // already hashed
  // Released in the order 2, 0, 1: cached, LRU order 2, 0, 1.
  for (int i : {2, 0, 1}) pool.release(ids[i]);
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  EXPECT_EQ(pool.num_free_uncached(), 1);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.cached_lru_order(), (std::vector<int32_t>{ids[2], ids[0], ids[1]}));
  pool.check_invariants();
  // The never-used block goes first; then eviction in LRU order, dropping the hashes.
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.allocate(1, got));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), got[0]), 0);
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  ASSERT_TRUE(pool.allocate(1, got));
  EXPECT_EQ(got[1], ids[2]);
  EXPECT_FALSE(pool.lookup(BlockHash{3, 7}).has_value());
  EXPECT_TRUE(pool.lookup(BlockHash{1, 7}).has_value());
  // A touched cached block leaves the LRU list and is no longer allocatable.
  pool.touch(*pool.lookup(BlockHash{1, 7}));
  EXPECT_EQ(pool.ref_count(ids[0]), 1);
  EXPECT_EQ(pool.cached_lru_order(), (std::vector<int32_t>{ids[1]}));
  std::vector<int32_t> more;
  EXPECT_FALSE(pool.allocate(2, more));  // only ids[1] is left
  EXPECT_TRUE(more.empty());
  pool.check_invariants();
}

TEST(BlockPool, AHashIndexesOneBlock) {
  BlockPool pool(3);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.allocate(2, ids));
  EXPECT_TRUE(pool.set_hash(ids[0], BlockHash{5, 5}));
  EXPECT_FALSE(pool.set_hash(ids[1], BlockHash{5, 5}));  // same content elsewhere: unindexed
  EXPECT_FALSE(pool.has_hash(ids[1]));
  pool.release(ids[1]);  // unhashed: free, not cached
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_EQ(pool.num_free_uncached(), 2);
  pool.check_invariants();
}

TEST(KVCacheManager, SharesTheLongestCachedRunAndCountsCachedHitsAsTaken) {
  KVCacheManager kv(/*num_blocks=*/6, /*block_size=*/4, /*enable_prefix_caching=*/true);
  const auto a = seq(12);  // 3 full blocks
  std::vector<BlockHash> ha;
  extend_block_hashes(a, 4, "", ha);
  std::vector<int32_t> ta;
  ASSERT_TRUE(kv.allocate_slots(ta, 12));
  int32_t hashed = 0;
  kv.cache_full_blocks(ha, ta, 3, &hashed);
  EXPECT_EQ(hashed, 3);
  // b shares a's first 2 blocks, then differs.
  auto b = a;
  b[9] = 0;
  std::vector<BlockHash> hb;
  extend_block_hashes(b, 4, "", hb);
  std::vector<int32_t> hits;
  kv.find_cached_prefix(hb, 3, hits);
  EXPECT_EQ(hits, (std::vector<int32_t>{ta[0], ta[1]}));
  hits.clear();
  kv.find_cached_prefix(hb, 1, hits);  // capped
  EXPECT_EQ(hits.size(), 1u);
  hits.clear();
  kv.find_cached_prefix(hb, 3, hits);
  std::vector<int32_t> tb;
  ASSERT_TRUE(kv.allocate_slots(tb, 14, hits));  // 2 shared + 2 new
  int32_t hashed_b = 2;
  kv.cache_full_blocks(hb, tb, 3, &hashed_b);  // b's third block, computed
  EXPECT_EQ(hashed_b, 3);
  EXPECT_EQ(kv.pool().ref_count(ta[0]), 2);
  EXPECT_EQ(tb.size(), 4u);
  EXPECT_EQ(kv.num_used_blocks(), 5);
  const std::vector<const std::vector<int32_t>*> tables = {&ta, &tb};
  kv.check_invariants(tables);
  // a leaves: its 3 hashed blocks stay, 2 still held by b, 1 cached.
  kv.free(ta);
  EXPECT_EQ(kv.num_cached_blocks(), 1);
  EXPECT_EQ(kv.num_used_blocks(), 4);
  // c = a again: 3 hits, one of them cached. Pool: 6 blocks, 4 used, 1 cached, 1 free. A
  // 5-block table needs 2 new blocks but only 1 is allocatable once the cached hit is taken.
  std::vector<int32_t> hc;
  kv.find_cached_prefix(ha, 3, hc);
  ASSERT_EQ(hc.size(), 3u);
  std::vector<int32_t> tc;
  EXPECT_FALSE(kv.allocate_slots(tc, 20, hc));
  EXPECT_TRUE(tc.empty());
  EXPECT_EQ(kv.num_cached_blocks(), 1);  // nothing changed
  ASSERT_TRUE(kv.allocate_slots(tc, 16, hc));  // 3 shared + 1 new
  EXPECT_EQ(kv.num_cached_blocks(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 0);
  const std::vector<const std::vector<int32_t>*> tables2 = {&tb, &tc};
  kv.check_invariants(tables2);
  kv.free(tb);
  kv.free(tc);
  EXPECT_EQ(kv.num_used_blocks(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  EXPECT_EQ(kv.num_cached_blocks(), 4);  // a's 3 blocks and b's 3rd full one
  kv.check_invariants({});
}

// Sliding windows: a hit needs only the blocks the next query can see; the evicted first
// blocks become null entries of the new table, and allocation keeps them null.
TEST(KVCacheManager, WindowPrefixNeedsOnlyTheLastWindowsBlocks) {
  KVCacheManager kv(/*num_blocks=*/8, /*block_size=*/4, /*enable_prefix_caching=*/true);
  const auto a = seq(24);  // 6 full blocks
  std::vector<BlockHash> ha;
  extend_block_hashes(a, 4, "", ha);
  // A sequence whose blocks 0 and 1 were freed before its window (null entries) indexes 2..5.
  std::vector<int32_t> tb(2, KVCacheManager::kNullBlock);
  ASSERT_TRUE(kv.allocate_slots(tb, 24));
  int32_t hashed_b = 2;
  kv.cache_full_blocks(ha, tb, 6, &hashed_b);
  std::vector<int32_t> hits;
  // Contiguous lookup from block 0 finds nothing; a window of 6 tokens at P = 6 blocks (position
  // 24) sees 19..23, i.e. blocks 4 and 5, so all 6 blocks hit with 4 null entries.
  hits.clear();
  kv.find_cached_prefix(ha, 6, hits);
  EXPECT_TRUE(hits.empty());
  hits.clear();
  kv.find_cached_window_prefix(ha, 6, 6, hits);
  EXPECT_EQ(hits, (std::vector<int32_t>{KVCacheManager::kNullBlock, KVCacheManager::kNullBlock,
                                        KVCacheManager::kNullBlock, KVCacheManager::kNullBlock, tb[4], tb[5]}));
  // A window of 16 at P = 6 sees 9..23: blocks 2..5, all cached: 2 nulls.
  hits.clear();
  kv.find_cached_window_prefix(ha, 6, 16, hits);
  EXPECT_EQ(std::count(hits.begin(), hits.end(), KVCacheManager::kNullBlock), 2);
  EXPECT_EQ(hits.size(), 6u);
  // A window of 24 would need block 0: the best is P = 0.
  hits.clear();
  kv.find_cached_window_prefix(ha, 6, 24, hits);
  EXPECT_TRUE(hits.empty());
  // Allocation keeps null hits null and references the rest.
  hits.clear();
  kv.find_cached_window_prefix(ha, 6, 6, hits);
  std::vector<int32_t> tc;
  ASSERT_TRUE(kv.allocate_slots(tc, 28, hits));
  EXPECT_EQ(tc.size(), 7u);
  EXPECT_EQ(tc[0], KVCacheManager::kNullBlock);
  EXPECT_EQ(tc[4], tb[4]);
  EXPECT_EQ(kv.pool().ref_count(tb[4]), 2);
  const std::vector<const std::vector<int32_t>*> tables = {&tb, &tc};
  kv.check_invariants(tables);
}

TEST(KVCacheManager, OffMeansNoHitsAndNoIndex) {
  KVCacheManager kv(4, 4, /*enable_prefix_caching=*/false);
  std::vector<BlockHash> h;
  extend_block_hashes(seq(8), 4, "", h);
  std::vector<int32_t> t;
  ASSERT_TRUE(kv.allocate_slots(t, 8));
  int32_t hashed = 0;
  kv.cache_full_blocks(h, t, 2, &hashed);
  EXPECT_EQ(hashed, 0);
  kv.free(t);
  std::vector<int32_t> hits;
  kv.find_cached_prefix(h, 2, hits);
  EXPECT_TRUE(hits.empty());
  EXPECT_EQ(kv.num_cached_blocks(), 0);
}

TEST(KVCacheManager, RandomSequencesKeepEveryInvariant) {
  // Sequences over a small alphabet of prompts (so they share prefixes) come and go; each step
  // checks the pool's invariants and that every hit holds the tokens it claims.
  constexpr int32_t kBs = 4, kBlocks = 24;
  KVCacheManager kv(kBlocks, kBs, true);
  std::mt19937 rng(5);
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<BlockHash> hashes;
    std::vector<int32_t> table;
    int32_t hashed = 0;
  };
  std::vector<Seq> live;
  std::map<int32_t, std::vector<int32_t>> content;  // block id -> tokens it was computed with
  int64_t hits_total = 0;
  for (int step = 0; step < 3000; ++step) {
    if (live.size() < 6 && rng() % 3 != 0) {
      Seq s;
      const int32_t prefix = static_cast<int32_t>(rng() % 3), len = 1 + rng() % 20;
      for (int32_t i = 0; i < len; ++i) s.tokens.push_back(i < 8 ? prefix * 100 + i : rng() % 5);
      extend_block_hashes(s.tokens, kBs, "", s.hashes);
      std::vector<int32_t> hits;
      kv.find_cached_prefix(s.hashes, (len - 1) / kBs, hits);
      if (kv.allocate_slots(s.table, len, hits)) {
        hits_total += static_cast<int64_t>(hits.size());
        for (size_t b = 0; b < hits.size(); ++b) {  // a hit holds exactly these tokens
          const std::vector<int32_t> want(s.tokens.begin() + b * kBs, s.tokens.begin() + (b + 1) * kBs);
          ASSERT_EQ(content.at(hits[b]), want) << "step " << step;
        }
        for (size_t b = hits.size(); b < s.table.size(); ++b) content.erase(s.table[b]);
        s.hashed = static_cast<int32_t>(hits.size());
        const int32_t full = len / kBs;
        for (int32_t b = s.hashed; b < full; ++b)
          content[s.table[b]] = std::vector<int32_t>(s.tokens.begin() + b * kBs,
                                                     s.tokens.begin() + (b + 1) * kBs);
        kv.cache_full_blocks(s.hashes, s.table, full, &s.hashed);
        live.push_back(std::move(s));
      }
    } else if (!live.empty()) {
      const size_t i = rng() % live.size();
      kv.free(live[i].table);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::vector<const std::vector<int32_t>*> tables;
    for (const Seq& s : live) tables.push_back(&s.table);
    kv.check_invariants(tables);
  }
  EXPECT_GT(hits_total, 100);
}

}  // namespace
}  // namespace llmserve
