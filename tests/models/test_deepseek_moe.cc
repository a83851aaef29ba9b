// DeepSeek mixtures of experts (models/deepseek2.cc with models/moe.h and moe_router.h) on two
// tiny random models in tests/models/data, written with their reference logits by the
// independent float64 NumPy script scripts/references/deepseek_moe_models.py (transformers'
// semantics) and, where llama.cpp loads the file, run by llama.cpp
// (scripts/references/llamacpp_reference.sh: CPU, flash attention off, F32 KV cache):
//   deepseek2moe-tiny  DeepSeek-V2-Lite's shape: q_proj without a LoRA, layer 0 dense, then
//                      8 routed experts (softmax, greedy top-2, not renormalised, x 2.0) and
//                      2 ungated shared experts
//   deepseek3-tiny     DeepSeek-V3's router: sigmoid scores, e_score_correction_bias for the
//                      selection, 16 experts in 4 groups (top-2 sums, 2 groups kept), top-4
//                      renormalised x 2.5, one shared expert; q_a / q_b LoRA
//   deepseek2-yarn-tiny  deepseek2moe-tiny's shape with DeepSeek's YaRN (factor 4 over an
//                      original 64 positions, mscale = mscale_all_dim = 0.707, as V2-Lite): the
//                      160-token `long` sequence runs past the original context
// Logits against NumPy from the GGUF (stacked experts, split attn_k_b / attn_v_b) and the Hugging
// Face directory (per-expert tensors, kv_b_proj), flash and naive, chunked and not, one token per
// step, block size 1; against llama.cpp; bit-identical logits however the prompt is chunked; and
// one-line errors for routing keys we do not implement.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "gguf_rewrite.h"
#include "runner/prompt_logits.h"
#include "tiny_models.h"

namespace llmserve {
namespace {

const std::string kData = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/";
const char* const kModels[] = {"deepseek2moe-tiny", "deepseek3-tiny", "deepseek2-yarn-tiny"};

class DeepseekMoeLogits : public ::testing::TestWithParam<testing::TinyCase> {};

TEST_P(DeepseekMoeLogits, MatchNumpyReference) { testing::expect_matches_numpy(GetParam()); }

std::vector<testing::TinyCase> cases() {
  std::vector<std::pair<std::string, std::string>> models;
  for (const char* m : kModels)
    for (const char* path : {"model.gguf", "hf"}) models.emplace_back(m, path);
  return testing::tiny_cases(models, {"flash", "naive"});
}

INSTANTIATE_TEST_SUITE_P(Tiny, DeepseekMoeLogits, ::testing::ValuesIn(cases()), testing::tiny_case_name);

// llama.cpp's logits on the same GGUF, for the models it loads (README of each folder).
TEST(DeepseekMoe, MatchLlamaCppOnTheSameFiles) {
  int compared = 0;
  for (const char* m : kModels) {
    if (!std::filesystem::exists(kData + m + "/llamacpp_logits_short.npy")) continue;  // see its README
    for (const char* s : {"short", "long"}) {
      auto got = testing::tiny_logits(kData + m + "/model.gguf", testing::tiny_sequence(s), 2048, 16, "flash");
      ASSERT_TRUE(got.ok()) << got.status().message();
      const testing::Compare r = testing::compare(*got, testing::tiny_reference(m, s, "llamacpp"), 512);
      std::printf("%s %s vs llama.cpp: max |diff| %.3e\n", m, s, r.max_diff);
      EXPECT_EQ(r.argmax_mismatches, 0) << m << " " << s;
      EXPECT_LE(r.max_diff, 1e-3) << m << " " << s;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6);  // every model (the V2 ones via a copy with q_lora_rank = 0: READMEs)
}

// Batch invariance: a token's logits are the same bits however its prompt is split into steps.
TEST(DeepseekMoe, LogitsDoNotDependOnWhichTokensShareAnExpert) {
  for (const char* m : kModels) testing::expect_chunking_invariant(kData + m + "/model.gguf");
}

// The routing keys as configured: the model's own config is read as transformers would.
TEST(DeepseekMoe, ConfigReadsTheRouter) {
  auto v3 = ModelFile::open(kData + std::string("deepseek3-tiny/hf"));
  ASSERT_TRUE(v3.ok()) << v3.status().message();
  const ModelConfig& c = (*v3)->config();
  EXPECT_EQ(c.n_experts, 16);
  EXPECT_EQ(c.n_experts_used, 4);
  EXPECT_EQ(c.n_dense_leading_layers, 1);
  EXPECT_EQ(c.moe_scoring, MoeScoring::kSigmoid);
  EXPECT_EQ(c.n_expert_groups, 4);
  EXPECT_EQ(c.n_expert_groups_used, 2);
  EXPECT_EQ(c.moe_group_score, MoeGroupScore::kTop2Sum);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.shared_expert_gated);
  EXPECT_EQ(c.shared_expert_ffn_dim, 32);
  auto g3 = ModelFile::open(kData + std::string("deepseek3-tiny/model.gguf"));
  ASSERT_TRUE(g3.ok()) << g3.status().message();
  const ModelConfig& gc = (*g3)->config();
  EXPECT_EQ(gc.moe_scoring, MoeScoring::kSigmoid);
  EXPECT_EQ(gc.n_expert_groups, 4);
  EXPECT_EQ(gc.n_expert_groups_used, 2);
  EXPECT_FLOAT_EQ(gc.routed_scaling_factor, 2.5f);
  EXPECT_EQ(gc.n_dense_leading_layers, 1);
  auto v2 = ModelFile::open(kData + std::string("deepseek2moe-tiny/model.gguf"));
  ASSERT_TRUE(v2.ok()) << v2.status().message();
  EXPECT_EQ((*v2)->config().moe_scoring, MoeScoring::kSoftmax);
  EXPECT_FALSE((*v2)->config().norm_topk_prob);
  EXPECT_FLOAT_EQ((*v2)->config().routed_scaling_factor, 2.0f);
  EXPECT_EQ((*v2)->config().shared_expert_ffn_dim, 64);
}

// DeepSeek's YaRN as modeling_deepseek.py computes it (llama.cpp, vLLM and SGLang agree):
// cos and sin times get_mscale(4, 0.707) / get_mscale(4, 0.707) = 1, the softmax scale times
// get_mscale(4, 0.707)^2 = (0.1 * 0.707 * ln 4 + 1)^2 = 1.2056281810. From the GGUF, mscale_all_dim
// comes back from yarn_log_multiplier = 0.1 * 0.707 stored as f32 (0.0707 / 0.1 = 0.70699997).
TEST(DeepseekMoe, YarnScalesTheSoftmax) {
  for (const char* path : {"deepseek2-yarn-tiny/hf", "deepseek2-yarn-tiny/model.gguf"}) {
    auto f = ModelFile::open(kData + path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    const ModelConfig& c = (*f)->config();
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kYarn) << path;
    EXPECT_FLOAT_EQ(c.rope_scaling.factor, 4.0f) << path;
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64) << path;
    EXPECT_NEAR(c.rope_attention_factor(), 1.0f, 1e-7) << path;
    EXPECT_NEAR(c.softmax_scale_factor(), 1.2056281810, 1e-6) << path;
    const std::vector<float> inv = c.rope_inv_freq();  // qk_rope_head_dim 8: 4 frequencies
    ASSERT_EQ(inv.size(), 4u);
    const double want[] = {1.0, 0.0625, 0.0025, 0.00025};  // the reference's (README)
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(inv[i], want[i], 1e-7 * want[i] + 1e-9) << path << " " << i;
  }
}

/// A copy of a model's HF directory with `edit` applied to its config.json.
std::string edited_hf(const std::string& model, const std::string& name,
                      const std::function<void(nlohmann::json&)>& edit) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string src = kData + model + "/hf/";
  std::filesystem::copy_file(src + "model.safetensors", dir / "model.safetensors");
  std::ifstream in(src + "config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  std::ofstream(dir / "config.json") << j.dump(1);
  return dir.string();
}

// Routing we do not implement is refused naming the key, never run another way.
TEST(DeepseekMoe, UnsupportedRoutingIsAOneLineError) {
  const std::pair<const char*, std::function<void(nlohmann::json&)>> edits[] = {
      {"topk_method", [](nlohmann::json& j) { j["topk_method"] = "sinkhorn"; }},
      {"scoring_func", [](nlohmann::json& j) { j["scoring_func"] = "softplus"; }},
      {"moe_layer_freq", [](nlohmann::json& j) { j["moe_layer_freq"] = 2; }},
      {"routed_scaling_factor", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1e30; }},  // float overflow
      {"rope_interleave", [](nlohmann::json& j) { j["rope_interleave"] = false; }},
  };
  for (const auto& [key, edit] : edits) {
    const std::string dir = edited_hf("deepseek3-tiny", std::string("ds3_") + key, edit);
    auto file = ModelFile::open(dir);
    ASSERT_FALSE(file.ok()) << key;
    EXPECT_NE(file.status().message().find(key), std::string::npos) << file.status().message();
    EXPECT_EQ(file.status().message().find('\n'), std::string::npos);
  }
  // Groups that cannot hold the experts a token uses.
  const std::string dir = edited_hf("deepseek3-tiny", "ds3_groups", [](nlohmann::json& j) {
    j["topk_group"] = 1;
    j["num_experts_per_tok"] = 5;
  });
  auto file = ModelFile::open(dir);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("expert groups"), std::string::npos) << file.status().message();
  // A GGUF with an unknown gating function.
  auto g = GgufFile::open(kData + std::string("deepseek3-tiny/model.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto meta = g->metadata();
  meta["deepseek2.expert_gating_func"] = GgufValue{GgufType::kUint32, int64_t{4}};
  const std::string path = ::testing::TempDir() + "/ds3_gating.gguf";
  testing::write_gguf(*g, testing::tensors_of(*g), path, &meta);
  auto gf = ModelFile::open(path);
  ASSERT_FALSE(gf.ok());
  EXPECT_NE(gf.status().message().find("expert_gating_func"), std::string::npos) << gf.status().message();
  // Out-of-range GGUF values are named, not clamped or overflowed.
  const std::pair<const char*, GgufValue> bad[] = {
      {"deepseek2.expert_weights_scale", GgufValue{GgufType::kFloat32, 1e30}},
      {"deepseek2.leading_dense_block_count", GgufValue{GgufType::kUint32, int64_t{4}}},
      {"deepseek2.expert_shared_count", GgufValue{GgufType::kUint32, int64_t{(1 << 27) + 2}}},
  };
  for (const auto& [key, value] : bad) {
    auto m = g->metadata();
    m[key] = value;
    testing::write_gguf(*g, testing::tensors_of(*g), path, &m);
    auto f = ModelFile::open(path);
    ASSERT_FALSE(f.ok()) << key;
    EXPECT_NE(f.status().message().find(key), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace llmserve
