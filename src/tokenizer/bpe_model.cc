#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/utf8.h"

namespace llmserve {
namespace {

struct Symbol {
  int32_t id;      // -1: not in the vocabulary (never merges)
  uint32_t begin;  // bytes of the word
  uint32_t len;    // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
};

/// Min-heap order: lowest rank first, then leftmost.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

}  // namespace

BpeModel::BpeModel(const std::vector<std::string>& tokens,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   Options options)
    : options_(options) {
  index_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    // A text listed twice maps to its last id, as llama.cpp's token_to_id does.
    if (!tokens[id].empty()) index_[tokens[id]] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = find(name);
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = find(a);
    const int32_t ib = find(b);
    joined.assign(a).append(b);
    const int32_t im = find(joined);
    if (ia < 0 || ib < 0 || im < 0) {
      ++skipped_merges_;
      continue;
    }
    merges_.emplace(key(ia, ib), Merge{static_cast<int32_t>(rank), im});
  }
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id, size_t begin, size_t len) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, static_cast<uint32_t>(begin), static_cast<uint32_t>(len), index - 1,
                       -1});
    if (index > 0) symbols[index - 1].next = index;
  };
  for (size_t pos = 0; pos < word.size();) {
    const utf8::Seq seq = utf8::classify(word, pos);
    const size_t len = seq.kind == utf8::SeqKind::kComplete ? seq.len : 1;
    const int32_t id = find(word.substr(pos, len));
    if (id >= 0) {
      add(id, pos, len);
    } else if (options_.byte_fallback &&
               std::all_of(word.begin() + pos, word.begin() + pos + len,
                           [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (size_t k = 0; k < len; ++k) add(byte_ids_[static_cast<uint8_t>(word[pos + k])], pos + k, 1);
    } else if (options_.unk_id >= 0) {
      if (options_.fuse_unk && !symbols.empty() && symbols.back().id == options_.unk_id) {
        symbols.back().len += static_cast<uint32_t>(len);
      } else {
        add(options_.unk_id, pos, len);
      }
    } else {
      add(-1, pos, len);
    }
    pos += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t a = symbols[left].id;
    const int32_t b = symbols[right].id;
    if (a < 0 || b < 0) return;
    const auto it = merges_.find(key(a, b));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, a, b, it->second.id});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    Symbol& r = symbols[c.right];
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.id != c.left_id ||
        r.id != c.right_id) {
      continue;  // stale
    }
    l.id = c.merged_id;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      const int32_t id = find(word.substr(s.begin + k, 1));
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace llmserve
