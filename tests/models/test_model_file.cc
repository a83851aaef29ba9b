// ModelFile: Hugging Face directories and GGUF files of every supported architecture give the
// same ModelConfig (checked against each synthetic model's shape.json, written by the tool
// that made the models); inconsistent config.json / checkpoints give one-line errors naming
// the file and the key or tensor; rope_scaling, generation_config.json and sliding windows.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gguf_rewrite.h"
#include "models/hf_config.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "llmserve_model_file_XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

/// An HF directory: `model`'s config.json passed through `edit`, and its model.safetensors
/// (symlinked, or re-written with `edit_header` applied to the safetensors JSON header).
struct HfCopy {
  TempDir dir;
  HfCopy(const std::string& model, const std::function<void(json&)>& edit,
         const std::function<void(json&)>& edit_header = nullptr) {
    json cfg = read_json(synth(model + "/hf/config.json"));
    if (edit) edit(cfg);
    write_text(dir.path / "config.json", cfg.dump(2));
    const std::string st = synth(model + "/hf/model.safetensors");
    if (!edit_header) {
      fs::create_symlink(st, dir.path / "model.safetensors");
      return;
    }
    std::ifstream in(st, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    json h = json::parse(std::string(bytes.data() + 8, n));
    edit_header(h);
    std::string hs = h.dump();
    while (hs.size() % 8) hs.push_back(' ');
    const uint64_t hn = hs.size();
    std::ofstream out(dir.path / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(&hn), 8);
    out.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    out.write(bytes.data() + 8 + n, static_cast<std::streamsize>(bytes.size() - 8 - n));
  }
  std::string path() const { return dir.path.string(); }
};

/// Opens the model and builds it; returns the first error's message ("" if both succeed).
std::string load_error(const std::string& path) {
  auto f = ModelFile::open(path);
  if (!f.ok()) return f.status().message();
  auto m = create_model(**f);
  if (!m.ok()) return m.status().message();
  return "";
}

void expect_error(const std::string& path, const std::vector<std::string>& needles) {
  const std::string msg = load_error(path);
  ASSERT_FALSE(msg.empty()) << "expected an error for " << path;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------
// Both formats against shape.json.

class SyntheticConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticConfig, GgufAndHfMatchShapeJson) {
  const std::string m = GetParam();
  const json shape = read_json(synth(m + "/shape.json"));
  std::vector<std::string> formats = {"model.gguf"};
  if (fs::exists(synth(m + "/hf"))) formats.push_back("hf");
  for (const std::string& f : formats) {
    SCOPED_TRACE(m + "/" + f);
    auto file = ModelFile::open(synth(m + "/" + f));
    ASSERT_TRUE(file.ok()) << file.status().message();
    const ModelConfig& c = (*file)->config();
    EXPECT_EQ(c.architecture, shape["arch"].get<std::string>());
    EXPECT_EQ(c.vocab_size, shape["vocab"].get<int>());
    EXPECT_EQ(c.dim, shape["dim"].get<int>());
    EXPECT_EQ(c.n_layers, shape["n_layers"].get<int>());
    EXPECT_EQ(c.ffn_dim, shape["ffn"].get<int>());
    EXPECT_EQ(c.max_position_embeddings, shape["ctx"].get<int>());
    EXPECT_EQ(c.n_heads, shape["n_heads"].get<int>());
    EXPECT_FLOAT_EQ(c.rms_norm_eps, shape["eps"].get<float>());
    EXPECT_FLOAT_EQ(c.rope_theta, shape["rope_theta"].get<float>());
    EXPECT_EQ(c.tie_word_embeddings, shape.value("tied", false));
    EXPECT_EQ(c.attention_bias, shape.value("qkv_bias", false));
    EXPECT_EQ(c.qk_norm, shape.value("qk_norm", false));
    if (shape.contains("kv_lora")) {
      EXPECT_EQ(c.attention_type(), "MLA");
      EXPECT_EQ(c.kv_lora_rank, shape["kv_lora"].get<int>());
      EXPECT_EQ(c.q_lora_rank, shape["q_lora"].get<int>());
      EXPECT_EQ(c.qk_nope_head_dim, shape["qk_nope"].get<int>());
      EXPECT_EQ(c.qk_rope_head_dim, shape["qk_rope"].get<int>());
      EXPECT_EQ(c.v_head_dim, shape["v_head"].get<int>());
      EXPECT_EQ(c.n_kv_heads, 1);
      const KvCacheSpec spec = c.kv_cache_spec();
      EXPECT_TRUE(spec.v_shares_k);
      EXPECT_EQ(spec.head_size, shape["kv_lora"].get<int>() + shape["qk_rope"].get<int>());
      EXPECT_EQ(c.rope_style, RopeStyle::kAdjacentPairs);
    } else {
      EXPECT_EQ(c.n_kv_heads, shape["n_kv_heads"].get<int>());
      EXPECT_EQ(c.head_dim, shape["head_dim"].get<int>());
      EXPECT_FALSE(c.kv_cache_spec().v_shares_k);
      // llama.cpp permutes llama Q/K for adjacent pairs; HF and qwen keep rotate-half.
      const bool adjacent = f == "model.gguf" && c.architecture == "llama";
      EXPECT_EQ(c.rope_style, adjacent ? RopeStyle::kAdjacentPairs : RopeStyle::kRotateHalf);
    }
    const GenerationConfig& g = (*file)->generation_config();
    if (f == "hf") {  // config.json's ids (no generation_config.json in these folders)
      EXPECT_EQ(g.bos_token_id, 1);
      EXPECT_EQ(g.eos_token_ids, std::vector<int32_t>{2});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SyntheticConfig,
                         ::testing::Values("llama-mha", "llama-gqa", "llama-mqa",
                                           "qwen2-gqa-bias", "qwen3-qknorm", "deepseek2-mla"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(HfNames, MapBothWays) {
  EXPECT_EQ(gguf_name_for_hf("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.12.self_attn.kv_a_proj_with_mqa.weight"),
            "blk.12.attn_kv_a_mqa.weight");
  EXPECT_EQ(gguf_name_for_hf("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.x.mlp.down_proj.weight"), std::nullopt);
  EXPECT_EQ(gguf_name_for_hf("model.layers.0.mlp.experts.0.up_proj.weight"), "blk.0.ffn_up.0.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.2.block_sparse_moe.experts.11.w2.weight"), "blk.2.ffn_down.11.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.2.block_sparse_moe.experts.1.w4.weight"), std::nullopt);
  EXPECT_EQ(gguf_name_for_hf("model.layers.1.mlp.shared_expert_gate.weight"), "blk.1.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(hf_name_for_gguf("blk.5.ffn_gate.3.weight"), "model.layers.5.mlp.experts.3.gate_proj.weight");
  EXPECT_EQ(hf_name_for_gguf("blk.5.ffn_gate.x.weight"), std::nullopt);
  EXPECT_EQ(hf_name_for_gguf("blk.7.attn_q.bias"), "model.layers.7.self_attn.q_proj.bias");
  EXPECT_EQ(hf_name_for_gguf("token_embd.weight"), "model.embed_tokens.weight");
}

// ---------------------------------------------------------------------------------------
// Bad config.json: one line naming config.json and the key.

TEST(HfConfigErrors, NameTheFileAndTheKey) {
  {
    TempDir d;
    write_text(d.path / "config.json", "{\"hidden_size\": ");
    expect_error(d.path.string(), {"config.json", "invalid JSON"});
  }
  {
    TempDir d;  // a directory that is not a model
    expect_error(d.path.string(), {"no config.json"});
  }
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {[](json& c) { c.erase("hidden_size"); }, {"config.json", "hidden_size"}},
      {[](json& c) { c["hidden_size"] = "128"; }, {"hidden_size", "integer"}},
      {[](json& c) { c["num_hidden_layers"] = -2; }, {"num_hidden_layers", "-2"}},
      {[](json& c) { c["rms_norm_eps"] = "tiny"; }, {"rms_norm_eps"}},
      {[](json& c) {
         c["model_type"] = "gpt2";
         c["architectures"] = {"GPT2LMHeadModel"};
       },
       {"config.json", "gpt2", "unsupported architecture"}},
      {[](json& c) { c["architectures"] = {"LlamaForSequenceClassification"}; },
       {"LlamaForSequenceClassification"}},
      {[](json& c) { c["num_key_value_heads"] = 3; }, {"num_key_value_heads", "3"}},
      {[](json& c) { c["hidden_act"] = "gelu"; }, {"hidden_act", "gelu"}},
      {[](json& c) { c["mlp_bias"] = true; }, {"mlp_bias"}},
      {[](json& c) { c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}}; },
       {"longrope", "long_factor"}},
      {[](json& c) { c["rope_scaling"] = {{"factor", 4.0}}; }, {"rope_scaling", "rope_type"}},
      {[](json& c) { c["partial_rotary_factor"] = 1.5; }, {"partial_rotary_factor", "1.5"}},
      {[](json& c) { c["partial_rotary_factor"] = 0.1875; }, {"partial_rotary_factor", "even"}},
      {[](json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", -4.0}}; },
       {"rope_scaling", "factor"}},
      {[](json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 0}}; },
       {"beta_fast"}},
      {[](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}}; }, {"factor"}},
      {[](json& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; },
       {"low_freq_factor"}},
      {[](json& c) { c["rope_theta"] = -1.0; }, {"rope_theta"}},
      // Consistent JSON that disagrees with the tensors.
      {[](json& c) { c["vocab_size"] = 1000; }, {"model.embed_tokens.weight", "1000"}},
      {[](json& c) { c["hidden_size"] = 64; }, {"model.embed_tokens.weight"}},
      {[](json& c) { c["num_hidden_layers"] = 1; }, {"model.layers.1.", "num_hidden_layers"}},
      {[](json& c) { c["num_hidden_layers"] = 3; }, {"missing tensor", "model.layers.2."}},
      {[](json& c) { c["intermediate_size"] = 100; }, {"model.layers.0.mlp.gate_proj.weight"}},
      {[](json& c) { c["head_dim"] = 32; }, {"model.layers.0.self_attn.q_proj.weight"}},
      {[](json& c) { c["tie_word_embeddings"] = "yes"; }, {"tie_word_embeddings"}},
      {[](json& c) { c["attention_bias"] = true; }, {"missing tensor", "q_proj.bias"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    HfCopy copy("llama-gqa", cases[i].edit);
    expect_error(copy.path(), cases[i].needles);
  }
}

TEST(HfConfigErrors, DeepseekMoeKeysAndBias) {
  TempDir d;
  json c = {{"architectures", {"DeepseekV2ForCausalLM"}},
            {"model_type", "deepseek_v2"},
            {"hidden_size", 128},
            {"intermediate_size", 352},
            {"num_attention_heads", 4},
            {"num_hidden_layers", 4},
            {"vocab_size", 512},
            {"kv_lora_rank", 32},
            {"q_lora_rank", nullptr},
            {"qk_nope_head_dim", 16},
            {"qk_rope_head_dim", 8},
            {"v_head_dim", 16},
            {"n_routed_experts", 8},
            {"first_k_dense_replace", 1}};
  write_text(d.path / "config.json", c.dump());
  expect_error(d.path.string(), {"config.json", "num_experts_per_tok"});  // an MoE layer needs its keys
  c["num_experts_per_tok"] = 2;
  c["moe_intermediate_size"] = 32;
  c["moe_layer_freq"] = 2;
  write_text(d.path / "config.json", c.dump());
  expect_error(d.path.string(), {"config.json", "moe_layer_freq"});
  c.erase("moe_layer_freq");
  c["kv_lora_rank"] = 32;
  c.erase("kv_lora_rank");
  write_text(d.path / "config.json", c.dump());
  expect_error(d.path.string(), {"kv_lora_rank"});
}

// ---------------------------------------------------------------------------------------
// Bad safetensors contents: the error names the HF tensor.

TEST(HfTensorErrors, NameTheTensor) {
  {  // a missing tensor
    HfCopy copy("llama-gqa", nullptr,
                [](json& h) { h.erase("model.layers.1.self_attn.q_proj.weight"); });
    expect_error(copy.path(), {"missing tensor", "model.layers.1.self_attn.q_proj.weight"});
  }
  {  // a transposed shape (same byte size)
    HfCopy copy("llama-gqa", nullptr, [](json& h) {
      h["model.layers.0.mlp.gate_proj.weight"]["shape"] = {128, 352};
    });
    expect_error(copy.path(), {"model.layers.0.mlp.gate_proj.weight", "[128, 352]",
                               "[352, 128]"});
  }
  {  // an unsupported dtype
    HfCopy copy("llama-gqa", nullptr, [](json& h) {
      json& t = h["model.layers.0.input_layernorm.weight"];
      t["dtype"] = "I32";
    });
    expect_error(copy.path(), {"model.layers.0.input_layernorm.weight", "I32"});
  }
  {  // a tensor the architecture as configured does not use (an expert in a dense config)
    HfCopy copy("llama-gqa", nullptr, [](json& h) {
      h["model.layers.0.mlp.experts.0.up_proj.weight"] = h["model.layers.0.mlp.up_proj.weight"];
    });
    expect_error(copy.path(), {"model.layers.0.mlp.experts.0.up_proj.weight"});
  }
  {  // biases in the checkpoint that the config does not declare
    HfCopy copy("qwen2-gqa-bias", [](json& c) {
      c["model_type"] = "llama";
      c["architectures"] = {"LlamaForCausalLM"};
      c.erase("attention_bias");
    });
    expect_error(copy.path(), {"attention_bias", "model.layers.0.self_attn.q_proj.bias"});
  }
  {  // q/k norms in a checkpoint labelled llama: never silently ignored
    HfCopy copy("qwen3-qknorm", [](json& c) {
      c["model_type"] = "llama";
      c["architectures"] = {"LlamaForCausalLM"};
    });
    expect_error(copy.path(), {"_norm.weight", "not used by the llama architecture"});
  }
}

// ---------------------------------------------------------------------------------------
// GGUF metadata the engine cannot run.

TEST(GgufErrors, MoeYarnAndUnknownArchitecture) {
  auto src = GgufFile::open(synth("deepseek2-mla/model.gguf"));
  ASSERT_TRUE(src.ok());
  TempDir d;
  const std::string out = (d.path / "x.gguf").string();
  auto u32 = [](int64_t v) { return GgufValue{GgufType::kUint32, v}; };
  auto str = [](const std::string& v) { return GgufValue{GgufType::kString, v}; };
  testing::rewrite_gguf(*src, out, testing::Rewrite::kF32,
                        {{"deepseek2.expert_count", u32(8)},
                         {"deepseek2.leading_dense_block_count", u32(1)}});
  expect_error(out, {"x.gguf", "expert_used_count"});  // MoE layers need their keys
  testing::rewrite_gguf(*src, out, testing::Rewrite::kF32,
                        {{"deepseek2.rope.scaling.type", str("yarn")}});
  expect_error(out, {"rope.scaling.factor", "yarn"});
  testing::rewrite_gguf(*src, out, testing::Rewrite::kF32,
                        {{"deepseek2.attention.key_length", u32(48)}});
  expect_error(out, {"key_length", "kv_lora_rank"});
  testing::rewrite_gguf(*src, out, testing::Rewrite::kF32,
                        {{"general.architecture", str("falcon")}});
  expect_error(out, {"falcon", "unsupported architecture"});
  auto gqa = GgufFile::open(synth("llama-gqa/model.gguf"));
  ASSERT_TRUE(gqa.ok());
  testing::rewrite_gguf(*gqa, out, testing::Rewrite::kF32,
                        {{"llama.attention.value_length", u32(32)}});
  expect_error(out, {"value_length"});
  // A sliding window shorter than the context: every layer slides, the context stays.
  testing::rewrite_gguf(*gqa, out, testing::Rewrite::kF32,
                        {{"llama.attention.sliding_window", u32(64)}});
  {
    auto f = ModelFile::open(out);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ((*f)->config().max_position_embeddings, (*gqa).get_int("llama.context_length").value());
    EXPECT_EQ((*f)->config().sliding_window, 64);
    EXPECT_TRUE((*f)->config().all_layers_sliding());
  }
  // A layer count the tensors do not have fails before anything is sized from it.
  testing::rewrite_gguf(*gqa, out, testing::Rewrite::kF32,
                        {{"llama.block_count", u32(2147483647)}});
  expect_error(out, {"missing tensor blk.2147483646.attn_norm.weight", "2147483647 layers"});
  // The rope factor applies as linear scaling, as llama.cpp reads it (type absent = linear).
  testing::rewrite_gguf(*gqa, out, testing::Rewrite::kF32,
                        {{"llama.rope.scaling.factor", GgufValue{GgufType::kFloat32, 4.0}}});
  {
    auto f = ModelFile::open(out);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ((*f)->config().rope_scaling.type, RopeScalingType::kLinear);
    EXPECT_FLOAT_EQ((*f)->config().rope_scaling.factor, 4.0f);
  }
}

// ---------------------------------------------------------------------------------------
// Behaviour that changes numbers.

std::vector<int32_t> short_sequence() {
  return read_json(synth("sequences.json"))["short"].get<std::vector<int32_t>>();
}

double max_diff_vs_numpy(const std::string& model_path, const std::string& ref_model) {
  auto file = ModelFile::open(model_path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return 1e9;
  auto got = compute_prompt_logits(**file, short_sequence(), {});
  EXPECT_TRUE(got.ok()) << got.status().message();
  auto ref = read_npy(synth(ref_model + "/numpy_logits_short.npy"));
  EXPECT_TRUE(ref.ok());
  if (!got.ok() || !ref.ok() || got->size() != ref->data.size()) return 1e9;
  double m = 0;
  for (size_t i = 0; i < got->size(); ++i)
    m = std::max(m, std::fabs(double((*got)[i]) - ref->data[i]));
  return m;
}

TEST(HfConfig, MistralLoadsAsLlamaWithASlidingWindow) {
  // The same weights under MistralForCausalLM: identical logits while the 24-token sequence
  // fits in the window; the context is not capped.
  HfCopy copy("llama-gqa", [](json& c) {
    c["model_type"] = "mistral";
    c["architectures"] = {"MistralForCausalLM"};
    c["sliding_window"] = 64;
  });
  auto file = ModelFile::open(copy.path());
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->config().architecture, "llama");
  EXPECT_GT((*file)->config().max_position_embeddings, 64);
  EXPECT_EQ((*file)->config().sliding_window, 64);
  EXPECT_TRUE((*file)->config().all_layers_sliding());
  EXPECT_LE(max_diff_vs_numpy(copy.path(), "llama-gqa"), 1e-3);
}

TEST(HfConfig, QwenSlidesOnlyFromMaxWindowLayersOn) {
  HfCopy copy("qwen2-gqa-bias", [](json& c) {
    c["use_sliding_window"] = true;
    c["sliding_window"] = 8;
    c["max_window_layers"] = 1;
  });
  auto file = ModelFile::open(copy.path());
  ASSERT_TRUE(file.ok()) << file.status().message();
  const ModelConfig& c = (*file)->config();
  ASSERT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 8);
  EXPECT_FALSE(c.all_layers_sliding());
  HfCopy off("qwen2-gqa-bias", [](json& c) {
    c["use_sliding_window"] = false;
    c["sliding_window"] = 8;
  });
  auto f2 = ModelFile::open(off.path());
  ASSERT_TRUE(f2.ok()) << f2.status().message();
  EXPECT_EQ((*f2)->config().sliding_window, 0);
  HfCopy types("qwen2-gqa-bias", [](json& c) {
    c["use_sliding_window"] = true;
    c["sliding_window"] = 8;
    c["layer_types"] = {"sliding_attention", "chunked_attention"};
  });
  auto f3 = ModelFile::open(types.path());
  ASSERT_FALSE(f3.ok());
  EXPECT_NE(f3.status().message().find("chunked_attention"), std::string::npos) << f3.status().message();
}

TEST(HfConfig, RopeScalingChangesOnlyTheFrequenciesItShould) {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  const std::vector<float> base = c.rope_inv_freq();
  ASSERT_EQ(base.size(), 64u);
  EXPECT_FLOAT_EQ(base[0], 1.0f);
  EXPECT_NEAR(base[1], std::pow(500000.0, -2.0 / 128), 1e-6);  // float32 pow
  c.rope_scaling.type = RopeScalingType::kLinear;
  c.rope_scaling.factor = 4.0f;
  const std::vector<float> lin = c.rope_inv_freq();
  for (size_t i = 0; i < base.size(); ++i) EXPECT_FLOAT_EQ(lin[i], base[i] / 4.0f);
  // Llama 3.1 (config.json: factor 8, low 1, high 4, original 8192): wavelengths below
  // 8192/4 = 2048 keep their frequency, above 8192 are divided by 8, in between interpolate.
  c.rope_scaling = {RopeScalingType::kLlama3, 8.0f, 1.0f, 4.0f, 8192};
  const std::vector<float> l3 = c.rope_inv_freq();
  int kept = 0, divided = 0, mixed = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const double wavelen = 2 * M_PI / base[i];
    if (wavelen < 2048) {
      EXPECT_FLOAT_EQ(l3[i], base[i]);
      ++kept;
    } else if (wavelen > 8192) {
      EXPECT_FLOAT_EQ(l3[i], base[i] / 8.0f);
      ++divided;
    } else {
      EXPECT_LT(l3[i], base[i]);
      EXPECT_GT(l3[i], base[i] / 8.0f);
      ++mixed;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(mixed, 0);
  // GGUF's rope_freqs.weight (llama.cpp's precomputed llama3 factors) divide each frequency.
  c.rope_scaling = {};
  c.rope_freq_factors.assign(64, 1.0f);
  c.rope_freq_factors[63] = 8.0f;
  const std::vector<float> ff = c.rope_inv_freq();
  EXPECT_FLOAT_EQ(ff[0], base[0]);
  EXPECT_FLOAT_EQ(ff[63], base[63] / 8.0f);
  c.rope_freq_factors.resize(10);
  EXPECT_FALSE(c.validate().ok());
  // Scaling really reaches the model: a linear factor changes the logits.
  HfCopy scaled("llama-gqa", [](json& j) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  });
  EXPECT_GT(max_diff_vs_numpy(scaled.path(), "llama-gqa"), 1e-2);
}

TEST(HfFileErrors, SpecialFilesAreErrorsNotHangsOrCrashes) {
  {  // model.safetensors is a symlink loop
    HfCopy copy("llama-gqa", nullptr);
    fs::remove(copy.dir.path / "model.safetensors");
    fs::create_symlink(copy.dir.path / "model.safetensors", copy.dir.path / "model.safetensors");
    expect_error(copy.path(), {"model.safetensors"});
  }
  {  // the index is a directory
    HfCopy copy("llama-gqa", nullptr);
    fs::create_directory(copy.dir.path / "model.safetensors.index.json");
    expect_error(copy.path(), {"model.safetensors.index.json", "not a regular file"});
  }
  {  // config.json is a FIFO nobody writes to, or /dev/zero
    HfCopy copy("llama-gqa", nullptr);
    fs::remove(copy.dir.path / "config.json");
    ASSERT_EQ(::mkfifo((copy.dir.path / "config.json").c_str(), 0600), 0);
    expect_error(copy.path(), {"config.json", "not a regular file"});
    fs::remove(copy.dir.path / "config.json");
    fs::create_symlink("/dev/zero", copy.dir.path / "config.json");
    expect_error(copy.path(), {"config.json", "not a regular file"});
  }
  {  // sampling defaults out of range fail at load, not in every request
    HfCopy copy("llama-gqa", nullptr);
    write_text(copy.dir.path / "generation_config.json", R"({"top_p": 0})");
    expect_error(copy.path(), {"generation_config.json", "top_p"});
    write_text(copy.dir.path / "generation_config.json", R"({"eos_token_id": 99999})");
    expect_error(copy.path(), {"eos_token_id", "99999"});
  }
}

TEST(HfConfig, GenerationConfigJson) {
  HfCopy copy("llama-gqa", nullptr);
  write_text(copy.dir.path / "generation_config.json",
             R"({"bos_token_id": 1, "eos_token_id": [2, 7], "temperature": 0.6,
                 "top_p": 0.9, "top_k": 20, "do_sample": true})");
  auto file = ModelFile::open(copy.path());
  ASSERT_TRUE(file.ok()) << file.status().message();
  const GenerationConfig& g = (*file)->generation_config();
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{2, 7}));
  EXPECT_FLOAT_EQ(g.temperature.value_or(-1), 0.6f);
  EXPECT_FLOAT_EQ(g.top_p.value_or(-1), 0.9f);
  EXPECT_EQ(g.top_k.value_or(-1), 20);
  write_text(copy.dir.path / "generation_config.json", R"({"eos_token_id": ["</s>"]})");
  expect_error(copy.path(), {"generation_config.json", "eos_token_id"});
}

}  // namespace
}  // namespace llmserve
