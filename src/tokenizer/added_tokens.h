// Added/special tokens matched in the text before the model sees it, in the two ways the
// reference implementations do it:
//  - kLlamaCpp (GGUF vocabularies; llama.cpp llama_vocab::tokenizer_st_partition): tokens are
//    tried one after another, longest first, each splitting every remaining text fragment at
//    all its occurrences; lstrip/rstrip drop ASCII whitespace next to the token.
//  - kHuggingFace (tokenizer.json; tokenizers AddedVocabulary::find_matches): leftmost-longest
//    matching over all tokens at once; single_word, lstrip and rstrip (Unicode whitespace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llmserve {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;      // matched only with parse_special
  bool lstrip = false;       // swallow whitespace on the left
  bool rstrip = false;       // swallow whitespace on the right
  bool single_word = false;  // only when not inside a word (kHuggingFace)
  bool normalized = false;   // matched in the normalized text (kHuggingFace second pass)
};

/// A run of the input: either a token (id) or text bytes [begin, end) of the input.
struct Fragment {
  bool is_token = false;
  int32_t id = -1;
  size_t begin = 0;
  size_t end = 0;
};

class AddedTokenSplitter {
 public:
  enum class Mode { kLlamaCpp, kHuggingFace };

  AddedTokenSplitter() = default;
  AddedTokenSplitter(std::vector<AddedToken> tokens, Mode mode);

  /// Splits `text` into token and text fragments (text fragments are non-empty), using the
  /// tokens whose `normalized` flag equals `normalized` (kLlamaCpp: all tokens, and only when
  /// normalized is false). Special tokens are matched only when `parse_special`.
  std::vector<Fragment> split(std::string_view text, bool parse_special, bool normalized) const;

  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Trie {
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child node
    std::vector<int32_t> terminal;                // node -> index into tokens_, or -1
    bool first_byte[256] = {};
    bool empty() const { return terminal.size() <= 1; }
  };

  std::vector<Fragment> split_llama_cpp(std::string_view text, bool parse_special) const;
  std::vector<Fragment> split_hf(std::string_view text, bool parse_special, const Trie& trie) const;
  void add_to_trie(Trie& trie, int32_t index);

  std::vector<AddedToken> tokens_;
  Mode mode_ = Mode::kHuggingFace;
  std::vector<int32_t> by_length_;  // kLlamaCpp: indices into tokens_, longest first
  Trie raw_trie_;
  Trie normalized_trie_;
};

}  // namespace llmserve
