// alloc_weight_block (common/weight_alloc.h): alignment, small blocks cut from shared slabs
// without overlapping (also when several threads allocate at once), large blocks on their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "common/weight_alloc.h"

namespace llmserve {
namespace {

uintptr_t addr(const std::shared_ptr<uint8_t>& p) { return reinterpret_cast<uintptr_t>(p.get()); }

// No two blocks overlap, and each holds what was written to it.
void expect_disjoint(const std::vector<std::pair<std::shared_ptr<uint8_t>, size_t>>& blocks) {
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const auto& [p, n] : blocks) spans.push_back({addr(p), addr(p) + n});
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& [p, n] = blocks[i];
    for (size_t j = 0; j < n; ++j) ASSERT_EQ(p.get()[j], static_cast<uint8_t>(i * 7 + 1)) << i;
  }
}

TEST(WeightAlloc, SmallBlocksShareSlabsLargeOnesStandAlone) {
  std::vector<std::pair<std::shared_ptr<uint8_t>, size_t>> blocks;
  for (size_t n : {1, 63, 64, 65, 4096, 100000, 1 << 20}) {
    auto p = alloc_weight_block(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(addr(p) % 64, 0u) << n;
    blocks.push_back({p, n});
  }
  // Consecutive small blocks come one after another (rounded to 64 bytes) from one slab,
  // unless the slab just ran out.
  auto a = alloc_weight_block(100), b = alloc_weight_block(100);
  EXPECT_TRUE(addr(b) == addr(a) + 128 || addr(b) - addr(a) >= kWeightSlabBytes / 2);
  blocks.push_back({a, 100});
  blocks.push_back({b, 100});
  auto big = alloc_weight_block((size_t{5} << 20) + 3);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(addr(big) % (size_t{2} << 20), 0u);
  blocks.push_back({big, (size_t{5} << 20) + 3});
  // Enough small blocks to fill several slabs.
  for (int i = 0; i < 40; ++i) blocks.push_back({alloc_weight_block(1 << 20), 1 << 20});
  for (size_t i = 0; i < blocks.size(); ++i) std::memset(blocks[i].first.get(), static_cast<int>(i * 7 + 1), blocks[i].second);
  expect_disjoint(blocks);
}

TEST(WeightAlloc, ThreadsAllocatingAtOnceGetDisjointBlocks) {
  constexpr int kThreads = 4, kEach = 300;
  std::vector<std::vector<std::pair<std::shared_ptr<uint8_t>, size_t>>> per(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const size_t n = 64 + static_cast<size_t>((i * 977 + t * 131) % 200000);
        per[t].push_back({alloc_weight_block(n), n});
      }
    });
  for (std::thread& th : threads) th.join();
  std::vector<std::pair<std::shared_ptr<uint8_t>, size_t>> all;
  for (auto& v : per) all.insert(all.end(), v.begin(), v.end());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_NE(all[i].first, nullptr);
    std::memset(all[i].first.get(), static_cast<int>(i * 7 + 1), all[i].second);
  }
  expect_disjoint(all);
}

}  // namespace
}  // namespace llmserve
