// Helpers of the windowed-attention engine tests (test_sliding_window.cc, test_hybrid_kv.cc):
// the `long` token sequence of ../shared/testdata/models/synthetic and the check that greedy
// tokens are the argmax of the logits one pool computes without freeing anything.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_file.h"
#include "runner/prompt_logits.h"

namespace llmserve::testing {

/// The 160-token `long` sequence.
inline std::vector<int32_t> long_sequence() {
  std::ifstream in(std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/sequences.json");
  return nlohmann::json::parse(in)["long"].get<std::vector<int32_t>>();
}

/// `out` (greedy tokens after `prompt`) must be what the windowed logits of `model`, computed
/// with one table for every position and no freeing (runner/prompt_logits), pick at every step.
inline void expect_greedy_matches_reference(const std::string& model, const std::vector<int32_t>& prompt,
                                            const std::vector<int32_t>& out) {
  auto file = ModelFile::open(model);
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), out.begin(), out.end());
  PromptLogitsOptions opt;
  opt.kv_cache_dtype = DType::kF32;
  opt.num_threads = 2;
  auto logits = compute_prompt_logits(**file, all, opt);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  const int64_t vocab = (*file)->config().vocab_size;
  for (size_t i = 0; i < out.size(); ++i) {
    const float* row = logits->data() + (prompt.size() - 1 + i) * vocab;
    const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    ASSERT_EQ(out[i], best) << model << ": generated token " << i << " (position " << prompt.size() + i << ")";
  }
}

}  // namespace llmserve::testing
