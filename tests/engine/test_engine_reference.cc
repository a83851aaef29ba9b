// Greedy generation must reproduce llama2.c run.c token for token (stories260K, float32):
// one request at a time, all at once (shared batches), with chunked prefill splitting
// prompts, and with a KV pool so small that preemption must happen. Both model formats.
#include <gtest/gtest.h>

#include <map>

#include "engine/llm_engine.h"
#include "reference_cases.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {
namespace {

using testing::load_reference_cases;
using testing::ReferenceCase;

struct Format {
  const char* name;
  bool gguf;
};

class EngineReference : public ::testing::TestWithParam<Format> {
 protected:
  EngineConfig base_config() const {
    EngineConfig c;
    if (GetParam().gguf) {
      c.model_path = testing::stories_gguf();
    } else {
      c.model_path = testing::stories_bin();
      c.tokenizer_path = testing::stories_tokenizer();
    }
    c.scheduler.max_model_len = 512;  // the GGUF declares 128; the model was trained on 512
    c.scheduler.check_invariants = true;
    c.num_threads = 2;
    return c;
  }

  static std::unique_ptr<LLMEngine> make_engine(const EngineConfig& c) {
    auto e = LLMEngine::create(c);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return std::move(e).value();
  }

  static EngineRequest greedy_request(const ReferenceCase& rc) {
    EngineRequest r;
    r.prompt_token_ids = rc.prompt_ids;
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int32_t>(rc.generated_ids.size());
    r.params.stop_token_ids = {1};  // run.c ends the text when the model emits BOS
    return r;
  }

  /// Steps until every request finishes; returns generated ids per request id.
  static std::map<int64_t, std::vector<int32_t>> run_to_completion(LLMEngine& e) {
    std::map<int64_t, std::vector<int32_t>> got;
    int guard = 0;
    while (e.has_unfinished_requests()) {
      for (const RequestOutput& o : e.step()) {
        auto& v = got[o.request_id];
        v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        EXPECT_EQ(o.num_output_tokens, static_cast<int32_t>(v.size()));
      }
      EXPECT_LT(++guard, 100000) << "engine does not converge";
      if (guard >= 100000) break;
    }
    return got;
  }

  static void expect_all_blocks_free(const LLMEngine& e) {
    const EngineStats s = e.stats();
    EXPECT_EQ(s.num_free_blocks, s.num_total_blocks);
    EXPECT_EQ(s.num_running, 0);
    EXPECT_EQ(s.num_waiting, 0);
  }

  static void expect_matches(const std::vector<ReferenceCase>& cases,
                             const std::map<int64_t, std::vector<int32_t>>& got) {
    ASSERT_EQ(got.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto& ids = got.at(static_cast<int64_t>(i));
      EXPECT_EQ(ids, cases[i].generated_ids) << "case " << i << " prompt '" << cases[i].prompt << "'";
    }
  }
};

TEST_P(EngineReference, TokenizerMatchesRunC) {
  auto e = make_engine(base_config());
  for (const auto& rc : load_reference_cases())
    EXPECT_EQ(e->tokenizer().encode(rc.prompt, /*add_bos=*/true), rc.prompt_ids) << rc.prompt;
}

TEST_P(EngineReference, OneRequestAtATime) {
  auto e = make_engine(base_config());
  const auto cases = load_reference_cases();
  std::map<int64_t, std::vector<int32_t>> got;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(e->add_request(static_cast<int64_t>(i), greedy_request(cases[i])).ok());
    auto one = run_to_completion(*e);
    got[static_cast<int64_t>(i)] = one[static_cast<int64_t>(i)];
    expect_all_blocks_free(*e);
  }
  expect_matches(cases, got);
}

TEST_P(EngineReference, AllAtOnceShareBatches) {
  auto e = make_engine(base_config());
  const auto cases = load_reference_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    ASSERT_TRUE(e->add_request(static_cast<int64_t>(i), greedy_request(cases[i])).ok());
  expect_matches(cases, run_to_completion(*e));
  expect_all_blocks_free(*e);
  EXPECT_EQ(e->stats().num_preemptions_total, 0);
}

TEST_P(EngineReference, ChunkedPrefillWithTinyTokenBudget) {
  EngineConfig c = base_config();
  c.scheduler.max_num_batched_tokens = 3;  // every prompt longer than 3 is split in chunks
  auto e = make_engine(c);
  const auto cases = load_reference_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    ASSERT_TRUE(e->add_request(static_cast<int64_t>(i), greedy_request(cases[i])).ok());
  expect_matches(cases, run_to_completion(*e));
  expect_all_blocks_free(*e);
}

TEST_P(EngineReference, SmallPoolForcesPreemption) {
  EngineConfig c = base_config();
  c.cache.block_size = 4;
  c.cache.num_kv_blocks = 120;  // the longest case (435 tokens) needs 109 blocks; all six ~390
  auto e = make_engine(c);
  const auto cases = load_reference_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    ASSERT_TRUE(e->add_request(static_cast<int64_t>(i), greedy_request(cases[i])).ok()) << i;
  expect_matches(cases, run_to_completion(*e));
  expect_all_blocks_free(*e);
  EXPECT_GT(e->stats().num_preemptions_total, 0);
}

TEST_P(EngineReference, AbortFreesBlocksAndReportsAbort) {
  auto e = make_engine(base_config());
  const auto cases = load_reference_cases();
  ASSERT_TRUE(e->add_request(7, greedy_request(cases[0])).ok());
  ASSERT_TRUE(e->add_request(8, greedy_request(cases[1])).ok());
  e->step();
  e->step();
  EXPECT_LT(e->stats().num_free_blocks, e->stats().num_total_blocks);
  e->abort_request(7);
  e->abort_request(8);
  expect_all_blocks_free(*e);  // freed immediately, before the next step
  bool saw7 = false, saw8 = false;
  for (const RequestOutput& o : e->step()) {
    EXPECT_TRUE(o.finished);
    EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
    saw7 |= o.request_id == 7;
    saw8 |= o.request_id == 8;
  }
  EXPECT_TRUE(saw7 && saw8);
  EXPECT_FALSE(e->has_unfinished_requests());
}

TEST_P(EngineReference, TextMatchesRunC) {
  auto e = make_engine(base_config());
  const auto cases = load_reference_cases();
  const ReferenceCase& rc = cases[0];
  ASSERT_TRUE(e->add_request(0, greedy_request(rc)).ok());
  std::string text;
  while (e->has_unfinished_requests())
    for (const RequestOutput& o : e->step()) text += o.new_text;
  EXPECT_EQ(rc.prompt + text, rc.text);
}

TEST_P(EngineReference, EveryBatchingModeAndPolicyKeepsGreedyOutputs) {
  const auto cases = load_reference_cases();
  struct Variant {
    const char* name;
    void (*apply)(SchedulerConfig&);
  };
  const Variant variants[] = {
      {"static", [](SchedulerConfig& s) { s.batching = BatchingMode::kStatic; s.max_num_seqs = 4; }},
      {"dynamic", [](SchedulerConfig& s) { s.batching = BatchingMode::kDynamic; s.max_num_seqs = 3; s.max_delay_ms = 0; }},
      {"prefill-first", [](SchedulerConfig& s) { s.enable_chunked_prefill = false; s.max_num_batched_tokens = 512; }},
      {"mixed", [](SchedulerConfig& s) { s.enable_chunked_prefill = false; s.max_num_batched_tokens = 512; s.prefill_policy = PrefillPolicy::kMixed; }},
      {"priority", [](SchedulerConfig& s) { s.policy = SchedulingPolicy::kPriority; s.max_num_seqs = 2; }},
  };
  for (const Variant& v : variants) {
    EngineConfig c = base_config();
    v.apply(c.scheduler);
    c.cache.block_size = 4;
    c.cache.num_kv_blocks = 150;  // tight enough to preempt in several modes
    auto e = make_engine(c);
    for (size_t i = 0; i < cases.size(); ++i) {
      EngineRequest r = greedy_request(cases[i]);
      r.priority = static_cast<int32_t>(cases.size() - i);  // reverse order under priority
      ASSERT_TRUE(e->add_request(static_cast<int64_t>(i), r).ok()) << v.name;
    }
    SCOPED_TRACE(v.name);
    expect_matches(cases, run_to_completion(*e));
    expect_all_blocks_free(*e);
  }
}

TEST_P(EngineReference, StopStringEndsGenerationAndIsExcluded) {
  auto e = make_engine(base_config());
  const auto cases = load_reference_cases();
  const ReferenceCase& rc = cases[0];
  // run.c's text continues "..., there was a little girl named Lily. She loved ...".
  EngineRequest r = greedy_request(rc);
  r.params.stop = {"named"};
  const Status st = e->add_request(0, r);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string text;
  RequestOutput last;
  while (e->has_unfinished_requests())
    for (RequestOutput& o : e->step()) {
      text += o.new_text;
      last = o;
    }
  const std::string full = rc.text.substr(rc.prompt.size());
  EXPECT_EQ(text, full.substr(0, full.find("named")));
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
  expect_all_blocks_free(*e);
}

TEST_P(EngineReference, SeededSamplingIsReproducibleWhateverTheBatch) {
  auto e = make_engine(base_config());
  const auto cases = load_reference_cases();
  auto sampled = [&](uint64_t seed) {
    EngineRequest r;
    r.prompt_token_ids = cases[0].prompt_ids;
    r.params.temperature = 0.9f;
    r.params.top_p = 0.95f;
    r.params.max_tokens = 60;
    r.params.ignore_eos = true;
    r.params.seed = seed;
    return r;
  };
  ASSERT_TRUE(e->add_request(0, sampled(7)).ok());
  auto alone = run_to_completion(*e)[0];
  // Same request and seed, now batched with other greedy and sampled requests.
  ASSERT_TRUE(e->add_request(1, greedy_request(cases[2])).ok());
  ASSERT_TRUE(e->add_request(2, sampled(7)).ok());
  ASSERT_TRUE(e->add_request(3, sampled(8)).ok());
  auto batched = run_to_completion(*e);
  EXPECT_EQ(batched[2], alone);
  EXPECT_NE(batched[3], alone);
  EXPECT_EQ(batched[1], cases[2].generated_ids);
}

INSTANTIATE_TEST_SUITE_P(Formats, EngineReference,
                         ::testing::Values(Format{"bin", false}, Format{"gguf", true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace llmserve
