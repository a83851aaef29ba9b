// GGUF models with F16 / BF16 weights: multiplied in their file dtype (converted on the fly)
// they must give the same logits as F32 weights holding the same rounded values, and stay
// close to the float64 NumPy reference of the unrounded model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "gguf_rewrite.h"
#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids, std::optional<DType> kv_dtype) {
  auto file = ModelFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  PromptLogitsOptions opt;
  opt.kv_cache_dtype = kv_dtype;
  auto l = compute_prompt_logits(**file, ids, opt);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return *l;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

class HalfPrecision : public ::testing::TestWithParam<bool> {};  // true = bf16

TEST_P(HalfPrecision, MatchesF32WithRoundedWeightsAndStaysNearReference) {
  const bool bf16 = GetParam();
  auto src = GgufFile::open(synth("llama-gqa/model.gguf"));
  ASSERT_TRUE(src.ok()) << src.status().message();
  const auto dir = std::filesystem::temp_directory_path() / ("llmserve_half_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string half = dir / "half.gguf", rounded = dir / "rounded.gguf";
  testing::rewrite_gguf(*src, half, bf16 ? testing::Rewrite::kBF16 : testing::Rewrite::kF16);
  testing::rewrite_gguf(*src, rounded,
                        bf16 ? testing::Rewrite::kF32RoundedBF16 : testing::Rewrite::kF32RoundedF16);
  auto half_file = ModelFile::open(half);
  ASSERT_TRUE(half_file.ok()) << half_file.status().message();
  EXPECT_EQ((*half_file)->config().weight_dtype, bf16 ? DType::kBF16 : DType::kF16);

  std::ifstream in(synth("sequences.json"));
  const auto ids = nlohmann::json::parse(in)["long"].get<std::vector<int32_t>>();
  // Weights alone: both runs keep a float32 KV cache.
  const auto got = logits_of(half, ids, DType::kF32);
  const auto want = logits_of(rounded, ids, DType::kF32);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(max_abs_diff(got, want), 1e-3);

  auto ref = read_npy(synth("llama-gqa/numpy_logits_long.npy"));
  ASSERT_TRUE(ref.ok());
  // Weight rounding alone: f16 keeps 11 significant bits, bf16 8 (logit range here ~30-160).
  const double vs_rounded = max_abs_diff(got, want), vs_ref = max_abs_diff(got, ref->data);
  std::printf("%s: max |diff| vs F32-rounded %.2e, vs NumPy reference %.3f\n",
              bf16 ? "bf16" : "f16", vs_rounded, vs_ref);
  EXPECT_LE(vs_ref, bf16 ? 0.3 : 0.03);  // measured 0.074 and 0.008
  // --kv-cache-dtype auto = the weights' dtype: K/V rounded too (measured 0.075 / 0.010).
  const auto got_half_kv = logits_of(half, ids, std::nullopt);
  const double vs_ref_half_kv = max_abs_diff(got_half_kv, ref->data);
  std::printf("%s weights + %s KV cache: max |diff| vs NumPy reference %.3f\n",
              bf16 ? "bf16" : "f16", bf16 ? "bf16" : "f16", vs_ref_half_kv);
  EXPECT_LE(vs_ref_half_kv, bf16 ? 0.3 : 0.03);
  // ... and the cache really holds 16-bit values: the logits differ from the f32-KV run.
  EXPECT_GT(max_abs_diff(got_half_kv, got), 1e-6);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfPrecision, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "bf16" : "f16"; });

}  // namespace
}  // namespace llmserve
