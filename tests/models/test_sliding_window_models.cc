// Sliding-window attention (AttentionShape::window, ModelConfig::layer_window) on two tiny
// random models in tests/models/data, written with their float64 NumPy reference logits by
// scripts/references/tiny_models.py (transformers' sliding-window mask: a query at position i
// sees the keys j <= i with i - j < window):
//   mistral-swa-tiny  MistralForCausalLM, window 40 in both layers (GGUF `llama` with
//                     attention.sliding_window, and the HF directory)
//   qwen2-swa-tiny    Qwen2ForCausalLM with use_sliding_window, window 16, max_window_layers 1:
//                     layer 0 full, layers 1-2 sliding (HF directory only: a GGUF has no
//                     per-layer pattern for qwen2)
// The 160-token `long` sequence runs 4x and 10x past the windows; the windows cross KV blocks
// (block sizes 16 and 1) and the flash kernel's 64-token tiles. llama.cpp gives no reference:
// it ignores sliding_window for llama and qwen2 (the READMEs say where).
#include <gtest/gtest.h>

#include <cstdio>

#include "gguf_rewrite.h"
#include "runner/prompt_logits.h"
#include "tiny_models.h"

namespace llmserve {
namespace {

class SlidingWindowLogits : public ::testing::TestWithParam<testing::TinyCase> {};

TEST_P(SlidingWindowLogits, MatchNumpyReference) { testing::expect_matches_numpy(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Tiny, SlidingWindowLogits,
                         ::testing::ValuesIn(testing::tiny_cases({{"mistral-swa-tiny", "model.gguf"},
                                                                  {"mistral-swa-tiny", "hf"},
                                                                  {"qwen2-swa-tiny", "hf"}},
                                                                 {"flash", "naive", "flash-split"})),
                         testing::tiny_case_name);

// The window is read as transformers configures it.
TEST(SlidingWindow, LayersAsConfigured) {
  auto mistral = ModelFile::open(testing::tiny_model_dir("mistral-swa-tiny") + "model.gguf");
  ASSERT_TRUE(mistral.ok()) << mistral.status().message();
  EXPECT_EQ((*mistral)->config().sliding_window, 40);
  EXPECT_TRUE((*mistral)->config().all_layers_sliding());
  EXPECT_EQ((*mistral)->config().max_position_embeddings, 512);  // not capped at the window
  auto qwen = ModelFile::open(testing::tiny_model_dir("qwen2-swa-tiny") + "hf");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  const ModelConfig& c = (*qwen)->config();
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 16);
  EXPECT_EQ(c.layer_window(2), 16);
  EXPECT_FALSE(c.all_layers_sliding());
}

// Batch invariance with windows: a token's logits are the same bits however the prompt is split.
TEST(SlidingWindow, LogitsDoNotDependOnChunking) {
  for (const char* m : {"mistral-swa-tiny/model.gguf", "qwen2-swa-tiny/hf"})
    testing::expect_chunking_invariant(std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/" + m);
}

}  // namespace
}  // namespace llmserve
