// llama-quantize's per-tensor rules (quant/quant_scheme.h): the types our plan gives the
// llama-q model are exactly the ones llama-quantize wrote (../shared/testdata/models/quantized/
// llama-q/manifest.json), and the rules that model does not exercise (use-more-bits layers of a
// deeper model, Q4_K_S, tied embeddings, fallbacks, 70B) as llama-quant.cpp states them.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "quant/quant_scheme.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

std::string llama_q(const std::string& file) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/quantized/llama-q/" + file;
}

std::vector<QuantTensor> tensors_of(const GgufFile& g) {
  std::vector<QuantTensor> out;
  for (const TensorView& t : g.tensors()) out.push_back({t.name, t.shape, t.dtype});
  return out;
}

TEST(QuantScheme, NamesAliasesAndFileTypes) {
  struct Want { const char* name; const char* canonical; DType base; uint32_t ftype; };
  const Want want[] = {{"Q8_0", "Q8_0", DType::kQ8_0, 7},       {"q4_0", "Q4_0", DType::kQ4_0, 2},
                       {"Q4_1", "Q4_1", DType::kQ4_1, 3},       {"Q5_0", "Q5_0", DType::kQ5_0, 8},
                       {"Q5_1", "Q5_1", DType::kQ5_1, 9},       {"Q4_K_S", "Q4_K_S", DType::kQ4_K, 14},
                       {"Q4_K_M", "Q4_K_M", DType::kQ4_K, 15},  {"Q4_K", "Q4_K_M", DType::kQ4_K, 15},
                       {"Q5_K_S", "Q5_K_S", DType::kQ5_K, 16},  {"Q5_K_M", "Q5_K_M", DType::kQ5_K, 17},
                       {"Q5_K", "Q5_K_M", DType::kQ5_K, 17},    {"Q6_K", "Q6_K", DType::kQ6_K, 18}};
  for (const Want& w : want) {
    auto s = find_quant_scheme(w.name);
    ASSERT_TRUE(s.has_value()) << w.name;
    EXPECT_EQ(s->name, w.canonical);
    EXPECT_EQ(s->base, w.base);
    EXPECT_EQ(s->file_type, w.ftype) << w.name;
    EXPECT_FALSE(s->pure);
  }
  for (const char* bad : {"Q2_K", "Q3_K_M", "IQ4_NL", "F16", "q4", ""})
    EXPECT_FALSE(find_quant_scheme(bad).has_value()) << bad;
  EXPECT_NE(quant_scheme_names().find("Q4_K_M"), std::string::npos);
}

TEST(QuantScheme, QuantizationFlagValues) {
  for (const char* pure : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}) {
    auto s = find_quantization_flag(pure);
    ASSERT_TRUE(s.has_value()) << pure;
    EXPECT_TRUE(s->pure) << pure;
  }
  EXPECT_EQ(find_quantization_flag("q4_k")->base, DType::kQ4_K);
  EXPECT_EQ(find_quantization_flag("q6_k")->base, DType::kQ6_K);
  for (const char* mix : {"q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s"}) {
    auto s = find_quantization_flag(mix);
    ASSERT_TRUE(s.has_value()) << mix;
    EXPECT_FALSE(s->pure) << mix;
  }
  EXPECT_EQ(find_quantization_flag("q4_k_m")->name, "Q4_K_M");
  for (const char* bad : {"Q4_K_M", "q4_k_l", "awq", "gguf", "q2_k", "f16", ""})
    EXPECT_FALSE(find_quantization_flag(bad).has_value()) << bad;
}

// Our plan over model-F32.gguf's tensors equals the per-tensor types llama-quantize chose.
TEST(QuantScheme, PlanEqualsLlamaQuantizeOnLlamaQ) {
  std::ifstream in(llama_q("manifest.json"));
  const auto manifest = nlohmann::json::parse(in);
  auto g = GgufFile::open(llama_q("model-F32.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<QuantTensor> tensors = tensors_of(*g);
  const QuantModelInfo info{"llama", 2, 8, 2};
  for (const char* type : {"Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    auto plan = plan_tensor_types(*find_quant_scheme(type), info, tensors);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const auto& want = manifest["files"][std::string("model-") + type + ".gguf"]["per_tensor"];
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].shape.size() < 2) {
        EXPECT_EQ((*plan)[i], DType::kF32) << tensors[i].name;  // norms stay F32
        continue;
      }
      EXPECT_EQ(dtype_ggml_name((*plan)[i]), want[tensors[i].name].get<std::string>())
          << type << " " << tensors[i].name;
    }
  }
}

/// A dense llama of n layers: token_embd, output (unless tied), per layer the usual tensors.
std::vector<QuantTensor> llama_tensors(int n_layers, int64_t dim, int64_t ffn, bool tied) {
  std::vector<QuantTensor> t;
  t.push_back({"token_embd.weight", {32000, dim}});
  t.push_back({"output_norm.weight", {dim}});
  if (!tied) t.push_back({"output.weight", {32000, dim}});
  for (int i = 0; i < n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"})
      t.push_back({p + n + ".weight", {dim, dim}});
    t.push_back({p + "attn_norm.weight", {dim}});
    t.push_back({p + "ffn_norm.weight", {dim}});
    t.push_back({p + "ffn_gate.weight", {ffn, dim}});
    t.push_back({p + "ffn_up.weight", {ffn, dim}});
    t.push_back({p + "ffn_down.weight", {dim, ffn}});
  }
  return t;
}

std::map<std::string, DType> plan_map(const char* scheme, const std::vector<QuantTensor>& t,
                                      QuantModelInfo info) {
  auto s = find_quant_scheme(scheme);
  auto plan = plan_tensor_types(*s, info, t);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  std::map<std::string, DType> m;
  for (size_t i = 0; plan.ok() && i < t.size(); ++i) m[t[i].name] = (*plan)[i];
  return m;
}

TEST(QuantScheme, UseMoreBitsLayersOfA32LayerModel) {
  const auto t = llama_tensors(32, 4096, 11008, false);
  const QuantModelInfo info{"llama", 32, 32, 32};
  // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
  auto more = [](int i) { return i < 4 || i >= 28 || (i - 4) % 3 == 2; };
  const auto m = plan_map("Q4_K_M", t, info), s = plan_map("Q4_K_S", t, info),
             m5 = plan_map("Q5_K_M", t, info);
  for (int i = 0; i < 32; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(m.at(p + "attn_v.weight"), more(i) ? DType::kQ6_K : DType::kQ4_K) << i;
    EXPECT_EQ(m.at(p + "ffn_down.weight"), more(i) ? DType::kQ6_K : DType::kQ4_K) << i;
    EXPECT_EQ(m5.at(p + "attn_v.weight"), more(i) ? DType::kQ6_K : DType::kQ5_K) << i;
    EXPECT_EQ(m5.at(p + "ffn_down.weight"), more(i) ? DType::kQ6_K : DType::kQ5_K) << i;
    EXPECT_EQ(s.at(p + "attn_v.weight"), i < 4 ? DType::kQ5_K : DType::kQ4_K) << i;
    EXPECT_EQ(s.at(p + "ffn_down.weight"), i < 32 / 8 ? DType::kQ5_K : DType::kQ4_K) << i;
    for (const char* n : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
      EXPECT_EQ(m.at(p + n + ".weight"), DType::kQ4_K);
      EXPECT_EQ(s.at(p + n + ".weight"), DType::kQ4_K);
    }
    EXPECT_EQ(m.at(p + "attn_norm.weight"), DType::kF32);
  }
  for (const auto* plan : {&m, &s, &m5}) {
    EXPECT_EQ(plan->at("output.weight"), DType::kQ6_K);
    EXPECT_EQ(plan->at("output_norm.weight"), DType::kF32);
  }
  EXPECT_EQ(m.at("token_embd.weight"), DType::kQ4_K);
  EXPECT_EQ(plan_map("Q8_0", t, info).at("output.weight"), DType::kQ8_0);
  EXPECT_EQ(plan_map("Q4_0", t, info).at("output.weight"), DType::kQ6_K);
  EXPECT_EQ(plan_map("Q4_0", t, info).at("blk.31.ffn_down.weight"), DType::kQ4_0);
}

TEST(QuantScheme, TiedEmbeddingsAreTreatedAsTheOutput) {
  const auto t = llama_tensors(2, 512, 1024, /*tied=*/true);
  const QuantModelInfo info{"llama", 2, 8, 8};
  EXPECT_EQ(plan_map("Q4_K_M", t, info).at("token_embd.weight"), DType::kQ6_K);
  EXPECT_EQ(plan_map("Q8_0", t, info).at("token_embd.weight"), DType::kQ8_0);
}

TEST(QuantScheme, PureGivesEveryMatrixTheBaseType) {
  const auto t = llama_tensors(8, 512, 1024, false);
  QuantScheme pure = *find_quantization_flag("q4_k");
  auto plan = plan_tensor_types(pure, {"llama", 8, 8, 8}, t);
  ASSERT_TRUE(plan.ok());
  for (size_t i = 0; i < t.size(); ++i)
    EXPECT_EQ((*plan)[i], t[i].shape.size() == 1 ? DType::kF32 : DType::kQ4_K) << t[i].name;
}

TEST(QuantScheme, RowLengthFallbacks) {
  // Rows of 896 values (Qwen2-0.5B's hidden size): whole 32-blocks, not whole 256-blocks.
  std::vector<QuantTensor> t = {{"token_embd.weight", {1000, 896}},
                                {"output.weight", {1000, 896}},
                                {"blk.0.attn_v.weight", {128, 896}},
                                {"blk.0.ffn_down.weight", {896, 4864}},
                                {"blk.0.ffn_up.weight", {4864, 100}}};
  const QuantModelInfo info{"qwen2", 1, 14, 2};
  auto m = plan_map("Q4_K_M", t, info);
  EXPECT_EQ(m.at("blk.0.ffn_down.weight"), DType::kQ6_K);  // layer 0 of 1: more bits, fits
  EXPECT_EQ(m.at("token_embd.weight"), DType::kQ5_0);       // Q4_K -> Q5_0 (896 % 256 != 0)
  EXPECT_EQ(m.at("output.weight"), DType::kQ8_0);           // rows not whole Q4_K blocks
  EXPECT_EQ(m.at("blk.0.attn_v.weight"), DType::kQ8_0);     // Q6_K -> Q8_0
  EXPECT_EQ(m.at("blk.0.ffn_up.weight"), DType::kF16);      // 100: no 32-block type fits
  EXPECT_EQ(plan_map("Q5_K_S", t, info).at("token_embd.weight"), DType::kQ5_1);
  // A 32-element type has no fallback: an error naming the tensor.
  auto bad = plan_tensor_types(*find_quant_scheme("Q8_0"), info, t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("blk.0.ffn_up.weight"), std::string::npos)
      << bad.status().message();
}

TEST(QuantScheme, SeventyBAttnVGetsQ5K) {
  const auto t = llama_tensors(80, 8192, 28672, false);
  const auto m = plan_map("Q4_K_S", t, {"llama", 80, 64, 8});
  EXPECT_EQ(m.at("blk.40.attn_v.weight"), DType::kQ5_K);  // Q4_K -> Q5_K for LLM_TYPE_70B
  EXPECT_EQ(m.at("blk.40.attn_q.weight"), DType::kQ4_K);
  const auto mha = plan_map("Q4_K_S", t, {"llama", 80, 64, 64});  // 65B (MHA): no bump
  EXPECT_EQ(mha.at("blk.40.attn_v.weight"), DType::kQ4_K);
}

TEST(QuantScheme, WhatIsQuantizable) {
  EXPECT_TRUE(tensor_is_quantizable({"blk.0.attn_q.weight", {64, 64}}));
  EXPECT_TRUE(tensor_is_quantizable({"blk.0.attn_k_b.weight", {16, 64, 32}}));  // 3-D
  EXPECT_FALSE(tensor_is_quantizable({"blk.0.attn_norm.weight", {64}}));
  EXPECT_FALSE(tensor_is_quantizable({"blk.0.attn_q.bias", {64}}));
  EXPECT_FALSE(tensor_is_quantizable({"blk.0.attn_q_a_norm.weight", {64, 1}}));
  EXPECT_FALSE(tensor_is_quantizable({"blk.0.ffn_gate_inp.weight", {8, 64}}));
  EXPECT_FALSE(tensor_is_quantizable({"rope_freqs.weight", {32}}));
}

}  // namespace
}  // namespace llmserve
