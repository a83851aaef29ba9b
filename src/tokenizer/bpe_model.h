// The BPE model shared by GGUF `gpt2` vocabularies and tokenizer.json `BPE`: a pre-token
// ("word") is split into characters, then the adjacent pair with the lowest merge rank is merged
// repeatedly (leftmost on ties), using a priority queue over a linked list of symbols:
// O(n log n) in the word length. Merge lookups go through a hash map keyed by the two ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace llmserve {

/// Heterogeneous string hashing, so string_view lookups do not allocate.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    /// A word that is itself in the vocabulary is emitted as is (Llama 3, tokenizer.json
    /// "ignore_merges").
    bool ignore_merges = false;
    /// Characters missing from the vocabulary become their bytes' <0xNN> tokens.
    bool byte_fallback = false;
    /// Consecutive unknown characters share one unk token.
    bool fuse_unk = false;
    /// Token for unknown characters (-1: none; then llama.cpp's rule applies: each byte of an
    /// unknown symbol is looked up as a one-byte token and dropped if missing).
    int32_t unk_id = -1;
  };

  BpeModel() = default;

  /// `tokens`: id -> token text ("" for ids that are not model tokens). `merges`: in rank
  /// order. A merge whose parts or result are not in the vocabulary is skipped and counted in
  /// skipped_merges(); a repeated pair keeps its first (lowest) rank.
  BpeModel(const std::vector<std::string>& tokens,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  /// Appends the ids of `word` to `out`.
  void encode(std::string_view word, std::vector<int32_t>& out) const;

  /// The id of a token, or -1.
  int32_t find(std::string_view token) const {
    const auto it = index_.find(token);
    return it == index_.end() ? -1 : it->second;
  }

  size_t num_merges() const { return merges_.size(); }
  size_t skipped_merges() const { return skipped_merges_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  TokenIndex index_;
  std::unordered_map<uint64_t, Merge> merges_;
  Options options_;
  int32_t byte_ids_[256];
  size_t skipped_merges_ = 0;
};

}  // namespace llmserve
