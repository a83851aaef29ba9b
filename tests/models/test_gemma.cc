// Gemma 2 and Gemma 3 (models/gemma.h) on two tiny random models in tests/models/data, written
// with their float64 NumPy reference logits (transformers' semantics) by
// scripts/references/gemma_models.py and run by llama.cpp on the same GGUF
// (scripts/references/llamacpp_reference.sh: CPU, flash attention off, F32 KV cache):
//   gemma2-tiny  Gemma2ForCausalLM: attention and final-logit soft-capping, GeGLU, pre/post
//                norms, head_dim != hidden / heads, even layers sliding (window 40)
//   gemma3-tiny  Gemma3ForCausalLM: q/k norms, five of six layers sliding (window 16) with
//                their own unscaled RoPE base, the global layer at rope_theta 1e6 with linear
//                scaling x8
// Both formats (the HF directory's norm weights get the + 1 the GGUF already holds), flash,
// flash-split and naive, whole, chunked, one token per step and single-token blocks.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/llm_engine.h"
#include "models/hf_config.h"
#include "tiny_models.h"

namespace llmserve {
namespace {

const std::string kData = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/";
constexpr const char* kModels[] = {"gemma2-tiny", "gemma3-tiny"};

class GemmaLogits : public ::testing::TestWithParam<testing::TinyCase> {};

TEST_P(GemmaLogits, MatchNumpyReference) { testing::expect_matches_numpy(GetParam()); }

std::vector<testing::TinyCase> cases() {
  std::vector<std::pair<std::string, std::string>> models;
  for (const char* m : kModels)
    for (const char* path : {"model.gguf", "hf"}) models.emplace_back(m, path);
  return testing::tiny_cases(models, {"flash", "naive", "flash-split"});
}

INSTANTIATE_TEST_SUITE_P(Tiny, GemmaLogits, ::testing::ValuesIn(cases()), testing::tiny_case_name);

// llama.cpp's logits on the same GGUF (its GELU uses an f16 table: READMEs give the gap).
TEST(Gemma, MatchLlamaCppOnTheSameFiles) {
  for (const char* m : kModels)
    for (const char* s : {"short", "long"}) {
      auto got = testing::tiny_logits(kData + m + "/model.gguf", testing::tiny_sequence(s), 2048, 16, "flash");
      ASSERT_TRUE(got.ok()) << got.status().message();
      const auto ref = testing::tiny_reference(m, s, "llamacpp");
      const testing::Compare r = testing::compare(*got, ref, 512);
      const testing::Compare theirs = testing::compare(ref, testing::tiny_reference(m, s), 512);
      const testing::Compare ours = testing::compare(*got, testing::tiny_reference(m, s), 512);
      std::printf("%s %s: vs llama.cpp %.3e; vs NumPy ours %.3e, llama.cpp's %.3e\n", m, s, r.max_diff,
                  ours.max_diff, theirs.max_diff);
      EXPECT_EQ(r.argmax_mismatches, theirs.argmax_mismatches) << m << " " << s;
      EXPECT_LE(r.max_diff, 1e-2) << m << " " << s;
      EXPECT_LE(ours.max_diff, theirs.max_diff) << m << " " << s;  // at least as close as llama.cpp
    }
}

// Batch invariance: a token's logits are the same bits however its prompt is split into steps.
TEST(Gemma, LogitsDoNotDependOnChunking) {
  for (const char* m : kModels)
    for (const char* path : {"/model.gguf", "/hf"}) testing::expect_chunking_invariant(kData + m + path);
}

// The hyperparameters as transformers (HF) and llama.cpp (GGUF) read them agree.
TEST(Gemma, ConfigAsConfigured) {
  for (const char* path : {"/model.gguf", "/hf"}) {
    auto g2 = ModelFile::open(kData + "gemma2-tiny" + path);
    ASSERT_TRUE(g2.ok()) << g2.status().message();
    const ModelConfig& c = (*g2)->config();
    EXPECT_EQ(c.architecture, "gemma2");
    EXPECT_EQ(c.hidden_activation, MlpActivation::kGeluTanh);
    EXPECT_GT(c.attn_logit_softcapping, 0.0f);
    EXPECT_GT(c.final_logit_softcapping, 0.0f);
    EXPECT_EQ(c.query_pre_attn_scalar, static_cast<float>(c.head_dim));
    EXPECT_NE(c.head_dim, c.dim / c.n_heads);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.rope_local_base_freq, 0.0f) << path;
    for (int32_t l = 0; l < c.n_layers; ++l) EXPECT_EQ(c.layer_window(l), l % 2 == 0 ? 40 : 0) << path << l;

    auto g3 = ModelFile::open(kData + "gemma3-tiny" + path);
    ASSERT_TRUE(g3.ok()) << g3.status().message();
    const ModelConfig& d = (*g3)->config();
    EXPECT_EQ(d.architecture, "gemma3");
    EXPECT_TRUE(d.qk_norm);
    EXPECT_EQ(d.attn_logit_softcapping, 0.0f);
    EXPECT_EQ(d.final_logit_softcapping, 0.0f);
    EXPECT_EQ(d.rope_theta, 1e6f);
    EXPECT_EQ(d.rope_local_base_freq, 1e4f);
    EXPECT_EQ(d.rope_scaling.type, RopeScalingType::kLinear);
    EXPECT_EQ(d.rope_scaling.factor, 8.0f);
    for (int32_t l = 0; l < d.n_layers; ++l) {
      EXPECT_EQ(d.layer_window(l), l % 6 < 5 ? 16 : 0) << path << l;
      EXPECT_EQ(d.uses_local_rope(l), l % 6 < 5) << path << l;
    }
  }
  // Gemma's post_attention_layernorm is the norm after attention, not before the MLP.
  EXPECT_EQ(gguf_name_for_hf("model.layers.2.post_attention_layernorm.weight", "gemma2"),
            "blk.2.post_attention_norm.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.2.post_attention_layernorm.weight", "llama"), "blk.2.ffn_norm.weight");
  EXPECT_EQ(gguf_name_for_hf("model.layers.0.pre_feedforward_layernorm.weight", "gemma3"), "blk.0.ffn_norm.weight");
  EXPECT_EQ(hf_name_for_gguf("blk.1.post_ffw_norm.weight", "gemma3"),
            "model.layers.1.post_feedforward_layernorm.weight");
}

// The HF directory's norm weights are read as 1 + w: the same values the GGUF stores.
TEST(Gemma, HfNormWeightsGetOne) {
  auto hf = ModelFile::open(kData + "gemma3-tiny/hf");
  auto gguf = ModelFile::open(kData + "gemma3-tiny/model.gguf");
  ASSERT_TRUE(hf.ok() && gguf.ok());
  for (const char* name : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.5.post_ffw_norm.weight",
                           "blk.3.attn_q_norm.weight", "blk.1.post_attention_norm.weight"}) {
    const TensorView* a = (*hf)->find_tensor(name);
    const TensorView* b = (*gguf)->find_tensor(name);
    ASSERT_TRUE(a != nullptr && b != nullptr) << name;
    ASSERT_EQ(a->dtype, DType::kF32);
    ASSERT_EQ(a->numel(), b->numel());
    const float* x = static_cast<const float*>(a->data);
    const float* y = static_cast<const float*>(b->data);
    for (int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(x[i], y[i]) << name << " " << i;
  }
}

/// gemma3-tiny/hf rewritten as a Gemma3ForConditionalGeneration checkpoint: config.json with
/// the text model under text_config (and a vision_config), tensors under `prefix`
/// ("language_model.model.layers..." as transformers < 4.52 saved them,
/// "model.language_model.layers..." after) and
/// one vision-tower tensor.
std::string make_multimodal_gemma3(const std::string& prefix, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream cin(kData + "gemma3-tiny/hf/config.json");
  nlohmann::json text = nlohmann::json::parse(cin);
  text.erase("architectures");
  nlohmann::json top = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                        {"model_type", "gemma3"},
                        {"text_config", text},
                        {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 4}}}};
  std::ofstream(dir + "/config.json") << top.dump(2);
  std::ifstream in(kData + "gemma3-tiny/hf/model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  std::string data = bytes.substr(8 + n);
  nlohmann::json renamed;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") renamed[name] = v;
    else if (prefix == "language_model.") renamed[prefix + name] = v;  // language_model.model.layers...
    else renamed[prefix + name.substr(6)] = v;                          // model.language_model.layers...
  }
  const std::string vision = std::string(prefix.rfind("model.", 0) == 0 ? "model." : "") + "vision_tower.patch.weight";
  renamed[vision] = {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {data.size(), data.size() + 16}}};
  data.append(16, '\0');
  std::string h = renamed.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t hn = h.size();
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&hn), 8);
  out << h << data;
  return dir;
}

// A Gemma3ForConditionalGeneration directory serves its text model: the same logits bit for bit.
TEST(Gemma, MultimodalCheckpointServesTheTextModel) {
  const auto ids = testing::tiny_sequence("short");
  auto want = testing::tiny_logits(kData + "gemma3-tiny/hf", ids, 2048, 16, "flash");
  ASSERT_TRUE(want.ok()) << want.status().message();
  const std::string tmp = (std::filesystem::temp_directory_path() / "llmserve_gemma3_mm").string();
  for (const char* prefix : {"language_model.", "model.language_model."}) {
    const std::string dir = make_multimodal_gemma3(prefix, tmp);
    auto mf = ModelFile::open(dir);
    ASSERT_TRUE(mf.ok()) << prefix << ": " << mf.status().message();
    EXPECT_EQ((*mf)->config().architecture, "gemma3");
    EXPECT_EQ((*mf)->config().n_layers, 6);
    auto got = testing::tiny_logits(dir, ids, 2048, 16, "flash");
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, *want) << prefix;
  }
  // The same tensors under a text-only Gemma3ForCausalLM config: the vision tensor is refused.
  std::filesystem::copy_file(kData + "gemma3-tiny/hf/config.json", tmp + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto text_only = ModelFile::open(tmp);
  ASSERT_FALSE(text_only.ok());
  EXPECT_NE(text_only.status().message().find("vision_tower"), std::string::npos) << text_only.status().message();
  // Without text_config it is refused with one line naming the key.
  std::ofstream(tmp + "/config.json") << R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"})";
  auto bad = ModelFile::open(tmp);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("text_config"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(tmp);
}

/// gemma3-tiny/hf with its config.json edited by `edit` (the weights linked), in `dir`.
template <typename Edit>
std::string edited_gemma3(const std::string& dir, Edit edit) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream cin(kData + "gemma3-tiny/hf/config.json");
  nlohmann::json j = nlohmann::json::parse(cin);
  edit(j);
  std::ofstream(dir + "/config.json") << j.dump(2);
  fs::create_symlink(kData + "gemma3-tiny/hf/model.safetensors", dir + "/model.safetensors");
  return dir;
}

// transformers 5's rope_parameters (per layer type for Gemma 3) mean the same RoPE.
TEST(Gemma, RopeParametersAsTransformers5WritesThem) {
  const auto ids = testing::tiny_sequence("short");
  auto want = testing::tiny_logits(kData + "gemma3-tiny/hf", ids, 2048, 16, "flash");
  ASSERT_TRUE(want.ok()) << want.status().message();
  const std::string tmp = (std::filesystem::temp_directory_path() / "llmserve_gemma3_rp").string();
  const std::string dir = edited_gemma3(tmp, [](nlohmann::json& j) {
    j["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
    j.erase("rope_scaling");
    j.erase("rope_theta");
    j.erase("rope_local_base_freq");
  });
  auto got = testing::tiny_logits(dir, ids, 2048, 16, "flash");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
  // Refused, naming the key: a scaled sliding RoPE, bidirectional attention, a vision tensor in
  // a text-only checkpoint is covered by the multimodal test's near misses.
  for (auto edit : {+[](nlohmann::json& j) {
                      j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
                    },
                    +[](nlohmann::json& j) { j["use_bidirectional_attention"] = true; },
                    +[](nlohmann::json& j) { j["rope_parameters"] = {{"rope_theta", 5.0}}; }}) {
    auto bad = ModelFile::open(edited_gemma3(tmp, edit));
    if (bad.ok()) {  // rope_theta 5 disagrees with the config's 1e6: must not load either
      ADD_FAILURE() << "accepted";
      continue;
    }
    std::printf("refused: %s\n", bad.status().message().c_str());
  }
  std::filesystem::remove_all(tmp);
}

/// Greedy continuations of 3 requests sharing a 96-token prefix of `long` (past the sliding
/// windows), each with its own 8-token tail, 24 tokens each, blocks of 16.
std::vector<std::vector<int32_t>> generate(const std::string& model, bool prefix_caching) {
  EngineConfig c;
  c.model_path = model;
  c.num_threads = 2;
  c.cache.block_size = 16;
  c.cache.num_kv_blocks = 64;
  c.cache.enable_prefix_caching = prefix_caching;
  c.cache.kv_cache_dtype = DType::kF32;
  c.scheduler.max_num_batched_tokens = 48;  // chunked prefill
  c.scheduler.check_invariants = true;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  std::vector<std::vector<int32_t>> out(3);
  if (!e.ok()) return out;
  const auto ids = testing::tiny_sequence("long");
  for (int32_t r = 0; r < 3; ++r) {
    EngineRequest req;
    req.prompt_token_ids.assign(ids.begin(), ids.begin() + 96);
    req.prompt_token_ids.insert(req.prompt_token_ids.end(), ids.begin() + 100 + 8 * r, ids.begin() + 108 + 8 * r);
    req.params.temperature = 0;
    req.params.max_tokens = 24;
    req.params.ignore_eos = true;
    EXPECT_TRUE((*e)->add_request(r, std::move(req)).ok());
    // One at a time, so later requests find the first one's prefix blocks cached.
    while ((*e)->has_unfinished_requests())
      for (const RequestOutput& o : (*e)->step())
        out[o.request_id].insert(out[o.request_id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
  }
  if (prefix_caching) EXPECT_GT((*e)->stats().prefix_cache_hits_total, 0) << model;
  return out;
}

// Prefix caching with interleaved windows: cached prefix blocks give the same tokens.
TEST(Gemma, PrefixCachingGivesTheSameTokens) {
  for (const char* m : kModels) {
    const std::string path = kData + m + "/model.gguf";
    const auto cold = generate(path, false);
    const auto warm = generate(path, true);
    EXPECT_EQ(cold, warm) << m;
    EXPECT_EQ(cold[0].size(), 24u) << m;
  }
}

}  // namespace
}  // namespace llmserve
