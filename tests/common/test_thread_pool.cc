#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"

namespace llmserve {
namespace {

TEST(ThreadPool, EveryIndexExactlyOnceOverManyJobs) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000}) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          ASSERT_LE(0, b);
          ASSERT_LE(b, e);
          ASSERT_LE(e, n);
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
      }
    }
  }
}

TEST(ThreadPool, MinChunkLimitsSplitting) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(10, [&](int64_t, int64_t) { calls.fetch_add(1); }, /*min_chunk=*/8);
  EXPECT_EQ(calls.load(), 1);
}

TEST(ThreadPool, ParallelItemsRunsEveryItemExactlyOnce) {
  for (int threads : {1, 2, 3, 17}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 5, 63, 1000}) {
      for (int rep = 0; rep < 100; ++rep) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_items(n, [&](int64_t i) {
          ASSERT_LE(0, i);
          ASSERT_LT(i, n);
          hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
      }
    }
  }
}

TEST(ThreadPool, ParallelItemsWalksEachShareFrontToBack) {
  // Every thread's own items come in increasing order (one forward stream); a slow thread's
  // share is finished by the others from its back.
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<int64_t> order_by_thread[2];
  std::map<std::thread::id, int> ids;
  pool.parallel_items(64, [&](int64_t i) {
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // share 0 stalls
    std::lock_guard<std::mutex> lock(mu);
    const int t = ids.emplace(std::this_thread::get_id(), static_cast<int>(ids.size())).first->second;
    order_by_thread[t].push_back(i);
  });
  int64_t total = 0;
  for (const auto& order : order_by_thread) total += static_cast<int64_t>(order.size());
  EXPECT_EQ(total, 64);
  // The thread that ran item 0 slept: the other one took part of share 0 from its back.
  const auto& fast = order_by_thread[0].front() == 0 ? order_by_thread[1] : order_by_thread[0];
  EXPECT_GT(fast.size(), 33u);
  // The fast thread's own share (32..63) was taken in increasing order.
  std::vector<int64_t> own;
  for (int64_t i : fast)
    if (i >= 32) own.push_back(i);
  EXPECT_TRUE(std::is_sorted(own.begin(), own.end()));
  // Stolen items come as back halves of share 0, each run front to back: the fast thread's
  // list descends only where a new steal starts, about log2(31) times (one item at a time
  // from the back would descend at every item).
  int descents = 0;
  for (size_t k = 1; k < fast.size(); ++k) descents += fast[k] < fast[k - 1] ? 1 : 0;
  EXPECT_LE(descents, 6);
  EXPECT_GE(descents, 1);
}

TEST(ThreadPool, SurvivesIdlePeriods) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 5; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers go to sleep
    pool.parallel_for(100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  }
  EXPECT_EQ(sum.load(), 5 * 4950);
}

TEST(Status, ExpectedCarriesValueOrError) {
  Expected<int> ok = 3;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  Expected<int> bad = InvalidArgument("x = {}", 5);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "x = 5");
}

}  // namespace
}  // namespace llmserve
