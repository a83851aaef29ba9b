// A Hugging Face directory's generation_config.json reaches the engine: its eos_token_id list
// stops generation like the tokenizer's EOS (unless ignore_eos), and its temperature / top_p /
// top_k become the default sampling parameters of API requests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/llm_engine.h"

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

std::unique_ptr<LLMEngine> make_engine(const fs::path& dir) {
  EngineConfig c;
  c.model_path = dir.string();
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

TEST(GenerationConfig, EosListStopsGenerationAndSetsDefaults) {
  std::vector<int32_t> free_run;
  {
    HfDir dir("");
    auto e = make_engine(dir.path);
    ASSERT_NE(e, nullptr);
    free_run = run(*e, false).first;
    ASSERT_EQ(free_run.size(), 8u);
    EXPECT_EQ(e->default_sampling_params().temperature, SamplingParams{}.temperature);
  }
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
