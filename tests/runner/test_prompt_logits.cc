// Logits of the six synthetic models (llama MHA/GQA/MQA, qwen2 with biases, qwen3 with q/k norm
// and head_dim 48, deepseek2 MLA) against an independent float64 NumPy forward pass
// (../shared/testdata/models/synthetic): max |diff| <= 1e-3, identical argmax at every
// position, through both model.gguf (llama.cpp's converter: permuted Q/K for llama, split
// k_b/v_b for deepseek2) and hf/ (config.json + model.safetensors, rotate-half Q/K), both
// attention backends, whole-prompt and chunked prefill, several block sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

std::vector<int32_t> sequence(const std::string& which) {
  std::ifstream in(synth("sequences.json"));
  return nlohmann::json::parse(in)[which].get<std::vector<int32_t>>();
}

struct Case {
  std::string model;     // synthetic folder
  std::string format;    // model.gguf / hf
  std::string sequence;  // short / long
  int32_t chunk;
  int32_t block_size;
  std::string backend;   // flash / naive
};

class SyntheticLogits : public ::testing::TestWithParam<Case> {};

TEST_P(SyntheticLogits, MatchNumpyReference) {
  const Case& c = GetParam();
  auto file = ModelFile::open(synth(c.model + "/" + c.format));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->format(), c.format == "hf" ? ModelFile::Format::kHfDir
                                                : ModelFile::Format::kGguf);
  const auto ids = sequence(c.sequence);
  auto ref = read_npy(synth(c.model + "/numpy_logits_" + c.sequence + ".npy"));
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  PromptLogitsOptions opt;
  opt.chunk_size = c.chunk;
  opt.block_size = c.block_size;
  opt.attention_backend = c.backend;
  opt.num_threads = 2;
  auto got = compute_prompt_logits(**file, ids, opt);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const int64_t vocab = (*file)->config().vocab_size;
  ASSERT_EQ(ref->shape, (std::vector<int64_t>{static_cast<int64_t>(ids.size()), vocab}));
  ASSERT_EQ(got->size(), ref->data.size());
  double max_diff = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* g = &(*got)[t * vocab];
    const float* r = &ref->data[t * vocab];
    int64_t ag = 0, ar = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(g[v] - r[v])));
      if (g[v] > g[ag]) ag = v;
      if (r[v] > r[ar]) ar = v;
    }
    EXPECT_EQ(ag, ar) << "argmax differs at position " << t;
  }
  EXPECT_LE(max_diff, 1e-3);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* b : {"flash", "naive"})
    for (const char* m : {"llama-mha", "llama-gqa", "llama-mqa", "qwen2-gqa-bias",
                          "qwen3-qknorm", "deepseek2-mla"})
      for (const char* f : {"model.gguf", "hf"}) {
        if (std::string(f) == "hf" && std::string(m) == "deepseek2-mla") continue;  // no hf/
        out.push_back({m, f, "short", 2048, 16, b});
        out.push_back({m, f, "long", 2048, 16, b});
        out.push_back({m, f, "long", 37, 16, b});  // chunked prefill, boundaries inside blocks
        out.push_back({m, f, "long", 64, 1, b});   // one token per block
        out.push_back({m, f, "short", 5, 128, b});  // several chunks inside one block
      }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Synthetic, SyntheticLogits, ::testing::ValuesIn(cases()), [](const auto& info) {
      std::string n = info.param.model + "_" + (info.param.format == "hf" ? "hf" : "gguf") +
                      "_" + info.param.sequence + "_c" +
                      std::to_string(info.param.chunk) + "_b" +
                      std::to_string(info.param.block_size) + "_" + info.param.backend;
      for (char& ch : n)
        if (ch == '-' || ch == '.') ch = '_';
      return n;
    });

TEST(PromptLogits, StoriesBinAndGgufAgree) {
  const std::string dir = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/";
  auto bin = ModelFile::open(dir + "stories260K.bin");
  auto gguf = ModelFile::open(dir + "stories260K.gguf");
  ASSERT_TRUE(bin.ok() && gguf.ok());
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383};
  auto a = compute_prompt_logits(**bin, ids, {});
  auto b = compute_prompt_logits(**gguf, ids, {});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) ASSERT_NEAR((*a)[i], (*b)[i], 1e-5) << i;
}

TEST(PromptLogits, RejectsBadInput) {
  auto file = ModelFile::open(synth("llama-gqa/model.gguf"));
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE(compute_prompt_logits(**file, {}, {}).ok());
  auto r = compute_prompt_logits(**file, {1, 512}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("512"), std::string::npos);
  PromptLogitsOptions bad;
  bad.attention_backend = "nope";
  EXPECT_FALSE(compute_prompt_logits(**file, {1}, bad).ok());
}

}  // namespace
}  // namespace llmserve
