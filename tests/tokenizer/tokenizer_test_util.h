// Shared helpers for the tokenizer tests: reference-data paths, file reading, and a naive
// O(n^2) SentencePiece encoder (llama2.c run.c's rescan loop) to cross-check the fast one.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace llmserve::testing {

inline std::string shared_path(std::string_view rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/" + std::string(rel);
}
inline std::string tok512_path() { return shared_path("models/stories260K/tok512.bin"); }
inline std::string stories_gguf_path() {
  return shared_path("models/stories260K/stories260K.gguf");
}
inline std::string reference_json_path() {
  return shared_path("testdata/reference/stories260K_greedy.json");
}
inline std::string vocab_test_path(std::string_view name) {
  return shared_path("testdata/tokenizer/ggml-vocab-" + std::string(name) + ".gguf");
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

/// Reads <vocab>.gguf.inp (strings separated by "\n__ggml_vocab_test__\n") and .gguf.out
/// (one line of ids per string), as llama.cpp's test-tokenizer-0 does.
inline std::vector<VectorCase> read_vectors(const std::string& gguf_path) {
  std::string inp = read_file(gguf_path + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  for (size_t pos; (pos = inp.find(sep)) != std::string::npos; inp.erase(0, pos + sep.size())) {
    cases.push_back({inp.substr(0, pos), {}});
  }
  std::istringstream out(read_file(gguf_path + ".out"));
  std::string line;
  for (VectorCase& c : cases) {
    EXPECT_TRUE(std::getline(out, line)) << "missing ids for: " << c.text;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

inline std::unique_ptr<Tokenizer> load_tok512() {
  Expected<Vocab> vocab = load_llama2c_vocab(tok512_path(), 512);
  EXPECT_TRUE(vocab.ok()) << vocab.status().message();
  return vocab.ok() ? make_spm_tokenizer(std::move(vocab).value()) : nullptr;
}

/// The reference algorithm, written for clarity: split into code points (ill-formed bytes
/// alone), repeatedly merge the best-scoring adjacent pair (leftmost on ties) by rescanning
/// (llama2.c run.c's O(n^2) loop), then map pieces to ids with byte fallback.
class NaiveSpm {
 public:
  explicit NaiveSpm(const Vocab& vocab) : vocab_(vocab) {
    for (int32_t id = vocab.size() - 1; id >= 0; --id) ids_[vocab.pieces[id]] = id;
  }

  std::vector<int32_t> encode(std::string_view text) const {
    if (text.empty()) return {};
    std::vector<std::string> syms = split(normalize(text));
    while (merge_best(syms)) {
    }
    std::vector<int32_t> out;
    for (const std::string& sym : syms) {
      const auto it = ids_.find(sym);
      if (it != ids_.end()) {
        out.push_back(it->second);
        continue;
      }
      for (char c : sym) out.push_back(vocab_.byte_to_id[static_cast<uint8_t>(c)]);
    }
    return out;
  }

 private:
  std::string normalize(std::string_view text) const {
    std::string s = vocab_.add_space_prefix ? vocab_.space_marker : "";
    for (char c : text) s += c == ' ' ? vocab_.space_marker : std::string(1, c);
    return s;
  }

  static std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> syms;
    for (size_t pos = 0; pos < s.size();) {
      const utf8::Seq seq = utf8::classify(s, pos);
      const size_t len = seq.kind == utf8::SeqKind::kComplete ? seq.len : 1;
      syms.push_back(s.substr(pos, len));
      pos += len;
    }
    return syms;
  }

  bool merge_best(std::vector<std::string>& syms) const {
    float best = 0;
    int best_i = -1;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const auto it = ids_.find(syms[i] + syms[i + 1]);
      if (it == ids_.end()) continue;
      if (best_i < 0 || vocab_.scores[it->second] > best) {
        best = vocab_.scores[it->second];
        best_i = static_cast<int>(i);
      }
    }
    if (best_i < 0) return false;
    syms[best_i] += syms[best_i + 1];
    syms.erase(syms.begin() + best_i + 1);
    return true;
  }

  const Vocab& vocab_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace llmserve::testing
