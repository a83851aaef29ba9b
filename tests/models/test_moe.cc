// Mixtures of experts (models/moe.h) on three tiny random models in tests/models/data, written
// with their reference logits by the independent float64 NumPy script
// scripts/references/tiny_models.py and checked by llama.cpp (scripts/references/
// llamacpp_reference.sh: CPU, flash attention off, F32 KV cache; it agrees with NumPy to
// 1.2e-6 on all three):
//   qwen3moe-tiny  Qwen3-MoE: 8 experts, top-2 renormalised, per-head q/k norms
//   qwen2moe-tiny  Qwen2-MoE: top-2 not renormalised, a shared expert with a sigmoid gate,
//                  q/k/v biases
//   mixtral-tiny   Mixtral: GGUF architecture `llama` with experts (Q/K rows permuted for
//                  llama.cpp's RoPE), HF block_sparse_moe.experts.E.w1/w2/w3
// Logits against NumPy from the GGUF (stacked ffn_*_exps experts) and the Hugging Face directory
// (per-expert tensors), flash and naive, whole and chunked prefill and single-token steps, two
// block sizes, and against llama.cpp; a token's logits independent of how its prompt is chunked
// (so of the other tokens sharing its experts in a step); quantized experts; one-line errors for
// a missing expert tensor and a misshapen one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gguf_rewrite.h"
#include "models/quantize_model.h"
#include "quant/quant_scheme.h"
#include "tiny_models.h"
#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

const std::string kData = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/";
const std::string kDir = kData + "qwen3moe-tiny/";
const char* const kModels[] = {"qwen3moe-tiny", "qwen2moe-tiny", "mixtral-tiny"};

std::vector<int32_t> sequence(const std::string& which) { return testing::tiny_sequence(which); }

std::vector<float> reference(const std::string& model, const std::string& seq, const std::string& who = "numpy") {
  return testing::tiny_reference(model, seq, who);
}

Expected<std::vector<float>> logits_of(const std::string& path, const std::vector<int32_t>& ids, int32_t chunk,
                                       int32_t block_size, const std::string& backend) {
  return testing::tiny_logits(path, ids, chunk, block_size, backend);
}

class MoeLogits : public ::testing::TestWithParam<testing::TinyCase> {};

TEST_P(MoeLogits, MatchNumpyReference) { testing::expect_matches_numpy(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Tiny, MoeLogits,
                         ::testing::ValuesIn(testing::tiny_cases({{"qwen3moe-tiny", "model.gguf"},
                                                                  {"qwen3moe-tiny", "hf"},
                                                                  {"qwen2moe-tiny", "model.gguf"},
                                                                  {"qwen2moe-tiny", "hf"},
                                                                  {"mixtral-tiny", "model.gguf"},
                                                                  {"mixtral-tiny", "hf"}},
                                                                 {"flash", "naive"})),
                         testing::tiny_case_name);

// llama.cpp's logits on the same GGUF files (its own loader, graph and kernels).
TEST(Moe, MatchLlamaCppOnTheSameFiles) {
  for (const char* m : kModels)
    for (const char* s : {"short", "long"}) {
      auto got = logits_of(kData + m + "/model.gguf", sequence(s), 2048, 16, "flash");
      ASSERT_TRUE(got.ok()) << got.status().message();
      const testing::Compare r = testing::compare(*got, reference(m, s, "llamacpp"), 512);
      std::printf("%s %s vs llama.cpp: max |diff| %.3e\n", m, s, r.max_diff);
      EXPECT_EQ(r.argmax_mismatches, 0) << m << " " << s;
      EXPECT_LE(r.max_diff, 1e-3) << m << " " << s;
    }
}

// Chunk 1 runs each expert's GEMM over one token; chunk 2048 over every token that chose it.
// The logits must be the same bits (one GEMM recipe whatever M, a token's weighted sum in its
// own rank order): docs/batch_invariance.md.
TEST(Moe, LogitsDoNotDependOnWhichTokensShareAnExpert) {
  for (const char* m : kModels) testing::expect_chunking_invariant(kData + m + "/model.gguf");
}

// A one-token step with a pool of at least k threads runs the layer's router and experts as one
// pool job, every expert GEMM on one thread (MoeMlp::experts_one_token); with one thread, or
// more threads than chosen experts, the grouped GEMMs. Both must give the bits of the whole
// prompt, for float and for quantized experts.
TEST(Moe, OneTokenStepsGiveTheSameBitsOnAnyThreadCount) {
  const auto ids = testing::tiny_sequence("long");
  const std::string dir = ::testing::TempDir() + "/moe_threads";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string model = kData + std::string("qwen3moe-tiny/model.gguf"), q = dir + "/q4_k_m.gguf";
  ASSERT_EQ(std::system((std::string(LLMSERVE_BIN) + " quantize " + model + " " + q +
                         " --type Q4_K_M > /dev/null 2>&1").c_str()), 0);
  for (const std::string& m : {kData + "qwen2moe-tiny/model.gguf", model, q}) {
    auto whole = testing::tiny_logits(m, ids, 2048, 16, "flash", 2);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    for (int32_t threads : {1, 2, 3}) {
      auto steps = testing::tiny_logits(m, ids, 1, 16, "flash", threads);
      ASSERT_TRUE(steps.ok()) << steps.status().message();
      EXPECT_EQ(testing::compare(*whole, *steps, 512).max_diff, 0.0) << m << ", " << threads << " threads";
    }
  }
  std::filesystem::remove_all(dir);
}

// Experts in quantized types (llmserve quantize: Q8_0, and Q4_K_M, whose 64-wide rows fall back
// to Q5_0 / Q8_0 as llama-quantize's do) through the quantized GEMMs, against the same model with
// each tensor dequantized to F32 (llmserve dequantize, itself checked bit for bit against gguf-py
// in tests/quant) through the float path. The router stays F32 (llama-quantize never quantizes
// ffn_gate_inp), so both pick the same experts; against the F32 original they would not have
// to (this model's router margins are 1.2e-3, below Q8_0's rounding).
TEST(Moe, QuantizedExpertsMatchTheirDequantizedWeights) {
  const auto ids = sequence("long");
  const std::string dir = ::testing::TempDir() + "/moe_quant";
  for (const char* m : kModels) {
    const std::string model = kData + m + "/model.gguf";
    auto src = GgufFile::open(model);
    ASSERT_TRUE(src.ok()) << src.status().message();
    for (const char* type : {"Q8_0", "Q4_K_M"}) {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      const std::string q = dir + "/q.gguf", deq = dir + "/deq";
      if (std::string(m) == "qwen2moe-tiny" && std::string(type) == "Q8_0") {
        // Its shared expert's down projection has rows of 48: no Q8_0 blocks, and Q8_0 has no
        // fallback (llama-quantize refuses the file the same way; Q4_K_M falls back to F16).
        auto r = std::system((std::string(LLMSERVE_BIN) + " quantize " + model + " " + q + " --type " + type +
                              " 2> " + dir + "/err.txt").c_str());
        EXPECT_NE(r, 0);
        std::ifstream in(dir + "/err.txt");
        std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_NE(err.find("ffn_down_shexp.weight"), std::string::npos) << err;
        continue;
      }
      ASSERT_EQ(std::system((std::string(LLMSERVE_BIN) + " quantize " + model + " " + q + " --type " + type +
                             " > /dev/null 2>&1").c_str()), 0);
      ASSERT_EQ(std::system((std::string(LLMSERVE_BIN) + " dequantize " + q + " --out-dir " + deq + " > /dev/null 2>&1").c_str()), 0);
      std::vector<testing::OutTensor> tensors;
      for (const TensorView& t : src->tensors()) {
        auto a = read_npy(deq + "/" + t.name + ".npy");
        ASSERT_TRUE(a.ok()) << a.status().message();
        tensors.push_back({t.name, t.shape, a->data});
      }
      testing::write_gguf(*src, tensors, dir + "/deq.gguf");
      auto quantized = logits_of(q, ids, 7, 16, "flash");
      auto dequantized = logits_of(dir + "/deq.gguf", ids, 7, 16, "flash");
      ASSERT_TRUE(quantized.ok() && dequantized.ok());
      const testing::Compare r = testing::compare(*quantized, *dequantized, 512);
      std::printf("%s %s experts vs their dequantized F32 weights: max |diff| %.3e\n", m, type, r.max_diff);
      EXPECT_LE(r.max_diff, 2e-3) << m << " " << type;
    }
  }
  std::filesystem::remove_all(dir);
}

// llama-quantize's per-tensor types for MoE files (its n_expert rules: an 8-expert model's attn_v
// and attn_k Q8_0, attn_output Q5_K for Q4_K_*, ffn_down "layers" read from the name),
// recorded by scripts/references/llama_quantize_types.py; and the same types from the HF
// directory, each per-expert tensor getting its stacked tensor's type.
TEST(Moe, QuantizationTypesEqualLlamaQuantize) {
  for (const char* m : kModels) {
    std::ifstream in(kData + m + "/llama_quantize_types.json");
    const nlohmann::json want = nlohmann::json::parse(in);
    for (const char* type : {"Q4_K_M", "Q5_K_M", "Q4_K_S"}) {
      auto scheme = find_quant_scheme(type);
      ASSERT_TRUE(scheme.has_value()) << type;
      for (const char* f : {"/model.gguf", "/hf"}) {
        auto file = ModelFile::open(kData + m + f);
        ASSERT_TRUE(file.ok()) << file.status().message();
        auto plan = plan_model_quantization(**file, *scheme);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        for (const TensorPlan& p : *plan) {
          std::string name = p.gguf_name;  // blk.N.ffn_down.E.weight -> blk.N.ffn_down_exps.weight
          int layer = 0, expert = 0, end = 0;
          char what[16];
          if (std::sscanf(name.c_str(), "blk.%d.ffn_%15[a-z].%d.weight%n", &layer, what, &expert, &end) == 3 &&
              end == static_cast<int>(name.size()))
            name = "blk." + std::to_string(layer) + ".ffn_" + what + "_exps.weight";
          if (name.find("ffn_gate_inp_shexp") != std::string::npos) continue;  // [64] vs HF [1, 64]
          ASSERT_TRUE(want[type].contains(name)) << m << f << " " << name;
          EXPECT_EQ(dtype_ggml_id(p.type), want[type][name].get<int>()) << m << f << " " << type << " " << name;
        }
      }
    }
  }
}

// Expert widths llama.cpp defaults when the keys are absent (qwen2moe.cpp, qwen3moe.cpp):
// expert_feed_forward_length = feed_forward_length / expert_used_count, the shared expert's
// expert_shared_feed_forward_length = feed_forward_length. The same logits as with the keys.
TEST(Moe, ExpertWidthKeysDefaultAsLlamaCpp) {
  const auto ids = sequence("short");
  for (const char* m : {"qwen3moe-tiny", "qwen2moe-tiny"}) {
    auto g = GgufFile::open(kData + m + "/model.gguf");
    ASSERT_TRUE(g.ok()) << g.status().message();
    const std::string arch = std::string(m).substr(0, std::string(m).find('-'));
    auto meta = g->metadata();
    meta.erase(arch + ".expert_feed_forward_length");
    meta[arch + ".feed_forward_length"] = GgufValue{GgufType::kUint32, int64_t{64}};  // 2 used x 32
    if (arch == "qwen2moe") {
      meta.erase(arch + ".expert_shared_feed_forward_length");
      // The shared expert (48 wide) then needs feed_forward_length 48: a file whose experts are
      // 24 wide each with 2 used would be another model, so only the shared default is checked
      // here, on a copy with feed_forward_length 48 and the expert width kept.
      meta[arch + ".feed_forward_length"] = GgufValue{GgufType::kUint32, int64_t{48}};
      meta[arch + ".expert_feed_forward_length"] = GgufValue{GgufType::kUint32, int64_t{32}};
    }
    const std::string path = ::testing::TempDir() + "/" + m + "_defaults.gguf";
    testing::write_gguf(*g, testing::tensors_of(*g), path, &meta);
    auto got = logits_of(path, ids, 2048, 16, "flash");
    ASSERT_TRUE(got.ok()) << m << ": " << got.status().message();
    auto want = logits_of(kData + m + "/model.gguf", ids, 2048, 16, "flash");
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(testing::compare(*got, *want, 512).max_diff, 0.0) << m;
  }
}

// A missing expert projection and a misshapen one: one line naming the file and the tensor.
TEST(Moe, BadExpertTensorsAreOneLineErrors) {
  auto g = GgufFile::open(kDir + "model.gguf");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string dir = ::testing::TempDir();
  {
    std::vector<testing::OutTensor> t = testing::tensors_of(*g);
    std::erase_if(t, [](const testing::OutTensor& x) { return x.name == "blk.1.ffn_up_exps.weight"; });
    const std::string path = dir + "/qwen3moe_missing.gguf";
    testing::write_gguf(*g, t, path);
    auto file = ModelFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    auto got = compute_prompt_logits(**file, {1, 2}, {});
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("blk.1.ffn_up_exps.weight"), std::string::npos) << got.status().message();
    EXPECT_EQ(got.status().message().find('\n'), std::string::npos);
  }
  {
    std::vector<testing::OutTensor> t = testing::tensors_of(*g);
    for (auto& x : t)
      if (x.name == "blk.0.ffn_down_exps.weight") {  // 7 experts instead of 8
        x.shape[0] = 7;
        x.data.resize(x.data.size() / 8 * 7);
      }
    const std::string path = dir + "/qwen3moe_shape.gguf";
    testing::write_gguf(*g, t, path);
    auto file = ModelFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    auto got = compute_prompt_logits(**file, {1, 2}, {});
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("blk.0.ffn_down_exps.weight"), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find("[7, 64, 32]"), std::string::npos) << got.status().message();
  }
}

}  // namespace
}  // namespace llmserve
