// Prompt logprobs (SamplingParams::prompt_logprobs, behind completions echo + logprobs): every
// prompt position's logprob must equal the log-softmax of the NumPy float64 reference logits
// of the synthetic models (an outside implementation), however the scheduler chunks the
// prompt, and must be delivered exactly once, with the first output.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/llm_engine.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

std::unique_ptr<LLMEngine> make_engine(const std::string& model, int32_t max_batched_tokens,
                                       int32_t num_kv_blocks = 0) {
  EngineConfig c;
  c.model_path = synth(model + "/model.gguf");
  c.num_threads = 2;
  c.cache.block_size = 16;
  c.cache.num_kv_blocks = num_kv_blocks;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = max_batched_tokens;
  c.scheduler.max_model_len = 256;
  c.scheduler.check_invariants = true;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

/// log_softmax(row)[token] in float64.
double ref_logprob(const float* row, int64_t vocab, int32_t token) {
  double mx = row[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, double(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
  return double(row[token]) - mx - std::log(sum);
}

struct Result {
  std::vector<TokenLogprobs> prompt_logprobs;
  int32_t outputs_with_prompt_logprobs = 0;
};

/// Runs `requests` copies of the prompt to completion; returns what each request received.
std::vector<Result> run(LLMEngine& engine, const std::vector<int32_t>& ids, int32_t k,
                        int32_t requests) {
  for (int32_t r = 0; r < requests; ++r) {
    EngineRequest req;
    req.prompt_token_ids = ids;
    req.params.temperature = 0;
    req.params.max_tokens = 3;
    req.params.ignore_eos = true;
    req.params.prompt_logprobs = k;
    EXPECT_TRUE(engine.add_request(r, req).ok());
  }
  std::vector<Result> res(requests);
  for (int guard = 0; guard < 10000 && engine.has_unfinished_requests(); ++guard)
    for (RequestOutput& out : engine.step()) {
      if (out.prompt_logprobs.empty()) continue;
      Result& r = res.at(out.request_id);
      ++r.outputs_with_prompt_logprobs;
      r.prompt_logprobs = std::move(out.prompt_logprobs);
    }
  EXPECT_FALSE(engine.has_unfinished_requests());
  EXPECT_EQ(engine.stats().num_free_blocks, engine.stats().num_total_blocks);
  return res;
}

struct Case {
  const char* model;
  int32_t max_batched_tokens;  // 160-token prompt: one chunk (256) or many (37, 64)
  int32_t requests;            // > 1 with a small pool forces preemption mid-prefill
  int32_t num_kv_blocks;
};

class PromptLogprobs : public ::testing::TestWithParam<Case> {};

TEST_P(PromptLogprobs, MatchNumpyReferenceAndArriveOnce) {
  const Case& c = GetParam();
  std::ifstream in(synth("sequences.json"));
  const auto ids = nlohmann::json::parse(in)["long"].get<std::vector<int32_t>>();
  auto ref = read_npy(synth(std::string(c.model) + "/numpy_logits_long.npy"));
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const int64_t vocab = ref->shape[1];
  auto engine = make_engine(c.model, c.max_batched_tokens, c.num_kv_blocks);
  ASSERT_TRUE(engine);
  constexpr int32_t kTop = 5;
  const std::vector<Result> results = run(*engine, ids, kTop, c.requests);
  if (c.num_kv_blocks > 0) {
    EXPECT_GT(engine->stats().num_preemptions_total, 0);
  }
  for (const Result& got : results) {
    EXPECT_EQ(got.outputs_with_prompt_logprobs, 1);
    ASSERT_EQ(got.prompt_logprobs.size(), ids.size() - 1);
    double max_diff = 0;
    for (size_t i = 1; i < ids.size(); ++i) {
      const float* row = &ref->data[(i - 1) * vocab];  // logits at i-1 predict token i
      const TokenLogprobs& lp = got.prompt_logprobs[i - 1];
      max_diff = std::max(max_diff, std::fabs(lp.logprob - ref_logprob(row, vocab, ids[i])));
      ASSERT_EQ(lp.top.size(), size_t{kTop});
      // The first alternative is the reference's most likely token; the rest descend.
      const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      EXPECT_EQ(lp.top[0].first, best) << "position " << i;
      for (size_t j = 1; j < lp.top.size(); ++j)
        EXPECT_GE(lp.top[j - 1].second, lp.top[j].second);
      EXPECT_NEAR(lp.top[0].second, ref_logprob(row, vocab, best), 1e-4);
    }
    EXPECT_LT(max_diff, 1e-4) << c.model;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Synthetic, PromptLogprobs,
    ::testing::Values(Case{"llama-gqa", 256, 1, 0}, Case{"llama-gqa", 37, 1, 0},
                      Case{"llama-mha", 64, 1, 0}, Case{"deepseek2-mla", 37, 1, 0},
                      // 3 prompts of 11 blocks in a 16-block pool: preemption restarts prefills.
                      Case{"llama-gqa", 64, 3, 16}));

}  // namespace
}  // namespace llmserve
