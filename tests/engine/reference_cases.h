// Loads ../shared/testdata/reference/stories260K_greedy.json (llama2.c run.c greedy outputs).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmserve::testing {

inline std::string shared_path(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/" + rel;
}
inline std::string stories_bin() { return shared_path("models/stories260K/stories260K.bin"); }
inline std::string stories_gguf() { return shared_path("models/stories260K/stories260K.gguf"); }
inline std::string stories_tokenizer() { return shared_path("models/stories260K/tok512.bin"); }

struct ReferenceCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string text;
};

inline std::vector<ReferenceCase> load_reference_cases() {
  std::ifstream in(shared_path("testdata/reference/stories260K_greedy.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<ReferenceCase> cases;
  for (const auto& c : j["cases"]) {
    cases.push_back({c["prompt"].get<std::string>(), c["prompt_ids"].get<std::vector<int32_t>>(),
                     c["generated_ids"].get<std::vector<int32_t>>(), c["text"].get<std::string>()});
  }
  return cases;
}

}  // namespace llmserve::testing
