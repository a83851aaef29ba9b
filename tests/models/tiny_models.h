// Test helpers for the tiny random models committed in tests/models/data (each written with its
// reference logits by scripts/references/tiny_models.py, an independent float64 NumPy forward
// pass, and run by llama.cpp through scripts/references/llamacpp_reference.sh): the token
// sequences, the reference logits and our logits through the runner.
#pragma once

#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve::testing {

/// tests/models/data/ (LLMSERVE_SOURCE_DIR is defined for the tests that use this header).
inline std::string tiny_model_dir(const std::string& model) {
  return std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/" + model + "/";
}

/// The `short` (24) or `long` (160) token sequence of ../shared/testdata/models/synthetic.
inline std::vector<int32_t> tiny_sequence(const std::string& which) {
  std::ifstream in(std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/sequences.json");
  return nlohmann::json::parse(in)[which].get<std::vector<int32_t>>();
}

/// `who`_logits_`seq`.npy of a model (who: numpy or llamacpp), float32 [T, vocab].
inline std::vector<float> tiny_reference(const std::string& model, const std::string& seq,
                                         const std::string& who = "numpy") {
  auto ref = read_npy(tiny_model_dir(model) + who + "_logits_" + seq + ".npy");
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  return ref.ok() ? ref->data : std::vector<float>{};
}

/// Our logits for every position of `ids` (F32 KV cache, `threads` threads).
inline Expected<std::vector<float>> tiny_logits(const std::string& path, const std::vector<int32_t>& ids,
                                                int32_t chunk, int32_t block_size, const std::string& backend,
                                                int32_t threads = 2) {
  LLMS_ASSIGN_OR_RETURN(auto file, ModelFile::open(path));
  PromptLogitsOptions opt;
  opt.chunk_size = chunk;
  opt.block_size = block_size;
  opt.attention_backend = backend;
  opt.kv_cache_dtype = DType::kF32;
  opt.num_threads = threads;
  return compute_prompt_logits(*file, ids, opt);
}

/// One run of a tiny model against its NumPy reference logits.
struct TinyCase {
  std::string model;     // folder under tests/models/data
  std::string path;      // inside it: "model.gguf" or "hf"
  std::string sequence;  // short / long
  int32_t chunk;         // tokens per forward pass
  int32_t block_size;
  std::string backend;
};

/// The sweep every tiny model runs: for each (model, path) and backend, both sequences whole
/// and in chunks of 7, `long` one token per step (every position a decode), and `long` in
/// chunks of 37 with single-token blocks.
inline std::vector<TinyCase> tiny_cases(const std::vector<std::pair<std::string, std::string>>& models,
                                        const std::vector<std::string>& backends) {
  std::vector<TinyCase> out;
  for (const auto& [m, path] : models)
    for (const std::string& b : backends) {
      for (const char* s : {"short", "long"})
        for (int32_t chunk : {2048, 7}) out.push_back({m, path, s, chunk, 16, b});
      out.push_back({m, path, "long", 1, 16, b});
      out.push_back({m, path, "long", 37, 1, b});
    }
  return out;
}

/// A gtest-safe name: model prefix, format, sequence, chunk, block size, backend.
inline std::string tiny_case_name(const ::testing::TestParamInfo<TinyCase>& info) {
  const TinyCase& c = info.param;
  std::string m = c.model.substr(0, c.model.find('-'));
  for (char& ch : m)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  std::string backend = c.backend;
  for (char& ch : backend)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return m + "_" + (c.path == "hf" ? "hf" : "gguf") + "_" + c.sequence + "_c" + std::to_string(c.chunk) + "_b" +
         std::to_string(c.block_size) + "_" + backend;
}

/// Our logits for the case within 1e-3 of NumPy's at every position, with the same argmax.
inline void expect_matches_numpy(const TinyCase& c) {
  auto got = tiny_logits(tiny_model_dir(c.model) + c.path, tiny_sequence(c.sequence), c.chunk, c.block_size, c.backend);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const Compare r = compare(*got, tiny_reference(c.model, c.sequence), 512);
  std::printf("%s %s %s chunk %d block %d %s: max |diff| %.3e\n", c.model.c_str(), c.path.c_str(), c.sequence.c_str(),
              c.chunk, c.block_size, c.backend.c_str(), r.max_diff);
  EXPECT_EQ(r.argmax_mismatches, 0);
  EXPECT_LE(r.max_diff, 1e-3);
}

/// Batch invariance (docs/batch_invariance.md): `long`'s logits are the same bits whether the
/// prompt runs whole, one token per step or in chunks of 13 (flash, block 16).
inline void expect_chunking_invariant(const std::string& path) {
  const auto ids = tiny_sequence("long");
  auto whole = tiny_logits(path, ids, 2048, 16, "flash");
  auto steps = tiny_logits(path, ids, 1, 16, "flash");
  auto chunks = tiny_logits(path, ids, 13, 16, "flash");
  ASSERT_TRUE(whole.ok() && steps.ok() && chunks.ok()) << path;
  EXPECT_EQ(compare(*whole, *steps, 512).max_diff, 0.0) << path;
  EXPECT_EQ(compare(*whole, *chunks, 512).max_diff, 0.0) << path;
}

}  // namespace llmserve::testing
