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

struct Case {
  std::string path;  // relative to tests/models/data
  std::string model;
  std::string sequence;
  int32_t chunk;
  int32_t block_size;
  std::string backend;
};

class SlidingWindowLogits : public ::testing::TestWithParam<Case> {};

TEST_P(SlidingWindowLogits, MatchNumpyReference) {
  const Case& c = GetParam();
  const auto ids = testing::tiny_sequence(c.sequence);
  auto got = testing::tiny_logits(testing::tiny_model_dir(c.model) + c.path, ids, c.chunk, c.block_size, c.backend);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const testing::Compare r = testing::compare(*got, testing::tiny_reference(c.model, c.sequence), 512);
  std::printf("%s %s %s chunk %d block %d %s: max |diff| %.3e\n", c.model.c_str(), c.path.c_str(),
              c.sequence.c_str(), c.chunk, c.block_size, c.backend.c_str(), r.max_diff);
  EXPECT_EQ(r.argmax_mismatches, 0);
  EXPECT_LE(r.max_diff, 1e-3);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::pair<const char*, const char*> models[] = {
      {"mistral-swa-tiny", "model.gguf"}, {"mistral-swa-tiny", "hf"}, {"qwen2-swa-tiny", "hf"}};
  for (const auto& [m, path] : models)
    for (const char* b : {"flash", "naive", "flash-split"}) {
      for (const char* s : {"short", "long"})
        for (int32_t chunk : {2048, 7}) out.push_back({path, m, s, chunk, 16, b});
      out.push_back({path, m, "long", 1, 16, b});  // every token a decode step
      out.push_back({path, m, "long", 37, 1, b});  // block size 1
    }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string m = info.param.model.substr(0, info.param.model.find('-'));
  std::string backend = info.param.backend == "flash-split" ? "split" : info.param.backend;
  return m + "_" + (info.param.path == "hf" ? "hf" : "gguf") + "_" + info.param.sequence + "_c" +
         std::to_string(info.param.chunk) + "_b" + std::to_string(info.param.block_size) + "_" + backend;
}

INSTANTIATE_TEST_SUITE_P(Tiny, SlidingWindowLogits, ::testing::ValuesIn(cases()), case_name);

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
  const auto ids = testing::tiny_sequence("long");
  for (const char* m : {"mistral-swa-tiny/model.gguf", "qwen2-swa-tiny/hf"}) {
    const std::string path = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/" + m;
    auto whole = testing::tiny_logits(path, ids, 2048, 16, "flash");
    auto steps = testing::tiny_logits(path, ids, 1, 16, "flash");
    auto chunks = testing::tiny_logits(path, ids, 13, 16, "flash");
    ASSERT_TRUE(whole.ok() && steps.ok() && chunks.ok());
    EXPECT_EQ(testing::compare(*whole, *steps, 512).max_diff, 0.0) << m;
    EXPECT_EQ(testing::compare(*whole, *chunks, 512).max_diff, 0.0) << m;
  }
}

}  // namespace
}  // namespace llmserve
