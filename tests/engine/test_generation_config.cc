// A Hugging Face directory's generation_config.json reaches the engine: its eos_token_id list
// stops generation like the tokenizer's EOS (unless ignore_eos), and its temperature / top_p /
// top_k become the default sampling parameters of API requests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/llm_engine.h"
#include "engine/model_assets.h"
#include "models/model_file.h"

namespace llmserve {
namespace {

namespace fs = std::filesystem;

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

struct HfDir {
  fs::path path;
  explicit HfDir(const std::string& generation_config) {
    std::string tmpl = (fs::temp_directory_path() / "llmserve_gen_XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path = tmpl;
    fs::copy_file(synth("llama-gqa/hf/config.json"), path / "config.json");
    fs::create_symlink(synth("llama-gqa/hf/model.safetensors"), path / "model.safetensors");
    if (!generation_config.empty())
      std::ofstream(path / "generation_config.json") << generation_config;
  }
  ~HfDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::unique_ptr<LLMEngine> make_engine(const fs::path& dir, const std::string& mode = "auto") {
  EngineConfig c;
  c.model_path = dir.string();
  c.generation_config = mode;
  c.tokenizer_path = synth("llama-gqa/model.gguf");  // same 512-piece vocabulary
  c.num_threads = 1;
  c.cache.num_kv_blocks = 64;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

std::pair<std::vector<int32_t>, FinishReason> run(LLMEngine& e, bool ignore_eos) {
  EngineRequest r;
  r.prompt_token_ids = {1, 501, 500, 505, 196};
  r.params.temperature = 0;
  r.params.max_tokens = 8;
  r.params.ignore_eos = ignore_eos;
  EXPECT_TRUE(e.add_request(7, std::move(r)).ok());
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  while (e.has_unfinished_requests())
    for (const RequestOutput& o : e.step()) {
      tokens.insert(tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) reason = o.finish_reason;
    }
  return {tokens, reason};
}

/// The greedy tokens of the directory without generation_config.json (nothing stops them).
std::vector<int32_t> free_run_tokens() {
  HfDir dir("");
  auto e = make_engine(dir.path);
  EXPECT_NE(e, nullptr);
  if (e == nullptr) return {};
  EXPECT_EQ(e->default_sampling_params().temperature, SamplingParams{}.temperature);
  return run(*e, false).first;
}

TEST(GenerationConfig, EosListStopsGenerationAndSetsDefaults) {
  const std::vector<int32_t> free_run = free_run_tokens();
  ASSERT_EQ(free_run.size(), 8u);
  // Declare the third generated token an end-of-sequence id (next to the tokenizer's 2).
  const int32_t stop_id = free_run[2];
  const size_t first = std::find(free_run.begin(), free_run.end(), stop_id) - free_run.begin();
  HfDir dir("{\"eos_token_id\": [2, " + std::to_string(stop_id) +
            "], \"temperature\": 0.25, \"top_p\": 0.5, \"top_k\": 7}");
  auto e = make_engine(dir.path);
  ASSERT_NE(e, nullptr);
  auto [tokens, reason] = run(*e, false);
  EXPECT_EQ(reason, FinishReason::kStop);
  ASSERT_EQ(tokens.size(), first + 1);
  EXPECT_EQ(tokens.back(), stop_id);
  auto [all, why] = run(*e, true);  // ignore_eos: the list does not stop it either
  EXPECT_EQ(all, free_run);
  EXPECT_EQ(why, FinishReason::kLength);
  const SamplingParams d = e->default_sampling_params();
  EXPECT_FLOAT_EQ(d.temperature, 0.25f);
  EXPECT_FLOAT_EQ(d.top_p, 0.5f);
  EXPECT_EQ(d.top_k, 7);
}

TEST(GenerationConfig, VllmModeDropsSamplingDefaultsButKeepsEosIds) {
  const std::vector<int32_t> free_run = free_run_tokens();
  ASSERT_EQ(free_run.size(), 8u);
  const int32_t stop_id = free_run[2];
  const size_t first = std::find(free_run.begin(), free_run.end(), stop_id) - free_run.begin();
  HfDir dir("{\"eos_token_id\": [2, " + std::to_string(stop_id) +
            "], \"temperature\": 0.25, \"top_p\": 0.5, \"top_k\": 7, \"min_p\": 0.1, "
            "\"repetition_penalty\": 1.3}");
  {
    auto e = make_engine(dir.path);  // auto: all five defaults
    ASSERT_NE(e, nullptr);
    const SamplingParams d = e->default_sampling_params();
    EXPECT_FLOAT_EQ(d.min_p, 0.1f);
    EXPECT_FLOAT_EQ(d.repetition_penalty, 1.3f);
  }
  auto e = make_engine(dir.path, "vllm");
  ASSERT_NE(e, nullptr);
  const SamplingParams d = e->default_sampling_params(), neutral;
  EXPECT_EQ(d.temperature, neutral.temperature);
  EXPECT_EQ(d.top_p, neutral.top_p);
  EXPECT_EQ(d.top_k, neutral.top_k);
  EXPECT_EQ(d.min_p, neutral.min_p);
  EXPECT_EQ(d.repetition_penalty, neutral.repetition_penalty);
  // vLLM reads generation_config.json's eos_token_id in every mode: the list still stops.
  auto [tokens, reason] = run(*e, false);
  EXPECT_EQ(reason, FinishReason::kStop);
  EXPECT_EQ(tokens.size(), first + 1);
}

TEST(GenerationConfig, DirectoryReplacesTheCheckpointsFile) {
  HfDir model("{\"temperature\": 0.25, \"eos_token_id\": 2}");
  HfDir other("{\"temperature\": 0.75, \"top_k\": 3, \"eos_token_id\": [2, 9]}");
  auto e = make_engine(model.path, other.path.string());
  ASSERT_NE(e, nullptr);
  const SamplingParams d = e->default_sampling_params();
  EXPECT_FLOAT_EQ(d.temperature, 0.75f);
  EXPECT_EQ(d.top_k, 3);
  EXPECT_FLOAT_EQ(d.top_p, 1.0f);  // not in the directory's file: SamplingParams' default

  auto file = ModelFile::open(model.path.string());
  ASSERT_TRUE(file.ok());
  auto g = resolve_generation_config(other.path.string(), **file);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{2, 9}));
  EXPECT_EQ(describe_generation_config(other.path.string(), **file, *g),
            "generation config (" + (other.path / "generation_config.json").string() +
                "): sampling defaults temperature=0.75, top_k=3; eos ids 2, 9");
  g = resolve_generation_config("vllm", **file);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(describe_generation_config("vllm", **file, *g),
            "generation config (vllm): sampling defaults none (--generation-config vllm); eos "
            "ids 2");
  EXPECT_EQ(describe_generation_config("auto", **file, (*file)->generation_config()),
            "generation config (auto: " + (model.path / "generation_config.json").string() +
                "): sampling defaults temperature=0.25; eos ids 2");

  HfDir empty("");  // a directory without generation_config.json
  const std::string e_dir = empty.path.string();
  EXPECT_EQ(resolve_generation_config(e_dir, **file).status().message(),
            "--generation-config " + e_dir + ": the directory has no generation_config.json");
  EXPECT_EQ(resolve_generation_config("/nonexistent", **file).status().message(),
            "--generation-config /nonexistent: not auto, vllm or a directory");
  HfDir big("{\"eos_token_id\": 100000}");
  EXPECT_EQ(resolve_generation_config(big.path.string(), **file).status().message(),
            "--generation-config " + big.path.string() +
                ": eos_token_id 100000 is outside the vocabulary (vocab_size 512)");
}

TEST(GenerationConfig, MaxNewTokensIsTheDefaultMaxTokens) {
  HfDir dir("{\"max_new_tokens\": 256}");
  auto file = ModelFile::open(dir.path.string());
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(describe_generation_config("auto", **file, (*file)->generation_config()),
            "generation config (auto: " + (dir.path / "generation_config.json").string() +
                "): sampling defaults none; no eos ids; max_new_tokens=256 (the default max_tokens, "
                "capped by the context's room)");
}

TEST(GenerationConfig, HfDirectoryNeedsAVocabulary) {
  HfDir dir("");
  EngineConfig c;
  c.model_path = dir.path.string();
  c.num_threads = 1;
  c.cache.num_kv_blocks = 8;
  auto e = LLMEngine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--tokenizer"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace llmserve
