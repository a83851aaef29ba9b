// llmserve make-model: the generated benchmark GGUF opens with our reader and ModelFile with
// the preset's shape, its vocabulary tokenizes English into word pieces and back, the engine
// generates from it, the output is a function of the seed, and the HF copy holds the same
// weights in HF's layout. Only the small presets run here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "engine/llm_engine.h"
#include "models/model_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

using testing::run_llmserve;

class MakeModel : public ::testing::Test {
 protected:
  static std::string dir() {
    static const std::string d = [] {
      auto p = std::filesystem::path(testing::temp_dir()) / "make_model";
      std::filesystem::create_directories(p);
      return p.string();
    }();
    return d;
  }

  /// Generates (once per test binary) bench-5m with `dtype` and `seed`; returns the path.
  static std::string model(const std::string& dtype, int seed = 1, const std::string& hf = "") {
    static std::map<std::string, std::string> made;
    const std::string key = dtype + "/" + std::to_string(seed) + "/" + hf;
    if (auto it = made.find(key); it != made.end()) return it->second;
    const std::string path =
        dir() + "/bench-5m-" + dtype + "-s" + std::to_string(seed) + (hf.empty() ? "" : "-hf") +
        ".gguf";
    auto r = run_llmserve("make-model --preset bench-5m --dtype " + dtype + " --seed " +
                          std::to_string(seed) + " --out '" + path + "'" +
                          (hf.empty() ? "" : " --hf-dir '" + hf + "'"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out;
    made[key] = path;
    return path;
  }
};

TEST_F(MakeModel, GgufMetadataShapesAndDtypes) {
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    SCOPED_TRACE(dtype);
    const DType want = std::string(dtype) == "f32"   ? DType::kF32
                       : std::string(dtype) == "f16" ? DType::kF16
                                                     : DType::kBF16;
    auto g = GgufFile::open(model(dtype));
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->version(), 3u);
    EXPECT_EQ(*g->get_string("general.architecture"), "llama");
    EXPECT_EQ(*g->get_string("general.name"), "bench-5m");
    EXPECT_EQ(*g->get_int("llama.context_length"), 1024);
    EXPECT_EQ(*g->get_int("llama.embedding_length"), 256);
    EXPECT_EQ(*g->get_int("llama.block_count"), 6);
    EXPECT_EQ(*g->get_int("llama.feed_forward_length"), 704);
    EXPECT_EQ(*g->get_int("llama.attention.head_count"), 4);
    EXPECT_EQ(*g->get_int("llama.attention.head_count_kv"), 2);
    EXPECT_EQ(*g->get_int("llama.rope.dimension_count"), 64);
    EXPECT_EQ(*g->get_int("llama.vocab_size"), 4000);
    EXPECT_FLOAT_EQ(static_cast<float>(*g->get_float("llama.attention.layer_norm_rms_epsilon")),
                    1e-5f);
    EXPECT_FLOAT_EQ(static_cast<float>(*g->get_float("llama.rope.freq_base")), 10000.0f);
    EXPECT_EQ(*g->get_int("general.file_type"),
              want == DType::kF32 ? 0 : want == DType::kF16 ? 1 : 32);
    EXPECT_EQ(*g->get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens")->size(), 4000u);
    EXPECT_EQ(*g->get_int("tokenizer.ggml.bos_token_id"), 1);
    EXPECT_EQ(*g->get_int("tokenizer.ggml.eos_token_id"), 2);
    EXPECT_EQ(*g->get_int("tokenizer.ggml.unknown_token_id"), 0);
    EXPECT_TRUE(*g->get_bool("tokenizer.ggml.add_bos_token"));

    EXPECT_EQ(g->tensors().size(), 3u + 9u * 6u);
    auto expect_tensor = [&](const std::string& name, std::vector<int64_t> shape, DType dt) {
      const TensorView* t = g->find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->shape, shape) << name;
      EXPECT_EQ(t->dtype, dt) << name;
      EXPECT_EQ(t->nbytes, static_cast<size_t>(t->numel()) * dtype_size(dt)) << name;
    };
    expect_tensor("token_embd.weight", {4000, 256}, want);
    expect_tensor("output.weight", {4000, 256}, want);
    expect_tensor("output_norm.weight", {256}, DType::kF32);
    for (int l = 0; l < 6; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      expect_tensor(b + "attn_norm.weight", {256}, DType::kF32);
      expect_tensor(b + "ffn_norm.weight", {256}, DType::kF32);
      expect_tensor(b + "attn_q.weight", {256, 256}, want);
      expect_tensor(b + "attn_k.weight", {128, 256}, want);
      expect_tensor(b + "attn_v.weight", {128, 256}, want);
      expect_tensor(b + "attn_output.weight", {256, 256}, want);
      expect_tensor(b + "ffn_gate.weight", {704, 256}, want);
      expect_tensor(b + "ffn_up.weight", {704, 256}, want);
      expect_tensor(b + "ffn_down.weight", {256, 704}, want);
    }
  }
}

TEST_F(MakeModel, ModelFileConfig) {
  auto mf = ModelFile::open(model("bf16"));
  ASSERT_TRUE(mf.ok()) << mf.status().message();
  const ModelConfig& c = (*mf)->config();
  EXPECT_EQ(c.vocab_size, 4000);
  EXPECT_EQ(c.dim, 256);
  EXPECT_EQ(c.n_layers, 6);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn_dim, 704);
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.weight_dtype, DType::kBF16);
  EXPECT_TRUE(c.validate().ok());
}

TEST_F(MakeModel, WeightsAreNormalishWithStd002AndNormsOne) {
  auto g = GgufFile::open(model("f32"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const TensorView* t = g->find_tensor("blk.0.ffn_up.weight");
  ASSERT_NE(t, nullptr);
  const float* x = static_cast<const float*>(t->data);
  double sum = 0, sq = 0, max_abs = 0;
  for (int64_t i = 0; i < t->numel(); ++i) {
    sum += x[i];
    sq += double(x[i]) * x[i];
    max_abs = std::max(max_abs, std::fabs(double(x[i])));
  }
  const double mean = sum / t->numel(), std = std::sqrt(sq / t->numel() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std, 0.02, 0.001);
  EXPECT_LT(max_abs, 0.1);
  const TensorView* n = g->find_tensor("blk.3.attn_norm.weight");
  ASSERT_NE(n, nullptr);
  for (int64_t i = 0; i < n->numel(); ++i) EXPECT_EQ(static_cast<const float*>(n->data)[i], 1.0f);
}

TEST_F(MakeModel, VocabularyTokenizesEnglishIntoPiecesAndBack) {
  auto g = GgufFile::open(model("f16"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto vocab = load_gguf_vocab(*g);
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_EQ(vocab->size(), 4000);
  EXPECT_EQ(vocab->pieces[0], "<unk>");
  EXPECT_EQ(vocab->pieces[1], "<s>");
  EXPECT_EQ(vocab->pieces[2], "</s>");
  EXPECT_EQ(vocab->pieces[3], "<0x00>");
  EXPECT_EQ(vocab->pieces[258], "<0xFF>");
  EXPECT_EQ(vocab->types[3], TokenType::kByte);
  EXPECT_EQ(vocab->types[1], TokenType::kControl);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(vocab->byte_to_id[b], 3 + b);
  for (size_t i = 260; i < vocab->scores.size(); ++i)
    ASSERT_LT(vocab->scores[i], vocab->scores[i - 1]) << i;  // decreasing: merges rank by id
  const std::vector<std::string> pieces = vocab->pieces;
  auto tok = make_spm_tokenizer(std::move(*vocab));

  const std::string text = "Once upon a time, there was a little girl.";
  const std::vector<int32_t> ids = tok->encode(text, /*add_bos=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_LT(ids.size(), text.size() / 2) << "expected word pieces, not characters";
  EXPECT_EQ(tok->decode(ids), text);
  const std::string sp = "\xe2\x96\x81";
  for (const char* w : {"Once", "upon", "time", "there", "little", "girl"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(),
                        std::find(pieces.begin(), pieces.end(), sp + w) - pieces.begin()),
              ids.end())
        << w << " is not one piece";
  }
  for (size_t i = 1; i < ids.size(); ++i)  // after BOS
    EXPECT_GE(ids[i], 259) << "byte or control piece " << ids[i] << " in " << text;

  // Any text round-trips, including unseen words, digits and non-ASCII (byte fallback).
  for (const std::string s : {"The quick brown fox jumps over the lazy dog 1234567890!",
                              "zyzzyva qwxj  double  spaces", "caf\xc3\xa9 \xe2\x82\xac 5"}) {
    EXPECT_EQ(tok->decode(tok->encode(s, true)), s);
  }
}

TEST_F(MakeModel, EngineLoadsAndGenerates) {
  for (const char* dtype : {"f32", "bf16"}) {
    SCOPED_TRACE(dtype);
    EngineConfig c;
    c.model_path = model(dtype);
    c.num_threads = 2;
    c.cache.num_kv_blocks = 64;
    c.scheduler.check_invariants = true;
    auto e = LLMEngine::create(c);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ((*e)->model_config().vocab_size, 4000);
    EngineRequest r;
    r.prompt_token_ids = (*e)->tokenizer().encode("Once upon a time, there was", true);
    r.params.temperature = 0;
    r.params.max_tokens = 8;
    ASSERT_TRUE((*e)->add_request(0, std::move(r)).ok());
    std::vector<int32_t> out;
    std::string text;
    for (int guard = 0; (*e)->has_unfinished_requests() && guard < 100; ++guard) {
      for (const RequestOutput& o : (*e)->step()) {
        out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        text += o.new_text;
      }
    }
    // The output head's control and byte rows are zero, so greedy decoding of the random
    // model runs the full length in word pieces.
    EXPECT_EQ(out.size(), 8u);
    for (int32_t id : out) {
      EXPECT_GE(id, 259);
      EXPECT_LT(id, 4000);
    }
    EXPECT_FALSE(text.empty());
  }
}

TEST_F(MakeModel, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string a = testing::slurp(model("f16", 7));
  const std::string again = dir() + "/again.gguf";
  auto r = run_llmserve("make-model --preset bench-5m --dtype f16 --seed 7 --out '" + again + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string b = testing::slurp(again);
  const std::string c = testing::slurp(model("f16", 8));
  ASSERT_GT(a.size(), 1000000u);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.size(), c.size());  // same layout
  EXPECT_FALSE(a == c);
}

TEST_F(MakeModel, Errors) {
  auto r = run_llmserve("make-model --preset no-such-model --out '" + dir() + "/x.gguf'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bench-250m"), std::string::npos) << "should list the presets: " << r.err;

  r = run_llmserve("make-model --preset bench-5m --dtype q4 --out '" + dir() + "/x.gguf'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;

  r = run_llmserve("make-model --preset bench-5m --out /nonexistent-dir/sub/x.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent-dir/sub/x.gguf"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir() + "/x.gguf"));

  r = run_llmserve("make-model --preset bench-5m");  // --out missing
  EXPECT_EQ(r.exit_code, 1);

  // The MoE preset writes its experts stacked, as llama.cpp's GGUFs hold them; no HF copy.
  r = run_llmserve("make-model --preset qwen3moe-1b --out '" + dir() + "/m.gguf' --hf-dir '" + dir() + "/m'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--hf-dir"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir() + "/m.gguf"));
}

TEST_F(MakeModel, HfDirectoryHoldsTheSameWeightsInHfLayout) {
  const std::string hf = dir() + "/hf-bench-5m";
  auto g = GgufFile::open(model("bf16", 3, hf));
  ASSERT_TRUE(g.ok()) << g.status().message();

  std::ifstream cfg_in(hf + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(cfg_in);
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["hidden_size"], 256);
  EXPECT_EQ(cfg["intermediate_size"], 704);
  EXPECT_EQ(cfg["num_hidden_layers"], 6);
  EXPECT_EQ(cfg["num_attention_heads"], 4);
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["vocab_size"], 4000);
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");

  // Tokenizer files: the same vocabulary as the GGUF, BPE merges ranked by piece score.
  std::ifstream tok_in(hf + "/tokenizer.json");
  const nlohmann::json tok = nlohmann::json::parse(tok_in);
  EXPECT_EQ(tok["model"]["type"], "BPE");
  EXPECT_TRUE(tok["model"]["byte_fallback"].get<bool>());
  const auto& hf_vocab = tok["model"]["vocab"];
  const std::vector<std::string> pieces = *g->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(hf_vocab.size(), pieces.size());
  for (size_t i = 0; i < pieces.size(); i += 97) EXPECT_EQ(hf_vocab[pieces[i]], i) << pieces[i];
  const auto merges = tok["model"]["merges"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(merges.begin(), merges.end(), "\xe2\x96\x81 time"), merges.end());
  for (const char* f : {"tokenizer_config.json", "special_tokens_map.json"})
    EXPECT_TRUE(std::filesystem::exists(hf + "/" + f)) << f;

  const std::string st = testing::slurp(hf + "/model.safetensors");
  ASSERT_GT(st.size(), 8u);
  uint64_t hlen = 0;
  std::memcpy(&hlen, st.data(), 8);
  ASSERT_LE(8 + hlen, st.size());
  const nlohmann::json header = nlohmann::json::parse(st.substr(8, hlen));
  const char* base = st.data() + 8 + hlen;
  auto hf_tensor = [&](const std::string& name, std::vector<int64_t> shape) -> const uint16_t* {
    EXPECT_TRUE(header.contains(name)) << name;
    if (!header.contains(name)) return nullptr;
    const auto& t = header[name];
    EXPECT_EQ(t["dtype"], "BF16") << name;
    EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), shape) << name;
    const auto off = t["data_offsets"].get<std::vector<uint64_t>>();
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    EXPECT_EQ(off[1] - off[0], static_cast<uint64_t>(n) * 2) << name;
    EXPECT_LE(8 + hlen + off[1], st.size());
    return reinterpret_cast<const uint16_t*>(base + off[0]);
  };
  EXPECT_EQ(header.size(), 1u + 3u + 9u * 6u);  // __metadata__ + tensors

  // Unpermuted tensors are byte-identical.
  const uint16_t* emb = hf_tensor("model.embed_tokens.weight", {4000, 256});
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(std::memcmp(emb, g->find_tensor("token_embd.weight")->data, 4000 * 256 * 2), 0);
  const uint16_t* down = hf_tensor("model.layers.5.mlp.down_proj.weight", {256, 704});
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(std::memcmp(down, g->find_tensor("blk.5.ffn_down.weight")->data, 256 * 704 * 2), 0);
  const uint16_t* norm = hf_tensor("model.layers.2.input_layernorm.weight", {256});
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(bf16_to_f32(norm[17]), 1.0f);

  // Q/K: llama.cpp's permute maps HF row h*hd + j*hd/2 + i to GGUF row h*hd + 2i + j.
  for (auto [hf_name, gguf_name, rows] :
       {std::tuple{"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight", 256},
        std::tuple{"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight", 128}}) {
    const uint16_t* h = hf_tensor(hf_name, {rows, 256});
    ASSERT_NE(h, nullptr);
    const auto* gg = static_cast<const uint16_t*>(g->find_tensor(gguf_name)->data);
    const int hd = 64, half = 32;
    int mismatches = 0;
    for (int r = 0; r < rows; ++r) {
      const int head = r / hd, j = (r % hd) / half, i = r % half;
      const int gr = head * hd + 2 * i + j;
      mismatches += std::memcmp(h + r * 256, gg + gr * 256, 256 * 2) != 0;
    }
    EXPECT_EQ(mismatches, 0) << hf_name;
    EXPECT_NE(std::memcmp(h + 1 * 256, gg + 1 * 256, 256 * 2), 0) << "rows not permuted";
  }
}

}  // namespace
}  // namespace llmserve
