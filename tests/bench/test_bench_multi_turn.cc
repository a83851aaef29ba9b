// Prefix caching under the in-process bench on stories260K: multi-turn prompts extend the
// previous turn exactly, the hit rate is > 0 with caching and exactly 0 without, per-turn
// TTFT is reported; the block map replay agrees with the engine's step records (also through
// preemptions) and shows shared blocks; the timeline marks the hits.
#include <gtest/gtest.h>

#include "bench/block_map.h"
#include "bench/metrics.h"
#include "bench/multi_turn.h"
#include "bench/prefix_repetition.h"
#include "bench/runner.h"
#include "bench/timeline_svg.h"
#include "engine/llm_engine.h"
#include "xml_check.h"

namespace llmserve::bench {
namespace {

std::unique_ptr<LLMEngine> stories_engine(bool prefix_caching, int32_t num_kv_blocks = 0,
                                          int32_t max_num_batched_tokens = 512) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  c.model_path = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.scheduler.max_model_len = 512;
  c.scheduler.check_invariants = true;
  c.cache.enable_prefix_caching = prefix_caching;
  if (num_kv_blocks > 0) c.cache.num_kv_blocks = num_kv_blocks;
  c.num_threads = 1;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

constexpr MultiTurnOptions kTurns{4, 3, 24, 16, 7};  // 4 conversations x 3 turns

RunResult run_multi_turn(bool prefix_caching, std::vector<BenchRequest>* reqs_out = nullptr) {
  auto engine = stories_engine(prefix_caching);
  if (!engine) return {};
  auto reqs = make_multi_turn_workload(kTurns, vocab_info(engine->tokenizer()), false);
  EXPECT_TRUE(reqs.ok()) << reqs.status().message();
  auto run = run_in_process(*engine, *reqs, {});
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (reqs_out) *reqs_out = *reqs;
  return run.ok() ? std::move(run).value() : RunResult{};
}

TEST(BenchMultiTurnEngine, TurnsExtendTheConversationAndHitTheCache) {
  std::vector<BenchRequest> reqs;
  const RunResult run = run_multi_turn(true, &reqs);
  ASSERT_EQ(run.requests.size(), 12u);
  for (size_t i = 0; i < run.requests.size(); ++i) {
    const RequestRecord& r = run.requests[i];
    ASSERT_TRUE(r.success) << i;
    EXPECT_EQ(r.turn, reqs[i].turn);
    EXPECT_EQ(r.output_token_ids.size(), 16u) << i;
    EXPECT_EQ(r.prompt_len, multi_turn_prompt_len(kTurns, r.turn, true)) << i;
    if (r.turn == 0) {
      EXPECT_EQ(r.prompt_token_ids, reqs[i].prompt_token_ids);
      EXPECT_EQ(r.cached_tokens, 0) << i;  // random first turns share no full block
      continue;
    }
    // Exactly: the previous turn's prompt, its generated ids, this turn's new ids.
    const RequestRecord& prev = run.requests[i - 1];
    std::vector<int32_t> want = prev.prompt_token_ids;
    want.insert(want.end(), prev.output_token_ids.begin(), prev.output_token_ids.end());
    want.insert(want.end(), reqs[i].prompt_token_ids.begin(), reqs[i].prompt_token_ids.end());
    EXPECT_EQ(r.prompt_token_ids, want) << i;
    // The previous turn's computed full blocks (all its tokens but the last output) come
    // from the cache: whole 16-token blocks.
    EXPECT_EQ(r.cached_tokens, (prev.prompt_len + 15) / 16 * 16) << i;
    // Sent once the previous reply had finished.
    EXPECT_GE(r.arrival_time, prev.finished_time) << i;
  }
  const BenchMetrics m = compute_metrics(run);
  ASSERT_TRUE(m.prefix_cache_hit_rate.has_value());
  EXPECT_GT(*m.prefix_cache_hit_rate, 0.0);
  EXPECT_LT(*m.prefix_cache_hit_rate, 1.0);
  EXPECT_EQ(m.prefix_cache_hits, m.cached_prompt_tokens);  // no preemption: one lookup each
  EXPECT_GT(*m.prefix_cache_queries, *m.prefix_cache_hits);
  EXPECT_GT(m.peak_cached_blocks.value_or(0), 0);
  ASSERT_EQ(m.turns.size(), 3u);
  for (const TurnMetrics& t : m.turns) {
    EXPECT_EQ(t.completed, 4);
    EXPECT_GT(t.ttft_ms.median, 0.0);
    EXPECT_GT(t.ttft_ms.mean, 0.0);
  }
  EXPECT_DOUBLE_EQ(*m.turns[0].mean_cached_tokens, 0.0);
  EXPECT_GT(*m.turns[2].mean_cached_tokens, *m.turns[1].mean_cached_tokens);
}

TEST(BenchMultiTurnEngine, NoPrefixCachingMeansNoHits) {
  const RunResult run = run_multi_turn(false);
  ASSERT_EQ(run.requests.size(), 12u);
  const BenchMetrics m = compute_metrics(run);
  EXPECT_EQ(m.prefix_cache_hit_rate, 0.0);
  EXPECT_EQ(m.prefix_cache_hits, 0);
  EXPECT_EQ(m.cached_prompt_tokens, 0);
  EXPECT_EQ(m.peak_cached_blocks, 0);
  ASSERT_EQ(m.turns.size(), 3u);
  for (const RequestRecord& r : run.requests) EXPECT_EQ(r.cached_tokens, 0);
}

TEST(BenchMultiTurnEngine, TooLongConversationFailsBeforeTheClockStarts) {
  auto engine = stories_engine(true);
  ASSERT_NE(engine, nullptr);
  // Turn 3: 1 + 3 x 150 + 2 x 40 = 531 prompt tokens > max_model_len 512.
  auto reqs = make_multi_turn_workload({2, 3, 150, 40, 0}, vocab_info(engine->tokenizer()), false);
  ASSERT_TRUE(reqs.ok());
  auto run = run_in_process(*engine, *reqs, {});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("request 2 (prompt 531 tokens at turn 3, output 40 tokens)"),
            std::string::npos) << run.status().message();
  EXPECT_FALSE(engine->has_unfinished_requests());
}

/// Cells of the block map in each state over the whole run.
struct MapCounts {
  int64_t held = 0, shared = 0, cached = 0;
};
MapCounts count_cells(const BlockMap& map) {
  MapCounts c;
  for (int16_t v : map.state) {
    if (v == 1) ++c.held;
    if (v > 1) ++c.shared;
    if (v < 0) ++c.cached;
  }
  return c;
}

TEST(BenchBlockMap, ReplayAgreesWithTheEngineAndShowsSharing) {
  // Shared prefixes arriving together, admitted about one per step (64-token budget): a
  // group's later requests find its prefix cached while the earlier ones still decode.
  auto engine = stories_engine(true, 0, 64);
  ASSERT_NE(engine, nullptr);
  auto reqs = make_prefix_repetition_dataset({12, 48, 8, 3, 8, 2}, vocab_info(engine->tokenizer()));
  ASSERT_TRUE(reqs.ok());
  auto run = run_in_process(*engine, *reqs, {});
  ASSERT_TRUE(run.ok()) << run.status().message();
  const BlockMap map = replay_block_map(*run);
  ASSERT_TRUE(map.available) << map.note;
  EXPECT_EQ(map.num_steps, static_cast<int64_t>(run->steps.size()));
  EXPECT_GE(map.peak_sharing, 2);
  const MapCounts c = count_cells(map);
  EXPECT_GT(c.shared, 0);
  EXPECT_GT(c.cached, 0);  // after the last request of a group finished
  // Each step's used / cached counts are the engine's (the replay checks them; here again
  // from the drawn rows, which hold every block this small run touched).
  ASSERT_EQ(map.num_rows, map.num_touched_blocks);
  for (int64_t s = 0; s < map.num_steps; ++s) {
    int32_t used = 0, cached = 0;
    for (int32_t b = 0; b < map.num_rows; ++b) {
      used += map.at(s, b) > 0;
      cached += map.at(s, b) < 0;
    }
    EXPECT_EQ(used, run->steps[static_cast<size_t>(s)].num_used_blocks) << s;
    EXPECT_EQ(cached, run->steps[static_cast<size_t>(s)].num_cached_blocks) << s;
  }
  // Admission hits: the engine's per-step totals and the requests' first admissions.
  int64_t hit_total = 0;
  for (const AdmissionHit& h : map.hits) hit_total += h.tokens;
  EXPECT_EQ(hit_total, *run->prefix_cache_hits);
  EXPECT_GT(hit_total, 0);
}

TEST(BenchBlockMap, ReplayFollowsPreemptionsAndCachingOff) {
  // 8 blocks (128 tokens) for 6 requests of up to 3 blocks each: decodes preempt.
  for (bool caching : {true, false}) {
    auto engine = stories_engine(caching, 8);
    ASSERT_NE(engine, nullptr);
    auto reqs = make_prefix_repetition_dataset({6, 18, 6, 2, 16, 4}, vocab_info(engine->tokenizer()));
    ASSERT_TRUE(reqs.ok());
    auto run = run_in_process(*engine, *reqs, {});
    ASSERT_TRUE(run.ok()) << run.status().message();
    ASSERT_GT(*compute_metrics(*run).num_preemptions, 0) << caching;
    const BlockMap map = replay_block_map(*run);
    ASSERT_TRUE(map.available) << caching << ": " << map.note;
    EXPECT_EQ(map.num_rows, 8);
    const MapCounts c = count_cells(map);
    EXPECT_GT(c.held, 0);
    if (!caching) {
      EXPECT_EQ(map.peak_sharing, 1);
      EXPECT_EQ(c.shared + c.cached, 0);
      EXPECT_TRUE(map.hits.empty());
    }
  }
}

TEST(BenchBlockMap, ReplayFollowsEveryBatchingMode) {
  // The scheduler's other orders: static batches, and whole prefills first (admissions before
  // decodes), each with preemptions in a 12-block pool.
  for (int mode = 0; mode < 2; ++mode) {
    EngineConfig c;
    c.model_path = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
    c.scheduler.max_model_len = 512;
    c.scheduler.check_invariants = true;
    c.scheduler.max_num_seqs = 6;
    c.cache.num_kv_blocks = 12;
    c.num_threads = 1;
    if (mode == 0) c.scheduler.batching = BatchingMode::kStatic;
    else c.scheduler.enable_chunked_prefill = false;
    auto engine = LLMEngine::create(c);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    auto reqs = make_multi_turn_workload({4, 2, 20, 20, 3}, vocab_info((*engine)->tokenizer()), false);
    ASSERT_TRUE(reqs.ok());
    auto run = run_in_process(**engine, *reqs, {});
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_GT(*compute_metrics(*run).num_preemptions, 0) << mode;
    const BlockMap map = replay_block_map(*run);
    EXPECT_TRUE(map.available) << mode << ": " << map.note;
  }
}

TEST(BenchBlockMap, TimelineMarksHitsAndDrawsTheMap) {
  const RunResult run = run_multi_turn(true);
  ASSERT_FALSE(run.steps.empty());
  const std::string svg = render_timeline_svg(run, "multi-turn");
  EXPECT_EQ(testing::xml_error(svg), "");
  // Turns 2 and 3 of 4 conversations start from cached blocks.
  size_t hits = 0;
  for (size_t p = svg.find("class=\"cache-hit\""); p != std::string::npos;
       p = svg.find("class=\"cache-hit\"", p + 1))
    ++hits;
  EXPECT_EQ(hits, 8u);
  EXPECT_NE(svg.find("prompt tokens from the prefix cache"), std::string::npos);
  EXPECT_NE(svg.find("<g class=\"block-map\">"), std::string::npos);
  EXPECT_NE(svg.find("cached (held by none, K/V kept, evictable)"), std::string::npos);
  EXPECT_NE(svg.find("KV blocks: held by sequences"), std::string::npos);
  EXPECT_EQ(svg.find("block map not drawn"), std::string::npos);
}

}  // namespace
}  // namespace llmserve::bench
