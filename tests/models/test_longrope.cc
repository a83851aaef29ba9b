// LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini: rope_scaling "longrope"; RopeScalingType::kLongRope)
// on tests/models/data/phi3-longrope-tiny, written with its float64 NumPy references by
// scripts/references/longrope_models.py (transformers' _compute_longrope_parameters: original
// context 64, max_position_embeddings 512, factor 8, attention factor sqrt(1 + ln 8 / ln 64)).
// transformers picks the long factors when a forward's sequence is longer than the original
// context; llama.cpp when the context size is (n_ctx); we follow llama.cpp (the served
// --max-model-len decides once, so a sequence's RoPE never depends on its length or batch):
//   short (24 tokens), max_model_len 64   -> short factors = transformers' choice
//   long (160 tokens), max_model_len 512  -> long factors  = transformers' choice
//   short, max_model_len 512              -> long factors  (transformers: short; llama.cpp: long)
#include <gtest/gtest.h>

#include <cmath>

#include "tiny_models.h"

namespace llmserve {
namespace {

const std::string kDir = testing::tiny_model_dir("phi3-longrope-tiny");

Expected<std::vector<float>> logits(const std::string& path, const std::string& seq, int32_t max_model_len,
                                    const std::string& backend, int32_t chunk) {
  LLMS_ASSIGN_OR_RETURN(auto file, ModelFile::open(path));
  PromptLogitsOptions opt;
  opt.chunk_size = chunk;
  opt.attention_backend = backend;
  opt.kv_cache_dtype = DType::kF32;
  opt.num_threads = 2;
  opt.max_model_len = max_model_len;
  return compute_prompt_logits(*file, testing::tiny_sequence(seq), opt);
}

TEST(LongRope, ConfigFromBothFormats) {
  for (const char* f : {"hf", "model.gguf"}) {
    auto file = ModelFile::open(kDir + f);
    ASSERT_TRUE(file.ok()) << file.status().message();
    const ModelConfig& c = (*file)->config();
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLongRope) << f;
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64) << f;
    EXPECT_EQ(c.max_position_embeddings, 512) << f;
    EXPECT_NEAR(c.rope_attention_factor(), std::sqrt(1.0 + std::log(8.0) / std::log(64.0)), 1e-6) << f;
    EXPECT_EQ(static_cast<int32_t>(c.rope_scaling.long_factor.size()), c.rope_dim() / 2) << f;
    EXPECT_EQ(c.rope_scaling.long_factor.size(), c.rope_scaling.short_factor.size()) << f;
    ModelConfig shortctx = c;
    shortctx.select_longrope(64);
    EXPECT_FALSE(shortctx.rope_scaling.use_long_factor);
    shortctx.select_longrope(65);
    EXPECT_TRUE(shortctx.rope_scaling.use_long_factor);
    shortctx.select_longrope(0);  // max_position_embeddings
    EXPECT_TRUE(shortctx.rope_scaling.use_long_factor);
  }
}

TEST(LongRope, LogitsMatchNumpy) {
  struct Case {
    const char* seq;
    int32_t max_model_len;
    const char* reference;
  };
  for (const Case& k : {Case{"short", 64, "numpy_logits_short.npy"}, Case{"long", 0, "numpy_logits_long.npy"},
                        Case{"short", 0, "numpy_logits_short_longfactors.npy"}})
    for (const char* f : {"hf", "model.gguf"})
      for (const char* backend : {"flash", "naive"})
        for (int32_t chunk : {2048, 7}) {
          auto got = logits(kDir + f, k.seq, k.max_model_len, backend, chunk);
          ASSERT_TRUE(got.ok()) << got.status().message();
          auto ref = read_npy(kDir + k.reference);
          ASSERT_TRUE(ref.ok()) << ref.status().message();
          const testing::Compare r = testing::compare(*got, ref->data, 512);
          std::printf("%s %s max_model_len %d %s chunk %d: max |diff| %.3e vs %s\n", f, k.seq, k.max_model_len,
                      backend, chunk, r.max_diff, k.reference);
          EXPECT_EQ(r.argmax_mismatches, 0) << f << " " << k.seq;
          EXPECT_LE(r.max_diff, 1e-3) << f << " " << k.seq;
        }
  // The two factor lists really differ in their logits (the check can fail).
  auto a = logits(kDir + "hf", "short", 64, "flash", 2048);
  auto b = logits(kDir + "hf", "short", 0, "flash", 2048);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(testing::compare(*a, *b, 512).max_diff, 1e-2);
}

// llama.cpp on the same GGUF: its context is padded to 256 or more, so it always takes the long
// factors here (the folder's README); ours with the same choice.
TEST(LongRope, MatchLlamaCppOnTheSameFile) {
  for (const char* seq : {"short", "long"}) {
    auto got = logits(kDir + "model.gguf", seq, 0, "flash", 2048);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const testing::Compare r = testing::compare(*got, testing::tiny_reference("phi3-longrope-tiny", seq, "llamacpp"), 512);
    std::printf("%s vs llama.cpp: max |diff| %.3e\n", seq, r.max_diff);
    EXPECT_EQ(r.argmax_mismatches, 0) << seq;
    EXPECT_LE(r.max_diff, 1e-4) << seq;
  }
}

}  // namespace
}  // namespace llmserve
