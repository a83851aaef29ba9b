// Sliding-window attention through the engine (scheduler + paged KV cache): a sequence longer
// than the window keeps only the blocks its next queries can see (KVCacheManager::
// free_blocks_before), so a 40-token-window model generates far past what its KV pool could
// hold without freeing; every step's invariants hold (scheduler check_invariants: no block
// wholly before the window is held, every block in it is), a decoding sequence holds at most
// ceil(window / block_size) + 1 blocks, and the greedy tokens are exactly the argmax of the
// logits computed without any freeing (runner/prompt_logits: one table for every position),
// with prefix caching on and off, through chunked prefill and preemption.
// Model: tests/models/data/mistral-swa-tiny (MistralForCausalLM, window 40 in both layers;
// NumPy reference logits beside it, checked in tests/models/test_sliding_window_models.cc).
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

const std::string kModel = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/mistral-swa-tiny/model.gguf";

struct EngineRun {
  std::vector<std::vector<int32_t>> outputs;  // per request
  int32_t max_used_while_decoding = 0;        // blocks in use during single-token steps
  int64_t preemptions = 0;
};

/// Runs `n` greedy requests of `prompt_len` tokens of `long` (request r starts at token r)
/// generating `gen` tokens each, in a pool of `blocks` blocks of 16.
EngineRun run_engine(int32_t n, int32_t prompt_len, int32_t gen, int32_t blocks, bool prefix_caching, int32_t batched) {
  EngineConfig c;
  c.model_path = kModel;
  c.num_threads = 2;
  c.cache.block_size = 16;
  c.cache.num_kv_blocks = blocks;
  c.cache.enable_prefix_caching = prefix_caching;
  c.cache.kv_cache_dtype = DType::kF32;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = batched;
  c.scheduler.max_model_len = 512;
  c.scheduler.check_invariants = true;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  EngineRun run;
  if (!e.ok()) return run;
  const auto ids = long_sequence();
  run.outputs.resize(n);
  for (int32_t r = 0; r < n; ++r) {
    EngineRequest req;
    req.prompt_token_ids.assign(ids.begin() + r, ids.begin() + r + prompt_len);
    req.params.temperature = 0;
    req.params.max_tokens = gen;
    req.params.ignore_eos = true;
    EXPECT_TRUE((*e)->add_request(r, std::move(req)).ok());
  }
  while ((*e)->has_unfinished_requests()) {
    for (const RequestOutput& o : (*e)->step())
      run.outputs[o.request_id].insert(run.outputs[o.request_id].end(), o.new_token_ids.begin(),
                                       o.new_token_ids.end());
    const StepRecord& s = (*e)->last_step();
    const auto st = (*e)->stats();
    if (s.num_prefill_tokens == 0 && st.num_running > 0)
      run.max_used_while_decoding =
          std::max(run.max_used_while_decoding, (st.num_total_blocks - st.num_free_blocks) / st.num_running);
  }
  run.preemptions = (*e)->stats().num_preemptions_total;
  return run;
}

TEST(SlidingWindow, GeneratesPastThePoolWithWindowSizedKv) {
  // 100 prompt + 120 generated = 220 tokens = 14 blocks; the pool has 8 (128 tokens), enough for
  // a 64-token prefill chunk and its 40-token window (ceil(103 / 16) + 1 = 8).
  const EngineRun run = run_engine(1, 100, 120, 8, /*prefix_caching=*/false, 64);
  ASSERT_EQ(run.outputs[0].size(), 120u);
  std::printf("blocks held while decoding <= %d\n", run.max_used_while_decoding);
  EXPECT_LE(run.max_used_while_decoding, (40 + 15) / 16 + 1);  // ceil(40 / 16) + 1 = 4
  EXPECT_GT(run.max_used_while_decoding, 0);
  const auto ids = long_sequence();
  expect_greedy_matches_reference(kModel, {ids.begin(), ids.begin() + 100}, run.outputs[0]);
}

TEST(SlidingWindow, ChunkedPrefillPrefixCachingAndPreemption) {
  // Four sequences sharing most of their prompts, 24-token steps (chunked prefill), a pool
  // too small for all four at once (preemption), prefix caching on and off: the same tokens.
  for (bool caching : {false, true}) {
    SCOPED_TRACE(caching ? "prefix caching" : "no prefix caching");
    const EngineRun run = run_engine(4, 90, 40, 12, caching, 24);
    std::printf("preemptions %lld, blocks per decoding sequence <= %d\n", static_cast<long long>(run.preemptions),
                run.max_used_while_decoding);
    EXPECT_GT(run.preemptions, 0);
    const auto ids = long_sequence();
    for (int32_t r = 0; r < 4; ++r) {
      ASSERT_EQ(run.outputs[r].size(), 40u) << r;
      expect_greedy_matches_reference(kModel, {ids.begin() + r, ids.begin() + r + 90}, run.outputs[r]);
    }
  }
}

// A pool that cannot hold the window plus one step is refused at admission, naming both ways
// out, instead of preempting forever.
TEST(SlidingWindow, RequestsThatCannotFitTheWindowAreRefused) {
  EngineConfig c;
  c.model_path = kModel;
  c.num_threads = 1;
  c.cache.block_size = 16;
  c.cache.num_kv_blocks = 5;  // 80 tokens: less than 40 + a 512-token step, and than 100 + 50
  c.scheduler.max_model_len = 512;
  auto e = LLMEngine::create(c);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const auto ids = long_sequence();
  EngineRequest req;
  req.prompt_token_ids.assign(ids.begin(), ids.begin() + 100);
  req.params.max_tokens = 50;
  const Status st = (*e)->add_request(1, std::move(req));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sliding window"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--max-num-batched-tokens"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace llmserve
