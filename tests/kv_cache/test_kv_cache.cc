#include <gtest/gtest.h>

#include <set>

#include "kv_cache/block_pool.h"
#include "kv_cache/kv_cache_manager.h"

namespace llmserve {
namespace {

TEST(BlockPool, AllocateIsAllOrNothing) {
  BlockPool pool(4);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(3, a));
  EXPECT_EQ(pool.num_free_blocks(), 1);
  std::vector<int32_t> b;
  EXPECT_FALSE(pool.allocate(2, b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.num_free_blocks(), 1);
  std::set<int32_t> distinct(a.begin(), a.end());
  EXPECT_EQ(distinct.size(), 3u);
  for (int32_t id : a) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 4);
    EXPECT_EQ(pool.ref_count(id), 1);
    pool.release(id);
  }
  EXPECT_EQ(pool.num_free_blocks(), 4);
}

TEST(BlockPoolDeathTest, DoubleFreeIsCaught) {
  BlockPool pool(2);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(1, a));
  pool.release(a[0]);
  EXPECT_DEATH(pool.release(a[0]), "double free");
}

TEST(KVCacheManager, GrowsBlockTableOnlyAsTokensArrive) {
  KVCacheManager kv(/*num_blocks=*/10, /*block_size=*/16);
  std::vector<int32_t> table;
  ASSERT_TRUE(kv.allocate_slots(table, 1));
  EXPECT_EQ(table.size(), 1u);
  ASSERT_TRUE(kv.allocate_slots(table, 16));
  EXPECT_EQ(table.size(), 1u);  // still fits in the first block
  ASSERT_TRUE(kv.allocate_slots(table, 17));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(kv.num_used_blocks(), 2);
  EXPECT_DOUBLE_EQ(kv.usage(), 0.2);
  // More than the pool: refused, nothing changes.
  EXPECT_FALSE(kv.allocate_slots(table, 16 * 11));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(kv.num_free_blocks(), 8);
  kv.free(table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(kv.num_free_blocks(), 10);
}

// Sliding window: blocks holding only positions before the first needed one go back to the
// pool as kNullBlock entries; the table keeps its length, freeing twice is a no-op, and a later
// free() of the table skips the null entries.
TEST(KVCacheManager, FreesBlocksBeforeTheWindow) {
  KVCacheManager kv(/*num_blocks=*/10, /*block_size=*/4);
  std::vector<int32_t> t;
  ASSERT_TRUE(kv.allocate_slots(t, 22));  // 6 blocks: positions 0..23
  const std::vector<int32_t> before = t;
  EXPECT_EQ(kv.free_blocks_before(t, 3), 0);   // block 0 still holds position 3
  EXPECT_EQ(kv.free_blocks_before(t, 4), 1);   // block 0 is positions 0..3
  EXPECT_EQ(kv.free_blocks_before(t, 11), 1);  // block 1 (4..7); block 2 holds 8..11
  EXPECT_EQ(kv.free_blocks_before(t, 11), 0);
  ASSERT_EQ(t.size(), before.size());
  EXPECT_EQ(t[0], KVCacheManager::kNullBlock);
  EXPECT_EQ(t[1], KVCacheManager::kNullBlock);
  for (size_t i = 2; i < t.size(); ++i) EXPECT_EQ(t[i], before[i]);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  const std::vector<const std::vector<int32_t>*> tables = {&t};
  kv.check_invariants(tables);
  EXPECT_EQ(kv.free_blocks_before(t, 1000), 4);  // never past the table
  EXPECT_EQ(kv.num_free_blocks(), 10);
  ASSERT_TRUE(kv.allocate_slots(t, 26));  // the table grows after null entries
  EXPECT_EQ(t.size(), 7u);
  EXPECT_NE(t[6], KVCacheManager::kNullBlock);
  kv.free(t);
  EXPECT_EQ(kv.num_free_blocks(), 10);
  EXPECT_EQ(kv.free_blocks_before(t, -5), 0);
}

// shrink undoes a growth: the blocks past the kept entries return to the pool, the rest stay.
TEST(KVCacheManager, ShrinkUndoesAnAllocation) {
  KVCacheManager kv(6, 4);
  std::vector<int32_t> t;
  ASSERT_TRUE(kv.allocate_slots(t, 8));  // 2 blocks
  const std::vector<int32_t> kept = t;
  ASSERT_TRUE(kv.allocate_slots(t, 20));  // 5 blocks
  EXPECT_EQ(kv.num_free_blocks(), 1);
  kv.shrink(t, kept.size());
  EXPECT_EQ(t, kept);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.shrink(t, 5);  // no-op past the end
  EXPECT_EQ(t.size(), 2u);
  const std::vector<const std::vector<int32_t>*> tables = {&t};
  kv.check_invariants(tables);
  kv.free(t);
  EXPECT_EQ(kv.num_free_blocks(), 6);
}

TEST(KVCacheManager, BlocksForTokens) {
  KVCacheManager kv(4, 16);
  EXPECT_EQ(kv.blocks_for_tokens(0), 0);
  EXPECT_EQ(kv.blocks_for_tokens(1), 1);
  EXPECT_EQ(kv.blocks_for_tokens(16), 1);
  EXPECT_EQ(kv.blocks_for_tokens(17), 2);
}

}  // namespace
}  // namespace llmserve
