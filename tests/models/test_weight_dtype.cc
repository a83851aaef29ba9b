// --dtype: float weights converted at load (ModelLoadOptions::dtype) must give exactly the
// logits of a file that stores the same weights in that dtype (every weight tensor of two or
// more dimensions converted, norms left float32), for both architectures (llama, deepseek2
// MLA with its 3-D attn_k_b / attn_v_b) and every format (GGUF, HF safetensors, llama2.c).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "gguf_rewrite.h"
#include "models/model.h"
#include "runner/prompt_logits.h"

namespace llmserve {
namespace {

namespace fs = std::filesystem;

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

std::vector<int32_t> long_sequence() {
  std::ifstream in(synth("sequences.json"));
  return nlohmann::json::parse(in)["long"].get<std::vector<int32_t>>();
}

/// Logits with a float32 KV cache (so only the weights differ between runs).
std::vector<float> logits_of(const std::string& path, std::optional<DType> dtype,
                             const std::vector<int32_t>& ids) {
  auto file = ModelFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return {};
  PromptLogitsOptions opt;
  opt.dtype = dtype;
  opt.kv_cache_dtype = DType::kF32;
  opt.num_threads = 2;
  auto l = compute_prompt_logits(**file, ids, opt);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? *l : std::vector<float>{};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

class WeightDtype : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("llmserve_wdtype_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  /// `model`'s GGUF rewritten per `mode`.
  std::string rewritten(const std::string& model, testing::Rewrite mode, const std::string& tag) {
    auto src = GgufFile::open(synth(model + "/model.gguf"));
    EXPECT_TRUE(src.ok()) << src.status().message();
    const std::string out = (dir_ / (model + "-" + tag + ".gguf")).string();
    testing::rewrite_gguf(*src, out, mode);
    return out;
  }
  fs::path dir_;
};

TEST_F(WeightDtype, ConvertedAtLoadEqualsTheFileStoredInThatDtype) {
  const auto ids = long_sequence();
  for (const char* model : {"llama-gqa", "qwen2-gqa-bias", "deepseek2-mla"}) {
    SCOPED_TRACE(model);
    const std::string f32 = synth(std::string(model) + "/model.gguf");
    const auto bf16_file = logits_of(rewritten(model, testing::Rewrite::kBF16, "bf16"),
                                     std::nullopt, ids);
    const auto f16_file = logits_of(rewritten(model, testing::Rewrite::kF16, "f16"),
                                    std::nullopt, ids);
    EXPECT_EQ(logits_of(f32, DType::kBF16, ids), bf16_file);  // bit for bit
    EXPECT_EQ(logits_of(f32, DType::kF16, ids), f16_file);
    // ... and the conversion happened: 16-bit weights change the logits.
    EXPECT_GT(max_abs_diff(logits_of(f32, std::nullopt, ids), bf16_file), 1e-6);
    // Widening back is exact: a bf16 file loaded as float32 is the f32 file of its values.
    const std::string bf16 = rewritten(model, testing::Rewrite::kBF16, "bf16");
    const auto rounded = logits_of(rewritten(model, testing::Rewrite::kF32RoundedBF16, "r"),
                                   std::nullopt, ids);
    EXPECT_EQ(logits_of(bf16, DType::kF32, ids), rounded);
    // Asking for the file's own dtype changes nothing.
    EXPECT_EQ(logits_of(bf16, DType::kBF16, ids), bf16_file);
  }
}

TEST_F(WeightDtype, HfSafetensorsAndLlama2cConvertToo) {
  const auto ids = long_sequence();
  // HF directory (f32 safetensors, rotate-half Q/K) vs the GGUF stored in bf16: same rounded
  // weights, Q/K rows in another order, so equal up to float reassociation.
  const std::string hf = synth("llama-gqa/hf");
  const auto hf_bf16 = logits_of(hf, DType::kBF16, ids);
  const auto gguf_bf16 = logits_of(rewritten("llama-gqa", testing::Rewrite::kBF16, "bf16"),
                                   std::nullopt, ids);
  EXPECT_LE(max_abs_diff(hf_bf16, gguf_bf16), 1e-3);
  EXPECT_GT(max_abs_diff(hf_bf16, logits_of(hf, std::nullopt, ids)), 1e-3);
  // llama2.c (always f32; tied classifier = the converted embedding) vs its GGUF conversion.
  const std::string stories = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/";
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 281, 261, 411, 412};
  const auto bin_f16 = logits_of(stories + "stories260K.bin", DType::kF16, prompt);
  EXPECT_LE(max_abs_diff(bin_f16, logits_of(stories + "stories260K.gguf", DType::kF16, prompt)),
            1e-4);
  EXPECT_GT(max_abs_diff(bin_f16, logits_of(stories + "stories260K.bin", std::nullopt, prompt)),
            1e-6);
}

TEST_F(WeightDtype, KvCacheAutoFollowsTheConvertedDtype) {
  // With --kv-cache-dtype auto the cache takes --dtype's type (vLLM: the model dtype after
  // --dtype): the same logits as asking for that cache dtype explicitly.
  const auto ids = long_sequence();
  auto file = ModelFile::open(synth("llama-gqa/model.gguf"));
  ASSERT_TRUE(file.ok());
  auto run = [&](std::optional<DType> kv) {
    PromptLogitsOptions opt;
    opt.dtype = DType::kBF16;
    opt.kv_cache_dtype = kv;
    auto l = compute_prompt_logits(**file, ids, opt);
    EXPECT_TRUE(l.ok()) << l.status().message();
    return *l;
  };
  const auto auto_kv = run(std::nullopt);
  EXPECT_EQ(auto_kv, run(DType::kBF16));
  EXPECT_GT(max_abs_diff(auto_kv, run(DType::kF32)), 1e-6);
  EXPECT_EQ(model_dtype((*file)->config(), ModelLoadOptions{DType::kBF16}), DType::kBF16);
  EXPECT_EQ(model_dtype((*file)->config(), ModelLoadOptions{}), DType::kF32);
}

}  // namespace
}  // namespace llmserve
