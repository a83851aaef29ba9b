// Batch invariance of the whole forward pass (docs/batch_invariance.md): one request run alone
// (its prompt in one prefill step, on one thread) and the same request among 100 others (two
// threads; different prompts and lengths, arriving at different steps; a small token budget
// that chunks its prompt at other places, one chunk a single token; a KV pool small enough
// that it is preempted and recomputed) must produce bitwise equal token ids, chosen-token
// logprobs and top logprobs. Greedy and seeded temperature-1 sampling; the model's own KV
// dtype and 16-bit KV caches; the real stories260K model, synthetic models (GQA, tied
// embeddings as lm_head with row-major weights, MLA) and llama-quantize's quantized files.
// The crowd runs twice: with prefix caching off (the chunk and preemption shapes above), and
// on, where a fifth of the others share a prefix of 1-4 blocks with the target, so it starts
// from cached blocks and its recompute after preemption hits its own: a cache hit must not
// change a single bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/llm_engine.h"

namespace llmserve {
namespace {

std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }

struct ModelCase {
  const char* name;
  std::string model_path;
  std::string tokenizer_path;  // llama2.c .bin models only
};

std::vector<ModelCase> models() {
  return {
      {"stories260K", shared("models/stories260K/stories260K.bin"),
       shared("models/stories260K/tok512.bin")},
      {"llama-gqa", shared("testdata/models/synthetic/llama-gqa/model.gguf"), ""},
      {"qwen2-tied", shared("testdata/models/synthetic/qwen2-gqa-bias/model.gguf"), ""},
      {"deepseek2-mla", shared("testdata/models/synthetic/deepseek2-mla/model.gguf"), ""},
      // llama-quantize's files: the quantized GEMM's one recipe per type (Q4_K + Q6_K + Q8_0
      // mixes; Q8_0's 32-element blocks) must keep a row's bits whatever M is.
      {"llama-q-Q4_K_M", shared("testdata/models/quantized/llama-q/model-Q4_K_M.gguf"), ""},
      {"llama-q-Q8_0", shared("testdata/models/quantized/llama-q/model-Q8_0.gguf"), ""},
  };
}

enum class Mode { kGreedy, kSeeded };

struct Result {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  int32_t prompt_steps = 0;  // steps that (re)computed known tokens (prompt chunks, recompute)
  int32_t min_chunk = 1 << 30;  // fewest known tokens computed in one of those steps
  int32_t preemptions = 0;
  int32_t cached_tokens = 0;     // the target's prefix hit at first admission
  int64_t cache_hits_total = 0;  // engine-wide prefix cache hits (tokens)
};

constexpr int64_t kTarget = 1000;
constexpr int32_t kVocab = 512;  // every model here has a 512-token vocabulary

std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t len) {
  std::uniform_int_distribution<int32_t> tok(3, kVocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = tok(rng);
  return p;
}

EngineRequest target_request(Mode mode) {
  std::mt19937 rng(7);
  EngineRequest r;
  r.prompt_token_ids = random_prompt(rng, 150);
  r.params.max_tokens = 40;
  r.params.ignore_eos = true;
  r.params.logprobs = 5;
  if (mode == Mode::kGreedy) {
    r.params.temperature = 0;
  } else {
    r.params.temperature = 1.0f;
    r.params.seed = 1234;
  }
  return r;
}

EngineConfig base_config(const ModelCase& m, std::optional<DType> kv_dtype) {
  EngineConfig c;
  c.model_path = m.model_path;
  c.tokenizer_path = m.tokenizer_path;
  c.num_threads = 2;
  c.cache.block_size = 16;
  c.cache.kv_cache_dtype = kv_dtype;
  c.scheduler.max_model_len = 512;
  c.scheduler.max_num_seqs = 128;
  c.scheduler.check_invariants = true;
  return c;
}

/// Steps `engine` until all requests finish, calling before_step(step) first each time;
/// collects the target's outputs.
template <class F>
Result run(LLMEngine& engine, F before_step) {
  Result r;
  for (int32_t step = 0; step < 100000; ++step) {
    before_step(step);
    if (!engine.has_unfinished_requests()) break;
    for (const RequestOutput& o : engine.step()) {
      if (o.request_id != kTarget) continue;
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      r.preemptions = o.num_preemptions;
      r.cached_tokens = o.num_cached_tokens;
    }
    for (const StepRecord::Entry& e : engine.last_step().scheduled) {
      if (e.request_id == kTarget && e.is_prefill) {
        ++r.prompt_steps;
        r.min_chunk = std::min(r.min_chunk, e.num_scheduled_tokens);
      }
    }
  }
  EXPECT_FALSE(engine.has_unfinished_requests()) << "engine does not converge";
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.num_free_blocks, s.num_total_blocks);
  r.cache_hits_total = s.prefix_cache_hits_total;
  return r;
}

Result run_alone(const ModelCase& m, Mode mode, std::optional<DType> kv_dtype) {
  EngineConfig c = base_config(m, kv_dtype);
  c.num_threads = 1;  // and on one thread (the crowd runs on two): no thread-count effect
  c.scheduler.max_num_batched_tokens = 512;  // the whole prompt in one step
  c.cache.num_kv_blocks = 16;                // 256 tokens: never preempted
  auto engine = LLMEngine::create(c);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  EXPECT_TRUE((*engine)->add_request(kTarget, target_request(mode)).ok());
  return run(**engine, [](int32_t) {});
}

Result run_in_crowd(const ModelCase& m, Mode mode, std::optional<DType> kv_dtype,
                    bool prefix_caching) {
  EngineConfig c = base_config(m, kv_dtype);
  c.cache.enable_prefix_caching = prefix_caching;
  // A 40-token budget shared with up to ~40 decodes chunks the 150-token prompt at odd
  // places (one chunk is a single token: the decode shape); 25 blocks (400 tokens) for ~100
  // requests preempt the target, whose prompt and first tokens are then recomputed.
  c.scheduler.max_num_batched_tokens = 40;
  c.cache.num_kv_blocks = 25;
  // Shared prefixes need fewer blocks: a smaller pool still preempts the target.
  if (prefix_caching) c.cache.num_kv_blocks = 18;
  auto engine = LLMEngine::create(c);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  LLMEngine& e = **engine;
  std::mt19937 rng(99);
  std::vector<EngineRequest> others;
  for (int i = 0; i < 100; ++i) {
    EngineRequest r;
    r.prompt_token_ids = random_prompt(rng, 5 + static_cast<int32_t>(rng() % 120));
    if (prefix_caching && i % 5 == 0) {  // the target's first 1..4 blocks, then its own tokens
      const auto target = target_request(mode).prompt_token_ids;
      const size_t shared = 16 * (1 + (i / 5) % 4);
      r.prompt_token_ids.insert(r.prompt_token_ids.begin(), target.begin(), target.begin() + shared);
    }
    r.params.max_tokens = 5 + static_cast<int32_t>(rng() % 36);
    r.params.ignore_eos = true;
    r.params.logprobs = static_cast<int32_t>(rng() % 3) - 1;  // -1 (off), 0 or 1
    if (i % 2 == 0) {
      r.params.temperature = 0;
    } else {
      r.params.temperature = 0.7f;
      r.params.seed = static_cast<uint64_t>(i);
    }
    others.push_back(std::move(r));
  }
  // 40 others first, then the other 60 five per step from step 3; the target at step 18,
  // behind most of them (so it is the one preempted when the pool runs out).
  constexpr int32_t kTargetStep = 18;
  size_t next = 0;
  auto add_others = [&](size_t n) {
    for (; n > 0 && next < others.size(); --n, ++next) {
      EXPECT_TRUE(e.add_request(static_cast<int64_t>(next), others[next]).ok());
    }
  };
  add_others(40);
  return run(e, [&](int32_t step) {
    if (step == kTargetStep) {
      EXPECT_TRUE(e.add_request(kTarget, target_request(mode)).ok());
    }
    if (step >= 3) add_others(5);
  });
}

void expect_bitwise_equal(const Result& alone, const Result& crowd, bool prefix_caching,
                          const std::string& what) {
  ASSERT_EQ(alone.tokens.size(), 40u) << what;
  EXPECT_EQ(alone.prompt_steps, 1) << what;
  // The crowd run must exercise what it is meant to: chunks, a 1-token chunk, recompute; with
  // caching, a prefix hit for the target and hits in the crowd.
  EXPECT_GE(crowd.preemptions, 1) << what << ": the target was never preempted";
  if (prefix_caching) {
    EXPECT_GE(crowd.cached_tokens, 16) << what << ": the target's prompt never hit the cache";
    EXPECT_GT(crowd.cache_hits_total, crowd.cached_tokens) << what;
  } else {
    EXPECT_GE(crowd.prompt_steps, 3) << what << ": the prompt was not chunked";
    EXPECT_EQ(crowd.min_chunk, 1) << what << ": no single-token chunk";
    EXPECT_EQ(crowd.cache_hits_total, 0) << what;
  }
  EXPECT_EQ(crowd.tokens, alone.tokens) << what;
  ASSERT_EQ(crowd.logprobs.size(), alone.logprobs.size()) << what;
  for (size_t i = 0; i < alone.logprobs.size(); ++i) {
    const TokenLogprobs& a = alone.logprobs[i];
    const TokenLogprobs& b = crowd.logprobs[i];
    EXPECT_EQ(b.logprob, a.logprob) << what << " token " << i;
    ASSERT_EQ(b.top.size(), a.top.size()) << what << " token " << i;
    for (size_t j = 0; j < a.top.size(); ++j) {
      EXPECT_EQ(b.top[j].first, a.top[j].first) << what << " token " << i << " top " << j;
      EXPECT_EQ(b.top[j].second, a.top[j].second) << what << " token " << i << " top " << j;
    }
  }
}

struct Param {
  Mode mode;
  std::optional<DType> kv_dtype;
  const char* label;
};

class BatchInvariance : public ::testing::TestWithParam<Param> {};

TEST_P(BatchInvariance, SameBitsAloneAndAmongHundredOthers) {
  for (const ModelCase& m : models()) {
    // 16-bit KV caches: the real model and one synthetic model keep the test short.
    if (GetParam().kv_dtype.has_value() && m.name != std::string("stories260K") &&
        m.name != std::string("deepseek2-mla")) {
      continue;
    }
    const Result alone = run_alone(m, GetParam().mode, GetParam().kv_dtype);
    for (bool caching : {false, true}) {
      const Result crowd = run_in_crowd(m, GetParam().mode, GetParam().kv_dtype, caching);
      expect_bitwise_equal(alone, crowd, caching,
                           std::string(m.name) + " " + GetParam().label +
                               (caching ? " prefix caching" : ""));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BatchInvariance,
    ::testing::Values(Param{Mode::kGreedy, std::nullopt, "greedy"},
                      Param{Mode::kSeeded, std::nullopt, "seeded"},
                      Param{Mode::kGreedy, DType::kBF16, "greedy_kv_bf16"},
                      Param{Mode::kSeeded, DType::kF16, "seeded_kv_f16"}),
    [](const ::testing::TestParamInfo<Param>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace llmserve
