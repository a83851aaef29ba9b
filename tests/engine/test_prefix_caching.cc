// Automatic prefix caching through the engine (issue 15's checks): a request whose prefix
// comes from the cache produces exactly the tokens and logprobs it produces with caching off
// (batch-invariant kernels: a cached block holds the bits a fresh computation would);
// hits across requests and across conversation turns, preemption's recompute hitting the
// request's own blocks, an abort mid-prefill indexing only the blocks it finished,
// cache_salt separation, stop strings and same-prompt samples, prompt logprobs computing every
// position, LRU eviction from a sequence's tail, MLA. Every run checks the scheduler's
// invariants each step (ref counts = block tables holding each block, free / cached / used
// partition the pool) and ends with no block used.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/llm_engine.h"

namespace llmserve {
namespace {

std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }

struct ModelCase {
  std::string model_path, tokenizer_path;
};
const ModelCase kStories{shared("models/stories260K/stories260K.bin"),
                         shared("models/stories260K/tok512.bin")};
const ModelCase kGqa{shared("testdata/models/synthetic/llama-gqa/model.gguf"), ""};
const ModelCase kMla{shared("testdata/models/synthetic/deepseek2-mla/model.gguf"), ""};

EngineConfig make_config(const ModelCase& m, bool caching, int32_t num_blocks = 64,
                         int32_t budget = 2048) {
  EngineConfig c;
  c.model_path = m.model_path;
  c.tokenizer_path = m.tokenizer_path;
  c.num_threads = 2;
  c.cache.block_size = 16;
  c.cache.num_kv_blocks = num_blocks;
  c.cache.enable_prefix_caching = caching;
  c.scheduler.max_model_len = 512;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.check_invariants = true;
  return c;
}

std::vector<int32_t> random_prompt(uint32_t seed, int32_t len) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = 3 + static_cast<int32_t>(rng() % 500);
  return p;
}

EngineRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens, std::string salt = "") {
  EngineRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.temperature = 0;
  r.params.logprobs = 3;
  r.cache_salt = std::move(salt);
  return r;
}

struct Out {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::vector<TokenLogprobs> prompt_logprobs;
  std::string text;
  int32_t cached_tokens = -1;
  FinishReason finish = FinishReason::kNone;
};

/// Collects one step's outputs into `outs`.
void collect(const std::vector<RequestOutput>& step, std::map<int64_t, Out>& outs) {
  for (const RequestOutput& o : step) {
    Out& r = outs[o.request_id];
    r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    r.prompt_logprobs.insert(r.prompt_logprobs.end(), o.prompt_logprobs.begin(),
                             o.prompt_logprobs.end());
    r.text += o.new_text;
    r.cached_tokens = o.num_cached_tokens;
    if (o.finished) r.finish = o.finish_reason;
  }
}

/// Runs until idle; each entry of `script` (by step index) adds requests first.
std::map<int64_t, Out> run(LLMEngine& e,
                           const std::function<void(int32_t step, LLMEngine&)>& script) {
  std::map<int64_t, Out> outs;
  for (int32_t step = 0; step < 100000; ++step) {
    script(step, e);
    if (!e.has_unfinished_requests()) break;
    collect(e.step(), outs);
  }
  EXPECT_FALSE(e.has_unfinished_requests());
  const EngineStats s = e.stats();
  EXPECT_EQ(s.num_free_blocks, s.num_total_blocks) << "blocks still used after the run";
  return outs;
}

std::unique_ptr<LLMEngine> engine(const EngineConfig& c) {
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

/// Runs `requests` one after the other (each added once the previous finished).
std::vector<Out> sequential(const EngineConfig& c, const std::vector<EngineRequest>& requests,
                            EngineStats* stats = nullptr) {
  auto e = engine(c);
  if (!e) return {};
  std::vector<Out> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(e->add_request(static_cast<int64_t>(i), requests[i]).ok());
    auto outs = run(*e, [](int32_t, LLMEngine&) {});
    out.push_back(outs[static_cast<int64_t>(i)]);
  }
  if (stats) *stats = e->stats();
  return out;
}

void expect_same_bits(const Out& a, const Out& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.text, b.text) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(a.logprobs[i].logprob, b.logprobs[i].logprob) << what << " token " << i;
    ASSERT_EQ(a.logprobs[i].top.size(), b.logprobs[i].top.size()) << what;
    for (size_t j = 0; j < a.logprobs[i].top.size(); ++j) {
      EXPECT_EQ(a.logprobs[i].top[j].first, b.logprobs[i].top[j].first) << what;
      EXPECT_EQ(a.logprobs[i].top[j].second, b.logprobs[i].top[j].second) << what;
    }
  }
}

TEST(PrefixCaching, HitsAcrossRequestsChangeNoBit) {
  for (const ModelCase& m : {kStories, kGqa, kMla}) {
    SCOPED_TRACE(m.model_path);
    const auto a = random_prompt(1, 50);
    auto b = a;  // shares a's first 40 tokens: 2 whole blocks
    for (size_t i = 40; i < b.size(); ++i) b[i] = 7 + static_cast<int32_t>(i);
    const std::vector<EngineRequest> reqs = {greedy(a, 12), greedy(a, 12), greedy(b, 12)};
    EngineStats on_stats;
    const auto on = sequential(make_config(m, true), reqs, &on_stats);
    const auto off = sequential(make_config(m, false), reqs);
    ASSERT_EQ(on.size(), 3u);
    EXPECT_EQ(on[0].cached_tokens, 0);
    EXPECT_EQ(on[1].cached_tokens, 48);  // 3 whole blocks; the last prompt token is computed
    EXPECT_EQ(on[2].cached_tokens, 32);
    for (const Out& o : off) EXPECT_EQ(o.cached_tokens, 0);
    for (int i = 0; i < 3; ++i) expect_same_bits(on[i], off[i], "request " + std::to_string(i));
    expect_same_bits(on[0], on[1], "same prompt, second from cache");
    EXPECT_EQ(on_stats.prefix_cache_queries_total, 150);
    EXPECT_EQ(on_stats.prefix_cache_hits_total, 80);
    EXPECT_GT(on_stats.num_cached_blocks, 0);  // after the run: cached + free == total
  }
}

TEST(PrefixCaching, AConversationsNextTurnStartsAfterItsHistory) {
  // Turn 2 resends turn 1's prompt, its reply and new tokens: everything computed before is
  // cached except the reply's last token (never fed back while turn 1 ran).
  const auto p1 = random_prompt(2, 37);
  auto on_engine = engine(make_config(kStories, true));
  auto off_engine = engine(make_config(kStories, false));
  std::vector<int32_t> history = p1;
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    EXPECT_TRUE(on_engine->add_request(turn, greedy(history, 20)).ok());
    EXPECT_TRUE(off_engine->add_request(turn, greedy(history, 20)).ok());
    auto on = run(*on_engine, [](int32_t, LLMEngine&) {})[turn];
    auto off = run(*off_engine, [](int32_t, LLMEngine&) {})[turn];
    expect_same_bits(on, off, "turn");
    const int32_t computed_before = turn == 0 ? 0 : static_cast<int32_t>(history.size()) - 10 - 1;
    EXPECT_EQ(on.cached_tokens, turn == 0 ? 0 : computed_before / 16 * 16);
    history.insert(history.end(), on.tokens.begin(), on.tokens.end());
    const auto more = random_prompt(10 + turn, 10);
    history.insert(history.end(), more.begin(), more.end());
  }
}

TEST(PrefixCaching, RecomputeAfterPreemptionHitsTheRequestsOwnBlocks) {
  // Six distinct 60-token prompts generating 40 tokens each in a 24-block pool: preemption;
  // a preempted request's full blocks stay cached and its recompute takes them back.
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy(random_prompt(20 + i, 60), 40));
  auto together = [&](bool caching, EngineStats* stats) {
    auto e = engine(make_config(kGqa, caching, /*num_blocks=*/24, /*budget=*/64));
    auto outs = run(*e, [&](int32_t step, LLMEngine& en) {
      if (step == 0)
        for (size_t i = 0; i < reqs.size(); ++i) EXPECT_TRUE(en.add_request(int64_t(i), reqs[i]).ok());
    });
    *stats = e->stats();
    return outs;
  };
  EngineStats s_on, s_off;
  auto on = together(true, &s_on);
  auto off = together(false, &s_off);
  EXPECT_GT(s_on.num_preemptions_total, 0);
  EXPECT_GT(s_on.prefix_cache_hits_total, 0) << "recompute never hit the cache";
  EXPECT_LT(s_on.scheduled_prefill_tokens_total, s_off.scheduled_prefill_tokens_total);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same_bits(on[int64_t(i)], off[int64_t(i)], "request " + std::to_string(i));
}

TEST(PrefixCaching, AnAbortMidPrefillIndexesOnlyTheBlocksItFinished) {
  const auto p = random_prompt(3, 70);
  auto e = engine(make_config(kStories, true, 64, /*budget=*/20));
  // Steps of 20 tokens: after one step 20 computed (1 whole block), after two 40 (2 blocks).
  for (int32_t steps : {1, 2}) {
    const int64_t id = 100 + steps;
    EXPECT_TRUE(e->add_request(id, greedy(p, 4)).ok());
    for (int32_t i = 0; i < steps; ++i) e->step();
    e->abort_request(id);
    e->step();  // delivers the abort
    EXPECT_EQ(e->stats().num_free_blocks, e->stats().num_total_blocks);
  }
  // The first attempt finished 1 block; the second started after it and computed 40 more
  // tokens (56: 3 whole blocks); the partial fourth block was never indexed.
  EXPECT_TRUE(e->add_request(7, greedy(p, 4)).ok());
  auto outs = run(*e, [](int32_t, LLMEngine&) {});
  EXPECT_EQ(outs[7].cached_tokens, 48);
  const auto off = sequential(make_config(kStories, false), {greedy(p, 4)});
  expect_same_bits(outs[7], off[0], "after aborts");
}

TEST(PrefixCaching, CacheSaltSeparatesTenants) {
  const auto p = random_prompt(4, 50);
  const auto outs = sequential(make_config(kGqa, true),
                               {greedy(p, 4, "tenant-a"), greedy(p, 4, "tenant-b"),
                                greedy(p, 4, "tenant-a"), greedy(p, 4), greedy(p, 4)});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_EQ(outs[0].cached_tokens, 0);
  EXPECT_EQ(outs[1].cached_tokens, 0);   // another salt: nothing shared
  EXPECT_EQ(outs[2].cached_tokens, 48);  // the same salt
  EXPECT_EQ(outs[3].cached_tokens, 0);   // no salt is its own tenant too
  EXPECT_EQ(outs[4].cached_tokens, 48);
  for (const Out& o : outs) expect_same_bits(o, outs[0], "salted");
}

TEST(PrefixCaching, StopStringsAndSamePromptSamples) {
  // Samples of one prompt admitted in the same step cannot share (nothing is computed yet);
  // a later one can. A stop string ends a request early; its blocks are cached all the same.
  const std::vector<int32_t> prompt = random_prompt(5, 40);
  auto run_with = [&](bool caching) {
    auto e = engine(make_config(kStories, caching));
    auto r = greedy(prompt, 30);
    r.params.temperature = 0.8f;
    r.params.stop = {"e"};
    for (int i = 0; i < 2; ++i) {
      r.params.seed = 10 + i;  // n = 2: two samples with seeds
      EXPECT_TRUE(e->add_request(i, r).ok());
    }
    auto outs = run(*e, [](int32_t, LLMEngine&) {});
    r.params.seed = 10;
    EXPECT_TRUE(e->add_request(2, r).ok());
    outs[2] = run(*e, [](int32_t, LLMEngine&) {})[2];
    return outs;
  };
  auto on = run_with(true);
  auto off = run_with(false);
  EXPECT_EQ(on[0].cached_tokens, 0);
  EXPECT_EQ(on[1].cached_tokens, 0);
  EXPECT_EQ(on[2].cached_tokens, 32);
  for (int64_t i = 0; i < 3; ++i) expect_same_bits(on[i], off[i], "sample " + std::to_string(i));
  expect_same_bits(on[2], on[0], "the same seed later, from cache");
  EXPECT_EQ(on[0].finish, FinishReason::kStop) << on[0].text;
}

TEST(PrefixCaching, PromptLogprobsComputeEveryPosition) {
  const auto p = random_prompt(6, 50);
  auto with_prompt_logprobs = greedy(p, 3);
  with_prompt_logprobs.params.prompt_logprobs = 2;
  const auto on = sequential(make_config(kGqa, true), {greedy(p, 3), with_prompt_logprobs});
  const auto off = sequential(make_config(kGqa, false), {greedy(p, 3), with_prompt_logprobs});
  EXPECT_EQ(on[1].cached_tokens, 0);
  ASSERT_EQ(on[1].prompt_logprobs.size(), p.size() - 1);
  ASSERT_EQ(off[1].prompt_logprobs.size(), p.size() - 1);
  for (size_t i = 0; i < p.size() - 1; ++i)
    EXPECT_EQ(on[1].prompt_logprobs[i].logprob, off[1].prompt_logprobs[i].logprob) << i;
  expect_same_bits(on[1], off[1], "prompt logprobs");
}

TEST(PrefixCaching, EvictionTakesFreeBlocksFirstThenTheLeastRecentlyReleasedTail) {
  // 8 blocks. A (50 tokens: 3 full blocks, cached when it ends, and a partial one, freed)
  // finishes; B (96 tokens: 6 blocks) takes the 5 free blocks and evicts one cached block:
  // A's last full block, since A's blocks were released tail first. A again finds its first 2
  // blocks. With 16 blocks nothing is evicted and A finds all 3.
  const auto a = random_prompt(7, 50), b = random_prompt(8, 96);
  const auto tight = sequential(make_config(kStories, true, /*num_blocks=*/8),
                                {greedy(a, 1), greedy(b, 1), greedy(a, 1)});
  ASSERT_EQ(tight.size(), 3u);
  EXPECT_EQ(tight[2].cached_tokens, 32);
  const auto roomy = sequential(make_config(kStories, true, /*num_blocks=*/16),
                                {greedy(a, 1), greedy(b, 1), greedy(a, 1)});
  EXPECT_EQ(roomy[2].cached_tokens, 48);
  expect_same_bits(tight[2], roomy[2], "evicted or not");
}

}  // namespace
}  // namespace llmserve
