#include <gtest/gtest.h>

#include <atomic>
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
