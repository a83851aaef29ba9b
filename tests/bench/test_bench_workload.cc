// bench workloads: random dataset bounds and reproducibility, dataset files, gamma arrivals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "bench/workload.h"

namespace llmserve::bench {
namespace {

VocabInfo small_vocab() {
  VocabInfo v;
  v.vocab_size = 64;
  v.bos_id = 1;
  v.special_ids = {0, 1, 2};
  return v;
}

TEST(BenchWorkload, LengthRangeFollowsVllm) {
  EXPECT_EQ(length_range(100, 0.25, 1).lo, 75);
  EXPECT_EQ(length_range(100, 0.25, 1).hi, 125);
  EXPECT_EQ(length_range(10, 0.0, 1).lo, 10);
  EXPECT_EQ(length_range(10, 0.0, 1).hi, 10);
  EXPECT_EQ(length_range(3, 0.9, 2).lo, 2);  // floor(0.3) clamped to the minimum
  EXPECT_EQ(length_range(3, 0.9, 2).hi, 6);  // ceil(5.7)
}

TEST(BenchWorkload, RandomLengthsStayInBoundsAndIdsAvoidSpecials) {
  RandomDatasetOptions o{200, 40, 20, 0.5, 7};
  auto reqs = make_random_dataset(o, small_vocab());
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ASSERT_EQ(reqs->size(), 200u);
  int32_t min_in = 1 << 30, max_in = 0;
  for (const BenchRequest& r : *reqs) {
    ASSERT_EQ(static_cast<int32_t>(r.prompt_token_ids.size()), r.prompt_len);
    EXPECT_GE(r.prompt_len, 20);
    EXPECT_LE(r.prompt_len, 60);
    EXPECT_GE(r.output_len, 10);
    EXPECT_LE(r.output_len, 30);
    EXPECT_EQ(r.prompt_token_ids[0], 1);  // BOS first
    for (size_t i = 1; i < r.prompt_token_ids.size(); ++i) {
      EXPECT_GE(r.prompt_token_ids[i], 3);
      EXPECT_LT(r.prompt_token_ids[i], 64);
    }
    min_in = std::min(min_in, r.prompt_len);
    max_in = std::max(max_in, r.prompt_len);
  }
  EXPECT_LT(min_in, 30);  // the range is actually used
  EXPECT_GT(max_in, 50);
}

TEST(BenchWorkload, RandomDatasetIsSeeded) {
  RandomDatasetOptions o{20, 16, 8, 0.5, 3};
  auto a = make_random_dataset(o, small_vocab());
  auto b = make_random_dataset(o, small_vocab());
  o.seed = 4;
  auto c = make_random_dataset(o, small_vocab());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].prompt_token_ids, (*b)[i].prompt_token_ids);
    EXPECT_EQ((*a)[i].output_len, (*b)[i].output_len);
    differs |= (*a)[i].prompt_token_ids != (*c)[i].prompt_token_ids;
  }
  EXPECT_TRUE(differs);
}

TEST(BenchWorkload, RandomDatasetRejectsBadOptions) {
  EXPECT_FALSE(make_random_dataset({0, 16, 8, 0.0, 0}, small_vocab()).ok());
  EXPECT_FALSE(make_random_dataset({4, 0, 8, 0.0, 0}, small_vocab()).ok());
  EXPECT_FALSE(make_random_dataset({4, 16, 0, 0.0, 0}, small_vocab()).ok());
  EXPECT_FALSE(make_random_dataset({4, 16, 8, 1.0, 0}, small_vocab()).ok());
  EXPECT_FALSE(make_random_dataset({4, 16, 8, -0.1, 0}, small_vocab()).ok());
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchWorkload, DatasetFileJsonlAndJsonList) {
  const std::string jsonl = write_temp(
      "bench_ds.jsonl", "{\"prompt\": \"Once upon a time\", \"output_len\": 5}\n\n"
                        "{\"prompt\": \"Lily\", \"output_len\": 7}\n");
  auto a = load_dataset_file(jsonl, nullptr, 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].prompt_text, "Once upon a time");
  EXPECT_EQ((*a)[1].output_len, 7);
  auto cycled = load_dataset_file(jsonl, nullptr, 5);
  ASSERT_TRUE(cycled.ok());
  ASSERT_EQ(cycled->size(), 5u);
  EXPECT_EQ((*cycled)[4].prompt_text, "Once upon a time");
  const std::string list =
      write_temp("bench_ds.json", "[{\"prompt\": \"a\", \"output_len\": 1}, "
                                  "{\"prompt\": \"b\", \"output_len\": 2}]");
  auto b = load_dataset_file(list, nullptr, 1);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].prompt_text, "a");
}

TEST(BenchWorkload, DatasetFileErrorsNameTheLine) {
  const std::string bad = write_temp(
      "bench_bad.jsonl", "{\"prompt\": \"x\", \"output_len\": 3}\n{\"prompt\": \"y\"}\n");
  auto r = load_dataset_file(bad, nullptr, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(":2:"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("output_len"), std::string::npos);
  EXPECT_EQ(load_dataset_file("/nonexistent/x.jsonl", nullptr, 0).status().code(),
            StatusCode::kNotFound);
}

struct GapStats {
  double mean = 0, cv2 = 0;  // seconds, squared coefficient of variation
};

GapStats gap_stats(const std::vector<double>& offsets) {
  std::vector<double> gaps;
  for (size_t i = 1; i < offsets.size(); ++i) gaps.push_back(offsets[i] - offsets[i - 1]);
  double m = 0, v = 0;
  for (double g : gaps) m += g;
  m /= static_cast<double>(gaps.size());
  for (double g : gaps) v += (g - m) * (g - m);
  v /= static_cast<double>(gaps.size() - 1);
  return {m, v / (m * m)};
}

TEST(BenchWorkload, GammaArrivalsHaveMeanOneOverRateAndCv2OneOverBurstiness) {
  for (double burstiness : {0.5, 1.0, 4.0}) {
    auto offs = make_arrival_offsets(20001, {4.0, burstiness, 11});
    ASSERT_TRUE(offs.ok());
    EXPECT_DOUBLE_EQ((*offs)[0], 0.0);
    for (size_t i = 1; i < offs->size(); ++i) ASSERT_GE((*offs)[i], (*offs)[i - 1]);
    const GapStats s = gap_stats(*offs);
    EXPECT_NEAR(s.mean, 0.25, 0.25 * 0.03) << "burstiness " << burstiness;
    EXPECT_NEAR(s.cv2, 1.0 / burstiness, 0.1 / burstiness) << "burstiness " << burstiness;
  }
}

TEST(BenchWorkload, InfiniteRateSendsEverythingAtZeroAndBadRatesFail) {
  auto offs = make_arrival_offsets(5, {});
  ASSERT_TRUE(offs.ok());
  for (double t : *offs) EXPECT_EQ(t, 0.0);
  EXPECT_FALSE(make_arrival_offsets(5, {0.0, 1.0, 0}).ok());
  EXPECT_FALSE(make_arrival_offsets(5, {1.0, 0.0, 0}).ok());
  // 1e-50 requests/s would wait about 4e50 s for the second request: refused, not a hang.
  EXPECT_FALSE(make_arrival_offsets(5, {1e-50, 1.0, 0}).ok());
  EXPECT_FALSE(make_arrival_offsets(2, {1.0 / (8 * 24 * 3600.0), 1.0, 0}).ok());
  EXPECT_TRUE(make_arrival_offsets(2, {1.0 / (6 * 24 * 3600.0), 1.0, 0}).ok());
  EXPECT_TRUE(make_arrival_offsets(1, {1e-50, 1.0, 0}).ok());
  auto a = make_arrival_offsets(50, {10.0, 1.0, 5}), b = make_arrival_offsets(50, {10.0, 1.0, 5});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

}  // namespace
}  // namespace llmserve::bench
