// The prefix-caching workloads, as data: prefix_repetition prompts share exactly their prefix
// within a group and only the BOS across groups; multi-turn turns chain by `follows` with the
// lengths the docs give; per-turn metrics and the prefix-cache rows of the summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "bench/metrics.h"
#include "bench/multi_turn.h"
#include "bench/prefix_repetition.h"
#include "bench/server_metrics.h"

namespace llmserve::bench {
namespace {

VocabInfo vocab(int32_t size = 512) {
  VocabInfo v;
  v.vocab_size = size;
  v.bos_id = 1;
  v.special_ids = {0, 1, 2};
  return v;
}

/// Tokens two prompts have in common from the start.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST(BenchPrefixRepetition, GroupsShareExactlyTheirPrefix) {
  PrefixRepetitionOptions o;
  o.num_prompts = 23;  // not a multiple: groups of 5, 5, 5, 4, 4
  o.prefix_len = 40;
  o.suffix_len = 9;
  o.num_prefixes = 5;
  o.output_len = 7;
  o.seed = 11;
  std::vector<int32_t> groups;
  auto reqs = make_prefix_repetition_dataset(o, vocab(), &groups);
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ASSERT_EQ(reqs->size(), 23u);
  ASSERT_EQ(groups.size(), 23u);
  std::map<int32_t, int> group_sizes;
  for (int32_t g : groups) ++group_sizes[g];
  EXPECT_EQ(group_sizes.size(), 5u);
  for (const auto& [g, n] : group_sizes) EXPECT_EQ(n, g < 3 ? 5 : 4) << g;
  bool shuffled = false;
  for (size_t i = 1; i < groups.size(); ++i) shuffled |= groups[i] < groups[i - 1];
  EXPECT_TRUE(shuffled);  // vLLM's order: shuffled, not grouped
  for (size_t i = 0; i < reqs->size(); ++i) {
    const BenchRequest& r = (*reqs)[i];
    ASSERT_EQ(r.prompt_token_ids.size(), 49u);
    EXPECT_EQ(r.prompt_len, 49);
    EXPECT_EQ(r.output_len, 7);
    EXPECT_EQ(r.prompt_token_ids[0], 1);  // BOS, counted in the prefix
    for (size_t k = 1; k < r.prompt_token_ids.size(); ++k) EXPECT_GE(r.prompt_token_ids[k], 3);
    for (size_t j = 0; j < i; ++j) {
      const size_t common = common_prefix(r.prompt_token_ids, (*reqs)[j].prompt_token_ids);
      EXPECT_EQ(common, groups[i] == groups[j] ? 40u : 1u) << i << " vs " << j;
    }
  }
  // Seeded: the same options give the same prompts, another seed others.
  auto again = make_prefix_repetition_dataset(o, vocab());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[5].prompt_token_ids, (*reqs)[5].prompt_token_ids);
  o.seed = 12;
  EXPECT_NE((*make_prefix_repetition_dataset(o, vocab()))[5].prompt_token_ids,
            (*reqs)[5].prompt_token_ids);
}

TEST(BenchPrefixRepetition, NoSuffixMeansIdenticalPromptsPerGroup) {
  PrefixRepetitionOptions o{6, 20, 0, 2, 4, 3};
  std::vector<int32_t> groups;
  auto reqs = make_prefix_repetition_dataset(o, vocab(), &groups);
  ASSERT_TRUE(reqs.ok());
  for (size_t i = 0; i < reqs->size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (groups[i] == groups[j]) {
        EXPECT_EQ((*reqs)[i].prompt_token_ids, (*reqs)[j].prompt_token_ids);
      }
}

TEST(BenchPrefixRepetition, BadOptionsNameTheFlag) {
  auto msg = [](PrefixRepetitionOptions o) {
    auto r = make_prefix_repetition_dataset(o, vocab());
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(msg({10, 1, 4, 2, 4, 0}),
            "--prefix-repetition-prefix-len must be >= 2 (BOS and at least one random token), got 1");
  EXPECT_EQ(msg({10, 8, -1, 2, 4, 0}), "--prefix-repetition-suffix-len must be >= 0, got -1");
  EXPECT_EQ(msg({10, 8, 4, 0, 4, 0}), "--prefix-repetition-num-prefixes must be >= 1, got 0");
  EXPECT_EQ(msg({3, 8, 4, 4, 4, 0}),
            "--prefix-repetition-num-prefixes 4 is more than --num-prompts 3 (every prefix needs "
            "a request)");
  EXPECT_EQ(msg({10, 8, 4, 2, 0, 0}), "--prefix-repetition-output-len must be >= 1, got 0");
  EXPECT_EQ(msg({0, 8, 4, 1, 4, 0}), "--num-prompts must be in [1, 10000000], got 0");
}

TEST(BenchMultiTurn, TurnsChainWithTheDocumentedLengths) {
  MultiTurnOptions o{3, 4, 10, 6, 5};
  auto reqs = make_multi_turn_workload(o, vocab(), /*as_text=*/false);
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  ASSERT_EQ(reqs->size(), 12u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < reqs->size(); ++i) {
    const BenchRequest& r = (*reqs)[i];
    EXPECT_EQ(r.conversation, static_cast<int32_t>(i / 4));
    EXPECT_EQ(r.turn, static_cast<int32_t>(i % 4));
    EXPECT_EQ(r.follows, r.turn == 0 ? -1 : static_cast<int64_t>(i) - 1);
    EXPECT_EQ(r.output_len, 6);
    EXPECT_EQ(r.arrival_offset_s, 0.0);
    // Own part: BOS + U ids at turn 0, U ids after; the full prompt adds the history.
    EXPECT_EQ(r.prompt_token_ids.size(), r.turn == 0 ? 11u : 10u);
    EXPECT_EQ(r.prompt_token_ids[0] == 1, r.turn == 0);
    EXPECT_EQ(r.prompt_len, 1 + (r.turn + 1) * 10 + r.turn * 6);
    EXPECT_EQ(multi_turn_prompt_len(o, r.turn, true), r.prompt_len);
    distinct.insert(r.prompt_token_ids);
  }
  EXPECT_EQ(distinct.size(), 12u);  // every turn's new tokens are its own
}

TEST(BenchMultiTurn, TextTurnsAreWords) {
  MultiTurnOptions o{2, 3, 12, 5, 1};
  auto reqs = make_multi_turn_workload(o, vocab(), /*as_text=*/true);
  ASSERT_TRUE(reqs.ok());
  for (const BenchRequest& r : *reqs) {
    EXPECT_TRUE(r.prompt_token_ids.empty());
    EXPECT_EQ(r.prompt_len, 0);  // the server reports it
    const std::string& t = r.prompt_text;
    ASSERT_FALSE(t.empty());
    EXPECT_EQ(t[0] == ' ', r.turn > 0);  // later turns continue the reply's text
    EXPECT_EQ(std::count(t.begin(), t.end(), ' '), r.turn > 0 ? 12 : 11) << t;
    for (char c : t) EXPECT_TRUE(c == ' ' || (c >= 'a' && c <= 'z')) << t;
  }
}

TEST(BenchMultiTurn, BadOptionsNameTheFlag) {
  auto msg = [](MultiTurnOptions o) {
    auto r = make_multi_turn_workload(o, vocab(), false);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(msg({0, 3, 8, 8, 0}), "--multi-turn-conversations must be in [1, 10000000], got 0");
  EXPECT_EQ(msg({2, 0, 8, 8, 0}), "--multi-turn-turns must be >= 1, got 0");
  EXPECT_EQ(msg({2, 3, 0, 8, 0}), "--multi-turn-new-tokens must be >= 1, got 0");
  EXPECT_EQ(msg({2, 3, 8, 0, 0}), "--output-len must be >= 1, got 0");
  EXPECT_EQ(msg({5000000, 3, 8, 8, 0}),
            "--multi-turn-conversations 5000000 x --multi-turn-turns 3 requests is more than "
            "10000000");
}

RequestRecord done(int32_t turn, double ttft_ms, int32_t prompt_len, int32_t cached) {
  RequestRecord r;
  r.turn = turn;
  r.success = true;
  r.prompt_len = prompt_len;
  r.cached_tokens = cached;
  r.output_tokens = 2;
  r.arrival_time = 10.0;
  r.token_times = {10.0 + ttft_ms / 1e3, 10.5};
  r.finished_time = 10.5;
  return r;
}

TEST(BenchMultiTurn, MetricsPerTurnAndPrefixCacheRows) {
  RunResult run;
  run.requests = {done(0, 40, 20, 0), done(0, 60, 20, 0), done(1, 10, 50, 32),
                  done(1, 30, 50, 16)};
  run.start_time = 10.0;
  run.end_time = 11.0;
  run.prefix_cache_queries = 140;
  run.prefix_cache_hits = 48;
  const BenchMetrics m = compute_metrics(run);
  ASSERT_EQ(m.turns.size(), 2u);
  EXPECT_EQ(m.turns[0].turn, 1);
  EXPECT_EQ(m.turns[0].completed, 2);
  EXPECT_NEAR(m.turns[0].ttft_ms.mean, 50.0, 1e-6);
  EXPECT_NEAR(m.turns[0].ttft_ms.median, 50.0, 1e-6);
  EXPECT_NEAR(m.turns[1].ttft_ms.mean, 20.0, 1e-6);
  EXPECT_DOUBLE_EQ(m.turns[1].mean_prompt_tokens, 50.0);
  EXPECT_DOUBLE_EQ(*m.turns[1].mean_cached_tokens, 24.0);
  EXPECT_EQ(m.prefix_cache_hits, 48);
  EXPECT_NEAR(*m.prefix_cache_hit_rate, 48.0 / 140.0, 1e-12);
  EXPECT_EQ(m.cached_prompt_tokens, 48);
  const nlohmann::json j = metrics_to_json(m);
  EXPECT_EQ(j["turns"].size(), 2u);
  EXPECT_EQ(j["turns"][1]["turn"], 2);
  EXPECT_EQ(j["prefix_cache_queries"], 140);
  const std::string table = format_metrics_table(m, "t");
  EXPECT_NE(table.find("Prefix cache hit rate:                   34.3%"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Turn 2 TTFT mean / median / P99 (ms):    20.00 / 20.00 / 29.80"),
            std::string::npos) << table;
  // Not multi-turn, nothing reported: n/a rows, null keys.
  RunResult plain;
  plain.in_process = false;
  plain.requests = {done(-1, 5, 3, -1)};
  plain.requests[0].turn = -1;
  const BenchMetrics p = compute_metrics(plain);
  EXPECT_TRUE(p.turns.empty());
  EXPECT_FALSE(p.prefix_cache_hit_rate.has_value());
  EXPECT_FALSE(p.cached_prompt_tokens.has_value());
  EXPECT_TRUE(metrics_to_json(p)["turns"].is_null());
  EXPECT_TRUE(metrics_to_json(p)["prefix_cache_hit_rate"].is_null());
  EXPECT_NE(format_metrics_table(p, "t").find("Prefix cache hit rate:                   n/a"),
            std::string::npos);
}

TEST(BenchServerMetrics, PrefixCacheCountersAreDeltas) {
  std::vector<MetricsScrape> scrapes(3);
  scrapes[0].samples = {{"vllm:prefix_cache_queries_total", 100}, {"vllm:prefix_cache_hits_total", 10},
                        {"llmserve:kv_blocks_cached", 0}};
  scrapes[1].samples = {{"llmserve:kv_blocks_cached", 7}};
  scrapes[2].samples = {{"vllm:prefix_cache_queries_total", 400}, {"vllm:prefix_cache_hits_total", 130},
                        {"llmserve:kv_blocks_cached", 5}};
  const ServerEngineMetrics m = summarize_scrapes(scrapes);
  EXPECT_EQ(m.prefix_cache_queries, 300);
  EXPECT_EQ(m.prefix_cache_hits, 120);
  EXPECT_EQ(m.peak_cached_blocks, 7);
  // llama-server: no such series, so n/a.
  std::vector<MetricsScrape> other(2);
  other[0].samples = other[1].samples = {{"llamacpp:prompt_tokens_total", 5}};
  const ServerEngineMetrics n = summarize_scrapes(other);
  EXPECT_FALSE(n.prefix_cache_queries.has_value());
  EXPECT_FALSE(n.peak_cached_blocks.has_value());
}

}  // namespace
}  // namespace llmserve::bench
