// Dense llama-family variants (models/llama.cc) on tiny random models in tests/models/data, each
// with float64 NumPy reference logits (scripts/references/tiny_models.py) and llama.cpp's on the
// same GGUF (scripts/references/llamacpp_reference.sh):
//   qwen3-yarn-tiny  YaRN RoPE scaling (config/model_config.h RopeScalingType::kYarn;
//                    transformers' _compute_yarn_parameters, Peng et al. 2023): factor 4,
//                    original context 64, so the ramp keeps pair 0, blends pairs 1-2 and
//                    interpolates 3-7, and cos/sin carry the attention factor 0.1 ln 4 + 1; the
//                    sequences run past the original 64 positions
//   phi3-tiny        Phi-3 / Phi-4-mini: fused qkv_proj (GGUF attn_qkv) and gate_up_proj (GGUF
//                    ffn_up, gate then up), partial rotary factor 0.75 (12 of 16 dims rotated)
// GGUF and HF, flash and naive, chunked and not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "gguf_rewrite.h"
#include "model_test_util.h"
#include "tiny_models.h"

namespace llmserve {
namespace {

TEST(Yarn, ConfigFromBothFormats) {
  const std::string kModel = "qwen3-yarn-tiny";
  for (const char* f : {"model.gguf", "hf"}) {
    auto file = ModelFile::open(testing::tiny_model_dir(kModel) + f);
    ASSERT_TRUE(file.ok()) << file.status().message();
    const ModelConfig& c = (*file)->config();
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kYarn) << f;
    EXPECT_EQ(c.rope_scaling.factor, 4.0f) << f;
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64) << f;
    EXPECT_NEAR(c.rope_attention_factor(), 0.1 * std::log(4.0) + 1.0, 1e-6) << f;
    // The script's inv_freq (tests/models/data/qwen3-yarn-tiny/shape.json): pair 0 kept, 1-2
    // blended, 3-7 divided by 4.
    const std::vector<float> inv = c.rope_inv_freq();
    const double want[] = {1.0, 0.23717082451262847, 0.05, 0.007905694150420948, 0.0025,
                           0.000790569415042095, 0.00025, 7.905694150420948e-05};
    ASSERT_EQ(inv.size(), 8u);
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(inv[i], want[i], want[i] * 1e-6) << f << " pair " << i;
  }
}

// GGUF rope.scaling.type "none" means no scaling whatever rope.scaling.factor says (llama.cpp:
// "never scale if scaling type is none"); yarn without a factor is an error naming the key.
TEST(Yarn, GgufTypeNoneIgnoresTheFactorAndYarnNeedsOne) {
  auto g = GgufFile::open(testing::tiny_model_dir("qwen3-yarn-tiny") + "model.gguf");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string path = ::testing::TempDir() + "/yarn_none.gguf";
  testing::rewrite_gguf(*g, path, testing::Rewrite::kF32,
                        {{"qwen3.rope.scaling.type", GgufValue{GgufType::kString, std::string("none")}}});
  auto file = ModelFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->config().rope_scaling.type, RopeScalingType::kNone);
  auto meta = g->metadata();
  meta.erase("qwen3.rope.scaling.factor");
  testing::write_gguf(*g, testing::tensors_of(*g), path, &meta);
  auto bad = ModelFile::open(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rope.scaling.factor is missing"), std::string::npos) << bad.status().message();
}

TEST(Phi3, PartialRotaryFromBothFormats) {
  for (const char* f : {"model.gguf", "hf"}) {
    auto file = ModelFile::open(testing::tiny_model_dir("phi3-tiny") + f);
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ((*file)->config().architecture, "phi3") << f;
    EXPECT_EQ((*file)->config().rope_dim(), 12) << f;
    EXPECT_EQ((*file)->config().head_dim, 16) << f;
  }
}

class TinyDense : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyDense, LogitsMatchNumpyAndLlamaCpp) {
  const std::string kModel = GetParam();
  for (const char* f : {"model.gguf", "hf"})
    for (const char* backend : {"flash", "naive"})
      for (const char* seq : {"short", "long"})
        for (int32_t chunk : {2048, 7}) {
          auto got = testing::tiny_logits(testing::tiny_model_dir(kModel) + f, testing::tiny_sequence(seq), chunk, 16,
                                          backend);
          ASSERT_TRUE(got.ok()) << got.status().message();
          for (const char* who : {"numpy", "llamacpp"}) {
            if (std::string(who) == "llamacpp" && std::string(f) != "model.gguf") continue;
            const testing::Compare r = testing::compare(*got, testing::tiny_reference(kModel, seq, who), 512);
            std::printf("%s %s %s %s chunk %d vs %s: max |diff| %.3e\n", kModel.c_str(), f, backend, seq, chunk, who,
                        r.max_diff);
            EXPECT_EQ(r.argmax_mismatches, 0) << f << " " << backend << " " << seq << " " << who;
            EXPECT_LE(r.max_diff, 1e-3) << f << " " << backend << " " << seq << " " << who;
          }
        }
}

INSTANTIATE_TEST_SUITE_P(Models, TinyDense, ::testing::Values("qwen3-yarn-tiny", "phi3-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace llmserve
