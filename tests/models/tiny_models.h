// Test helpers for the tiny random models committed in tests/models/data (each written with its
// reference logits by scripts/references/tiny_models.py, an independent float64 NumPy forward
// pass, and run by llama.cpp through scripts/references/llamacpp_reference.sh): the token
// sequences, the reference logits and our logits through the runner.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

/// Our logits for every position of `ids` (F32 KV cache, 2 threads).
inline Expected<std::vector<float>> tiny_logits(const std::string& path, const std::vector<int32_t>& ids,
                                                int32_t chunk, int32_t block_size, const std::string& backend) {
  LLMS_ASSIGN_OR_RETURN(auto file, ModelFile::open(path));
  PromptLogitsOptions opt;
  opt.chunk_size = chunk;
  opt.block_size = block_size;
  opt.attention_backend = backend;
  opt.kv_cache_dtype = DType::kF32;
  opt.num_threads = 2;
  return compute_prompt_logits(*file, ids, opt);
}

}  // namespace llmserve::testing
