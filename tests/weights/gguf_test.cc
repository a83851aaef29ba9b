// GgufFile against real files: stories260K.gguf (llama.cpp's llama2.c converter), the six
// synthetic models (shapes from their shape.json, values from their HF safetensors), and the
// llama.cpp vocab-only GGUFs.
#include "weights/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace llmserve {
namespace {

using testing::shared_path;

const std::string kStoriesGguf = shared_path("models/stories260K/stories260K.gguf");

GgufFile open_or_die(const std::string& path) {
  auto g = GgufFile::open(path);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) std::abort();
  return std::move(g).value();
}

int64_t int_key(const GgufFile& g, std::string_view key) {
  auto v = g.get_int(key);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? *v : -1;
}

void expect_shape(const GgufFile& g, const std::string& name, std::vector<int64_t> shape) {
  const TensorView* t = g.find_tensor(name);
  ASSERT_NE(t, nullptr) << g.path() << " lacks " << name;
  EXPECT_EQ(t->shape, shape) << name;
  EXPECT_EQ(t->dtype, DType::kF32) << name;
  EXPECT_EQ(t->nbytes, static_cast<size_t>(t->numel()) * 4) << name;
}

// ---- stories260K.gguf: values from models/stories260K/README.md ----

TEST(GgufStories, HeaderAndHyperparameters) {
  GgufFile g = open_or_die(kStoriesGguf);
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.path(), kStoriesGguf);
  EXPECT_EQ(*g.get_string("general.architecture"), "llama");
  EXPECT_EQ(int_key(g, "llama.embedding_length"), 64);
  EXPECT_EQ(int_key(g, "llama.feed_forward_length"), 172);
  EXPECT_EQ(int_key(g, "llama.block_count"), 5);
  EXPECT_EQ(int_key(g, "llama.attention.head_count"), 8);
  EXPECT_EQ(int_key(g, "llama.attention.head_count_kv"), 4);
  EXPECT_EQ(int_key(g, "llama.context_length"), 128);      // README: converter writes 128
  EXPECT_EQ(int_key(g, "llama.rope.dimension_count"), 8);  // head_dim 8
  EXPECT_EQ(int_key(g, "tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(int_key(g, "tokenizer.ggml.eos_token_id"), 2);
  auto eps = g.get_float("llama.attention.layer_norm_rms_epsilon");
  ASSERT_TRUE(eps.ok());
  EXPECT_NEAR(*eps, 1e-5, 1e-9);
  // get_float accepts integers too.
  EXPECT_EQ(*g.get_float("llama.block_count"), 5.0);
}

TEST(GgufStories, EmbeddedVocabulary) {
  GgufFile g = open_or_die(kStoriesGguf);
  EXPECT_EQ(*g.get_string("tokenizer.ggml.model"), "llama");
  auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  // README: ids 3..258 are the byte pieces <0x00>..<0xFF>.
  for (int b = 0; b < 256; ++b) EXPECT_EQ((*tokens)[3 + b], fmt::format("<0x{:02X}>", b));
  auto scores = g.get_float_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ(scores->size(), 512u);
  auto types = g.get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  ASSERT_EQ(types->size(), 512u);
  EXPECT_EQ((*types)[3], 6);  // llama.cpp token type BYTE
  // Typed access errors name the file and the key.
  EXPECT_TRUE(testing::IsErrorNaming(g.get_string_array("tokenizer.ggml.scores"), kStoriesGguf,
                                     "tokenizer.ggml.scores"));
  EXPECT_EQ(g.get_int_array("tokenizer.ggml.tokens").status().code(), StatusCode::kInvalidArgument);
}

TEST(GgufStories, TypedAccessorErrors) {
  GgufFile g = open_or_die(kStoriesGguf);
  auto missing = g.get_int("llama.no_such_key");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(testing::IsErrorNaming(missing, kStoriesGguf, "llama.no_such_key"));
  auto wrong = g.get_int("general.architecture");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(testing::IsErrorNaming(wrong, kStoriesGguf, "general.architecture"));
  EXPECT_EQ(g.get_string("llama.block_count").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.get_bool("llama.block_count").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.get_float("general.architecture").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(g.has_key("nope"));
  EXPECT_TRUE(g.has_key("general.architecture"));
  EXPECT_EQ(g.find_value("nope"), nullptr);
  EXPECT_EQ(g.find_tensor("nope"), nullptr);
}

TEST(GgufStories, TensorShapes) {
  GgufFile g = open_or_die(kStoriesGguf);
  // 3 global + 9 per layer; output.weight is present (a copy of the tied embedding).
  EXPECT_EQ(g.tensors().size(), 3u + 9u * 5u);
  expect_shape(g, "token_embd.weight", {512, 64});
  expect_shape(g, "output_norm.weight", {64});
  expect_shape(g, "output.weight", {512, 64});
  for (int i = 0; i < 5; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    expect_shape(g, p + "attn_norm.weight", {64});
    expect_shape(g, p + "attn_q.weight", {64, 64});
    expect_shape(g, p + "attn_k.weight", {32, 64});  // 4 kv heads * head_dim 8
    expect_shape(g, p + "attn_v.weight", {32, 64});
    expect_shape(g, p + "attn_output.weight", {64, 64});
    expect_shape(g, p + "ffn_norm.weight", {64});
    expect_shape(g, p + "ffn_gate.weight", {172, 64});
    expect_shape(g, p + "ffn_down.weight", {64, 172});
    expect_shape(g, p + "ffn_up.weight", {172, 64});
  }
  for (const TensorView& t : g.tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;  // default alignment
    for (int64_t k = 0; k < t.numel(); ++k) {
      ASSERT_TRUE(std::isfinite(static_cast<const float*>(t.data)[k])) << t.name;
    }
  }
}

// ---- the llama.cpp vocab-only GGUFs (no tensors, large string arrays) ----

TEST(GgufVocabFiles, OpenAll) {
  struct Case {
    const char* file;
    const char* arch;
    size_t n_tokens;
  };
  const Case cases[] = {{"ggml-vocab-llama-spm.gguf", "llama", 32000},
                        {"ggml-vocab-gpt-2.gguf", "gpt2", 50257},
                        {"ggml-vocab-phi-3.gguf", "phi3", 32064},
                        {"ggml-vocab-falcon.gguf", "falcon", 65024},
                        {"ggml-vocab-mpt.gguf", "mpt", 50432},
                        {"ggml-vocab-deepseek-llm.gguf", "llama", 102400}};
  for (const Case& c : cases) {
    const std::string path = shared_path(std::string("testdata/tokenizer/") + c.file);
    if (!std::filesystem::exists(path)) continue;
    GgufFile g = open_or_die(path);
    EXPECT_EQ(*g.get_string("general.architecture"), c.arch) << c.file;
    auto tokens = g.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status().message();
    EXPECT_EQ(tokens->size(), c.n_tokens) << c.file;
    EXPECT_TRUE(g.tensors().empty()) << c.file;
  }
}

// ---- synthetic models: shapes from shape.json ----

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

const char* const kSynthetic[] = {"llama-mha",      "llama-gqa",    "llama-mqa",
                                  "qwen2-gqa-bias", "qwen3-qknorm", "deepseek2-mla"};

std::string synth_dir(const std::string& name) {
  return shared_path("testdata/models/synthetic/" + name);
}

void check_synthetic_metadata(const GgufFile& g, const nlohmann::json& s) {
  const std::string arch = s["arch"];
  EXPECT_EQ(*g.get_string("general.architecture"), arch);
  EXPECT_EQ(int_key(g, arch + ".block_count"), s["n_layers"].get<int64_t>());
  EXPECT_EQ(int_key(g, arch + ".embedding_length"), s["dim"].get<int64_t>());
  EXPECT_EQ(int_key(g, arch + ".feed_forward_length"), s["ffn"].get<int64_t>());
  EXPECT_EQ(int_key(g, arch + ".context_length"), s["ctx"].get<int64_t>());
  EXPECT_EQ(int_key(g, arch + ".attention.head_count"), s["n_heads"].get<int64_t>());
  if (s.contains("n_kv_heads")) {
    EXPECT_EQ(int_key(g, arch + ".attention.head_count_kv"), s["n_kv_heads"].get<int64_t>());
  }
  EXPECT_NEAR(*g.get_float(arch + ".attention.layer_norm_rms_epsilon"), s["eps"].get<double>(),
              1e-12 + s["eps"].get<double>() * 1e-6);
  EXPECT_EQ(*g.get_float(arch + ".rope.freq_base"), s["rope_theta"].get<double>());
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")->size(), s["vocab"].get<size_t>());
}

/// Expected per-layer tensor shapes of the dense (llama/qwen) models.
std::map<std::string, std::vector<int64_t>> dense_layer_shapes(const nlohmann::json& s) {
  const int64_t dim = s["dim"], ffn = s["ffn"], hd = s["head_dim"];
  const int64_t q = int64_t{s["n_heads"]} * hd, kv = int64_t{s["n_kv_heads"]} * hd;
  std::map<std::string, std::vector<int64_t>> m = {
      {"attn_norm.weight", {dim}},      {"attn_q.weight", {q, dim}},
      {"attn_k.weight", {kv, dim}},     {"attn_v.weight", {kv, dim}},
      {"attn_output.weight", {dim, q}}, {"ffn_norm.weight", {dim}},
      {"ffn_gate.weight", {ffn, dim}},  {"ffn_up.weight", {ffn, dim}},
      {"ffn_down.weight", {dim, ffn}}};
  if (s.value("qkv_bias", false)) {
    m["attn_q.bias"] = {q};
    m["attn_k.bias"] = {kv};
    m["attn_v.bias"] = {kv};
  }
  if (s.value("qk_norm", false)) {
    m["attn_q_norm.weight"] = {hd};
    m["attn_k_norm.weight"] = {hd};
  }
  return m;
}

/// DeepSeek-V2 MLA layer shapes as llama.cpp stores them (attn_k_b / attn_v_b split per head).
std::map<std::string, std::vector<int64_t>> mla_layer_shapes(const nlohmann::json& s) {
  const int64_t dim = s["dim"], ffn = s["ffn"], nh = s["n_heads"];
  const int64_t ql = s["q_lora"], kvl = s["kv_lora"], nope = s["qk_nope"], rope = s["qk_rope"];
  const int64_t vh = s["v_head"];
  return {{"attn_norm.weight", {dim}},
          {"attn_q_a.weight", {ql, dim}},
          {"attn_q_a_norm.weight", {ql}},
          {"attn_q_b.weight", {nh * (nope + rope), ql}},
          {"attn_kv_a_mqa.weight", {kvl + rope, dim}},
          {"attn_kv_a_norm.weight", {kvl}},
          {"attn_k_b.weight", {nh, kvl, nope}},
          {"attn_v_b.weight", {nh, vh, kvl}},
          {"attn_output.weight", {dim, nh * vh}},
          {"ffn_norm.weight", {dim}},
          {"ffn_gate.weight", {ffn, dim}},
          {"ffn_up.weight", {ffn, dim}},
          {"ffn_down.weight", {dim, ffn}}};
}

TEST(GgufSynthetic, ShapesMatchShapeJson) {
  for (const char* name : kSynthetic) {
    SCOPED_TRACE(name);
    const nlohmann::json s = read_json(synth_dir(name) + "/shape.json");
    GgufFile g = open_or_die(synth_dir(name) + "/model.gguf");
    check_synthetic_metadata(g, s);
    const int64_t vocab = s["vocab"], dim = s["dim"];
    expect_shape(g, "token_embd.weight", {vocab, dim});
    expect_shape(g, "output_norm.weight", {dim});
    const bool tied = s.value("tied", false);
    if (tied) {
      EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
    } else {
      expect_shape(g, "output.weight", {vocab, dim});
    }
    const auto layer = s["arch"] == "deepseek2" ? mla_layer_shapes(s) : dense_layer_shapes(s);
    const int64_t n_layers = s["n_layers"];
    for (int64_t i = 0; i < n_layers; ++i) {
      for (const auto& [suffix, shape] : layer) {
        expect_shape(g, fmt::format("blk.{}.{}", i, suffix), shape);
      }
    }
    EXPECT_EQ(g.tensors().size(), (tied ? 2u : 3u) + layer.size() * n_layers);
  }
}

// ---- synthetic models: values against the independent HF safetensors files ----

/// A minimal safetensors view: 8-byte header length, JSON header, raw data.
class SafeTensors {
 public:
  explicit SafeTensors(const std::string& path) : bytes_(testing::read_file(path)) {
    uint64_t n = 0;
    std::memcpy(&n, bytes_.data(), 8);
    header_ = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + n);
    data_start_ = 8 + n;
  }
  std::vector<int64_t> shape(const std::string& name) const {
    return header_.at(name).at("shape").get<std::vector<int64_t>>();
  }
  const float* data(const std::string& name) const {
    EXPECT_EQ(header_.at(name).at("dtype"), "F32");
    const size_t begin = header_.at(name).at("data_offsets")[0];
    return reinterpret_cast<const float*>(bytes_.data() + data_start_ + begin);
  }

 private:
  std::vector<uint8_t> bytes_;
  nlohmann::json header_;
  size_t data_start_ = 0;
};

/// Compares a GGUF tensor with an HF tensor element by element; `row_map(r)` gives the HF row
/// of GGUF row r (identity unless Q/K are permuted).
template <typename RowMap>
void expect_same_values(const GgufFile& g, const std::string& gname, const SafeTensors& st,
                        const std::string& hname, RowMap row_map) {
  const TensorView* t = g.find_tensor(gname);
  ASSERT_NE(t, nullptr) << gname;
  ASSERT_EQ(t->shape, st.shape(hname)) << gname << " vs " << hname;
  const int64_t rows = t->shape[0], cols = t->numel() / rows;
  const float* a = static_cast<const float*>(t->data);
  const float* b = st.data(hname);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(std::memcmp(a + r * cols, b + row_map(r) * cols, cols * 4), 0)
        << gname << " row " << r << " vs " << hname << " row " << row_map(r);
  }
}

/// llama.cpp's HF converter permutes Q/K rows from rotate-half to adjacent-pair order:
/// within each head, GGUF row 2*i + j holds HF row j * (head_dim / 2) + i.
int64_t llama_qk_row(int64_t r, int64_t head_dim) {
  const int64_t h = r / head_dim, w = r % head_dim, i = w / 2, j = w % 2;
  return h * head_dim + j * (head_dim / 2) + i;
}

TEST(GgufSynthetic, ValuesMatchHfSafetensors) {
  for (const char* name : kSynthetic) {
    const std::string hf = synth_dir(name) + "/hf/model.safetensors";
    if (!std::filesystem::exists(hf)) continue;  // deepseek2 has no HF copy
    SCOPED_TRACE(name);
    const nlohmann::json s = read_json(synth_dir(name) + "/shape.json");
    GgufFile g = open_or_die(synth_dir(name) + "/model.gguf");
    SafeTensors st(hf);
    const int64_t hd = s["head_dim"];
    const bool permuted = s["arch"] == "llama";
    auto identity = [](int64_t r) { return r; };
    auto qk = [&](int64_t r) { return permuted ? llama_qk_row(r, hd) : r; };
    expect_same_values(g, "token_embd.weight", st, "model.embed_tokens.weight", identity);
    expect_same_values(g, "output_norm.weight", st, "model.norm.weight", identity);
    for (int64_t i = 0; i < s["n_layers"].get<int64_t>(); ++i) {
      const std::string gp = fmt::format("blk.{}.", i), hp = fmt::format("model.layers.{}.", i);
      expect_same_values(g, gp + "attn_q.weight", st, hp + "self_attn.q_proj.weight", qk);
      expect_same_values(g, gp + "attn_k.weight", st, hp + "self_attn.k_proj.weight", qk);
      expect_same_values(g, gp + "attn_v.weight", st, hp + "self_attn.v_proj.weight", identity);
      expect_same_values(g, gp + "attn_output.weight", st, hp + "self_attn.o_proj.weight",
                         identity);
      expect_same_values(g, gp + "ffn_gate.weight", st, hp + "mlp.gate_proj.weight", identity);
      expect_same_values(g, gp + "ffn_down.weight", st, hp + "mlp.down_proj.weight", identity);
      expect_same_values(g, gp + "ffn_up.weight", st, hp + "mlp.up_proj.weight", identity);
    }
  }
}

}  // namespace
}  // namespace llmserve
