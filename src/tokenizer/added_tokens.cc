#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/unicode.h"

namespace llmserve {
namespace {

bool ascii_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

/// Bytes of Unicode whitespace at the end of s[0, end).
size_t whitespace_before(std::string_view s, size_t end, size_t floor) {
  size_t pos = end;
  while (pos > floor) {
    size_t len = 0;
    const int32_t cp = unicode::decode_last(s, pos, &len);
    if (!unicode::is_whitespace(cp) || pos - len < floor) break;
    pos -= len;
  }
  return end - pos;
}

/// Bytes of Unicode whitespace at the start of s[begin, ...).
size_t whitespace_after(std::string_view s, size_t begin) {
  size_t pos = begin;
  while (pos < s.size()) {
    size_t len = 0;
    const int32_t cp = unicode::decode(s, pos, &len);
    if (!unicode::is_whitespace(cp)) break;
    pos += len;
  }
  return pos - begin;
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens, Mode mode)
    : tokens_(std::move(tokens)), mode_(mode) {
  raw_trie_.terminal.assign(1, -1);
  normalized_trie_.terminal.assign(1, -1);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    if (mode_ == Mode::kLlamaCpp) {
      by_length_.push_back(static_cast<int32_t>(i));
    } else {
      add_to_trie(tokens_[i].normalized ? normalized_trie_ : raw_trie_, static_cast<int32_t>(i));
    }
  }
  // llama.cpp sorts its special-token cache by text length, longest first (ties by id here).
  std::stable_sort(by_length_.begin(), by_length_.end(), [&](int32_t a, int32_t b) {
    if (tokens_[a].content.size() != tokens_[b].content.size())
      return tokens_[a].content.size() > tokens_[b].content.size();
    return tokens_[a].id < tokens_[b].id;
  });
}

void AddedTokenSplitter::add_to_trie(Trie& trie, int32_t index) {
  const std::string& s = tokens_[index].content;
  trie.first_byte[static_cast<uint8_t>(s[0])] = true;
  int32_t node = 0;
  for (char c : s) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto it = trie.edges.find(key);
    if (it == trie.edges.end()) {
      const auto child = static_cast<int32_t>(trie.terminal.size());
      trie.terminal.push_back(-1);
      it = trie.edges.emplace(key, child).first;
    }
    node = it->second;
  }
  // Should two added tokens have the same content, the first one listed wins.
  if (trie.terminal[node] < 0) trie.terminal[node] = index;
}

std::vector<Fragment> AddedTokenSplitter::split(std::string_view text, bool parse_special,
                                                bool normalized) const {
  if (text.empty()) return {};
  if (mode_ == Mode::kLlamaCpp) {
    if (normalized || by_length_.empty()) return {{false, -1, 0, text.size()}};
    return split_llama_cpp(text, parse_special);
  }
  const Trie& trie = normalized ? normalized_trie_ : raw_trie_;
  if (trie.empty()) return {{false, -1, 0, text.size()}};
  return split_hf(text, parse_special, trie);
}

std::vector<Fragment> AddedTokenSplitter::split_llama_cpp(std::string_view text,
                                                          bool parse_special) const {
  std::vector<Fragment> frags = {{false, -1, 0, text.size()}};
  for (int32_t index : by_length_) {
    const AddedToken& tok = tokens_[index];
    if (tok.special && !parse_special) continue;
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      const size_t end = f.end;
      while (begin < end) {
        const size_t hit = text.substr(0, end).find(tok.content, begin);
        if (hit == std::string_view::npos) break;
        size_t left_end = hit;
        if (tok.lstrip) {
          while (left_end > begin && ascii_space(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({false, -1, begin, left_end});
        next.push_back({true, tok.id, hit, hit + tok.content.size()});
        begin = hit + tok.content.size();
        if (tok.rstrip) {
          while (begin < end && ascii_space(text[begin])) ++begin;
        }
      }
      if (begin < end) next.push_back({false, -1, begin, end});
    }
    frags = std::move(next);
  }
  return frags;
}

std::vector<Fragment> AddedTokenSplitter::split_hf(std::string_view text, bool parse_special,
                                                   const Trie& trie) const {
  std::vector<Fragment> out;
  size_t emitted = 0;  // text before this offset is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    // Longest token starting at pos.
    int32_t best = -1;
    size_t best_len = 0;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]);
      const auto it = trie.edges.find(key);
      if (it == trie.edges.end()) break;
      node = it->second;
      if (trie.terminal[node] >= 0) {
        best = trie.terminal[node];
        best_len = i + 1 - pos;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[best];
    size_t start = pos;
    size_t stop = pos + best_len;
    pos = stop;  // the matcher resumes after this match whether or not it is used
    if (tok.special && !parse_special) continue;
    if (tok.single_word) {
      size_t len = 0;
      const bool word_before = start > 0 && unicode::is_word_char(unicode::decode_last(text, start, &len));
      const bool word_after = stop < text.size() && unicode::is_word_char(unicode::decode(text, stop, &len));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) start -= whitespace_before(text, start, emitted);
    if (tok.rstrip) stop += whitespace_after(text, stop);
    if (emitted < start) out.push_back({false, -1, emitted, start});
    out.push_back({true, tok.id, start, stop});
    emitted = stop;
    pos = std::max(pos, stop);
  }
  if (emitted < text.size()) out.push_back({false, -1, emitted, text.size()});
  return out;
}

}  // namespace llmserve
