// Hybrid KV cache (SchedulerConfig::hybrid_kv; vLLM's hybrid KV cache manager with one group per
// attention type): a model mixing full-attention and sliding-window layers keeps the sliding
// layers' K/V in a pool of their own, each sequence with a second block table whose blocks
// before the window return to that pool, while the full-attention layers keep every block.
// Checked on tests/models/data/gemma2-tiny (window 40 in layers 0 and 2 of 4) and gemma3-tiny
// (window 16 in layers 0-4 of 6; NumPy references beside them, tests/models/test_gemma.cc):
// every step's invariants (both pools' reference counts, no sliding block before the window
// held, every full block held), a decoding sequence holds at most ceil(window / block_size) + 1
// sliding blocks, the sliding pool is sized to the windows (smaller than the full pool), and
// the greedy tokens are exactly the argmax of the logits computed with one pool and no freeing,
// with prefix caching on and off, chunked prefill and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/llm_engine.h"
#include "runner/prompt_logits.h"
#include "windowed_test_util.h"

namespace llmserve {
namespace {

using testing::expect_greedy_matches_reference;
using testing::long_sequence;

const std::string kData = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/";

struct EngineRun {
  std::vector<std::vector<int32_t>> outputs;
  int32_t max_sliding_per_decoding_seq = 0;
  int32_t sliding_total = 0, full_total = 0;
  int64_t preemptions = 0, prefix_hits = 0;
};

/// `n` greedy requests of `prompt_len` tokens of `long` (request r starts at token 2r),
/// `gen` tokens each, blocks of 16, `blocks` full-attention blocks (0 = sized by memory).
EngineRun run_engine(const std::string& model, int32_t n, int32_t prompt_len, int32_t gen, int32_t blocks,
               bool prefix_caching, int32_t batched) {
  EngineConfig c;
  c.model_path = model;
  c.num_threads = 2;
  c.cache.block_size = 16;
  c.cache.num_kv_blocks = blocks;
  c.cache.kv_cache_memory_bytes = 4 << 20;
  c.cache.enable_prefix_caching = prefix_caching;
  c.cache.kv_cache_dtype = DType::kF32;
  c.scheduler.max_num_seqs = 4;
  c.scheduler.max_num_batched_tokens = batched;
  c.scheduler.max_model_len = 512;
  c.scheduler.check_invariants = true;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  EngineRun run;
  if (!e.ok()) return run;
  EXPECT_TRUE((*e)->config().scheduler.hybrid_kv);
  const auto ids = long_sequence();
  run.outputs.resize(n);
  for (int32_t r = 0; r < n; ++r) {
    EngineRequest req;
    req.prompt_token_ids.assign(ids.begin() + 2 * r, ids.begin() + 2 * r + prompt_len);
    req.params.temperature = 0;
    req.params.max_tokens = gen;
    req.params.ignore_eos = true;
    EXPECT_TRUE((*e)->add_request(r, std::move(req)).ok());
  }
  while ((*e)->has_unfinished_requests()) {
    for (const RequestOutput& o : (*e)->step())
      run.outputs[o.request_id].insert(run.outputs[o.request_id].end(), o.new_token_ids.begin(),
                                       o.new_token_ids.end());
    const auto st = (*e)->stats();
    if ((*e)->last_step().num_prefill_tokens == 0 && st.num_running > 0)
      run.max_sliding_per_decoding_seq =
          std::max(run.max_sliding_per_decoding_seq,
                   (st.num_sliding_total_blocks - st.num_sliding_free_blocks) / st.num_running);
  }
  const auto st = (*e)->stats();
  run.sliding_total = st.num_sliding_total_blocks;
  run.full_total = st.num_total_blocks;
  run.preemptions = st.num_preemptions_total;
  run.prefix_hits = st.prefix_cache_hits_total;
  return run;
}

struct Model {
  const char* path;
  int32_t window;
};
constexpr Model kModels[] = {{"gemma2-tiny/model.gguf", 40}, {"gemma3-tiny/model.gguf", 16}};

TEST(HybridKv, SlidingLayersHoldWindowSizedKv) {
  const auto ids = long_sequence();
  for (const Model& m : kModels) {
    const std::string path = kData + m.path;
    // 90 prompt + 60 generated tokens, one at a time after a 24-token-chunked prefill.
    const EngineRun run = run_engine(path, 1, 90, 60, 0, false, 24);
    ASSERT_EQ(run.outputs[0].size(), 60u) << m.path;
    std::printf("%s: sliding pool %d blocks, full pool %d; sliding blocks per decoding sequence <= %d\n", m.path,
                run.sliding_total, run.full_total, run.max_sliding_per_decoding_seq);
    EXPECT_LE(run.max_sliding_per_decoding_seq, (m.window + 15) / 16 + 1) << m.path;
    EXPECT_GT(run.max_sliding_per_decoding_seq, 0) << m.path;
    EXPECT_LT(run.sliding_total, run.full_total) << m.path;  // the budget went to the full layers
    expect_greedy_matches_reference(path, {ids.begin(), ids.begin() + 90}, run.outputs[0]);
  }
}

TEST(HybridKv, ChunkedPrefillPrefixCachingAndPreemption) {
  // Four sequences sharing most of their prompts, 24-token steps, 12 full-attention blocks (too
  // few for all four at once: preemption), prefix caching on and off: the reference tokens.
  const auto ids = long_sequence();
  for (const Model& m : kModels) {
    const std::string path = kData + m.path;
    for (bool caching : {false, true}) {
      SCOPED_TRACE(std::string(m.path) + (caching ? " prefix caching" : " no prefix caching"));
      const EngineRun run = run_engine(path, 4, 90, 40, 12, caching, 24);
      std::printf("%s caching %d: preemptions %lld, prefix hits %lld tokens\n", m.path, caching,
                  static_cast<long long>(run.preemptions), static_cast<long long>(run.prefix_hits));
      EXPECT_GT(run.preemptions, 0);
      for (int32_t r = 0; r < 4; ++r) {
        ASSERT_EQ(run.outputs[r].size(), 40u) << r;
        expect_greedy_matches_reference(path, {ids.begin() + 2 * r, ids.begin() + 2 * r + 90}, run.outputs[r]);
      }
    }
  }
}

// A repeated prompt longer than the sliding pool still hits: the sliding layers need only the
// last window's blocks cached (the first ones, freed first, are evicted first). The engine runs
// one request at a time with the smallest pools the sizing gives (max_num_seqs 1).
TEST(HybridKv, RepeatedLongPromptHitsWithASmallSlidingPool) {
  const auto ids = long_sequence();
  for (const char* m : {"gemma3-tiny/model.gguf", "gemma2-tiny/model.gguf", "mistral-swa-tiny/model.gguf"}) {
    EngineConfig c;
    c.model_path = kData + m;
    c.num_threads = 2;
    c.cache.block_size = 16;
    c.cache.kv_cache_memory_bytes = 4 << 20;
    c.cache.num_kv_blocks = std::string(m).find("mistral") != std::string::npos ? 8 : 0;  // all-sliding: a small pool
    c.cache.enable_prefix_caching = true;
    c.cache.kv_cache_dtype = DType::kF32;
    c.scheduler.max_num_seqs = 1;
    c.scheduler.max_num_batched_tokens = 32;
    c.scheduler.max_model_len = 512;
    c.scheduler.check_invariants = true;
    auto e = LLMEngine::create(c);
    ASSERT_TRUE(e.ok()) << e.status().message();
    std::vector<int32_t> first, second;
    for (int32_t round = 0; round < 2; ++round) {
      EngineRequest req;
      req.prompt_token_ids.assign(ids.begin(), ids.begin() + 150);
      req.params.temperature = 0;
      req.params.max_tokens = 8;
      req.params.ignore_eos = true;
      ASSERT_TRUE((*e)->add_request(round, std::move(req)).ok());
      const int64_t hits_before = (*e)->stats().prefix_cache_hits_total;
      while ((*e)->has_unfinished_requests())
        for (const RequestOutput& o : (*e)->step())
          (round == 0 ? first : second).insert((round == 0 ? first : second).end(), o.new_token_ids.begin(),
                                               o.new_token_ids.end());
      const int64_t hit = (*e)->stats().prefix_cache_hits_total - hits_before;
      std::printf("%s round %d: %lld prompt tokens from the cache (sliding pool %d blocks)\n", m, round,
                  static_cast<long long>(hit), (*e)->stats().num_sliding_total_blocks);
      if (round == 1) EXPECT_EQ(hit, 144) << m;  // (150 - 1) / 16 whole blocks
    }
    EXPECT_EQ(first, second) << m;
    expect_greedy_matches_reference(kData + m, {ids.begin(), ids.begin() + 150}, second);
  }
}

}  // namespace
}  // namespace llmserve
