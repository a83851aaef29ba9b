#include "structured_output/token_mask.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace llmserve::structured_output {

TokenVocab::TokenVocab(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < static_cast<int32_t>(bytes_.size()); ++id) {
    if (!bytes_[id].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  // Depth-first nodes from the sorted strings: each string adds nodes past its common prefix with
  // the previous one. open[d] = index of the node at depth d+1 on the current path.
  std::vector<uint32_t> open;
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (open.size() > common) {  // close finished subtrees
      nodes_[open.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      nodes_.push_back({static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0, 0, 0});
      open.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    }
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
    token_ids_.push_back(id);  // attached below
  }
  while (!open.empty()) {
    nodes_[open.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
    open.pop_back();
  }
  // Attach token ids to the node ending their string (in sorted order, ids are grouped).
  std::vector<int32_t> ids;
  ids.reserve(order.size());
  size_t k = 0;
  std::string path;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    path.resize(nodes_[i].depth - 1);
    path += static_cast<char>(nodes_[i].byte);
    nodes_[i].tokens_begin = static_cast<uint32_t>(ids.size());
    while (k < order.size() && bytes_[order[k]] == path) ids.push_back(order[k++]);
    nodes_[i].tokens_end = static_cast<uint32_t>(ids.size());
  }
  token_ids_ = std::move(ids);
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(n);
  // A previous id that is neither "start" nor BOS, so SentencePiece keeps a piece's leading space.
  int32_t prev = n;
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_special(id)) continue;
    bytes[id] = tokenizer.decode_token(prev, id);
  }
  return std::make_shared<TokenVocab>(std::move(bytes));
}

struct TokenMasker::CacheEntry {
  TokenBitmask accepted;           // tokens accepted without leaving the cached frames
  std::vector<uint32_t> uncertain; // ranks of tokens that leave them, sorted
};

void TokenMasker::walk(Matcher& m, const std::vector<int32_t>& heads, TokenBitmask& mask,
                       std::vector<uint32_t>* uncertain) {
  const TokenVocab& v = *vocab_;
  const auto& nodes = v.nodes();
  const auto& ids = v.token_ids();
  if (heads_by_depth_.size() < v.max_depth() + 1) heads_by_depth_.resize(v.max_depth() + 1);
  arena_at_.assign(v.max_depth() + 1, 0);
  tainted_.assign(v.max_depth() + 1, 0);
  const size_t arena_start = m.arena_.size();
  heads_by_depth_[0] = heads;
  arena_at_[0] = arena_start;
  // Ranks of the tokens in node n's subtree from rank `from` on (n's own tokens come first).
  auto subtree_uncertain = [&](const TokenVocab::Node& n, uint32_t from) {
    uint32_t end = n.subtree_end < nodes.size() ? nodes[n.subtree_end].tokens_begin : static_cast<uint32_t>(ids.size());
    for (uint32_t r = from; r < end; ++r) uncertain->push_back(r);
  };
  for (size_t i = 0; i < nodes.size();) {
    const auto& n = nodes[i];
    m.arena_.resize(arena_at_[n.depth - 1]);  // drop the previous sibling subtree's frames
    bool finished = false;
    // A byte some head consumed always leaves a live state (the grammar has no dead ends:
    // Grammar::prune_unproductive), so `consumed` means the prefix is allowed from these heads.
    const bool consumed = m.step(heads_by_depth_[n.depth - 1], n.byte, heads_by_depth_[n.depth], finished);
    // Tainted: some expansion on the way here reached the cached frames' cut-off bottom, so the
    // real state has more heads than these (frames below could consume the next bytes).
    const bool tainted_before = tainted_[n.depth - 1] != 0;
    if (!consumed) {
      if (tainted_before) subtree_uncertain(n, n.tokens_begin);
      i = n.subtree_end;
      continue;
    }
    // Consumed within the copied frames: allowed whatever lies below them.
    for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) mask_set(mask, ids[t]);
    const bool tainted = tainted_before || m.escaped_;
    if (heads_by_depth_[n.depth].empty()) {  // nothing here can take a further byte
      if (tainted) subtree_uncertain(n, n.tokens_end);
      i = n.subtree_end;
      continue;
    }
    tainted_[n.depth] = tainted;
    arena_at_[n.depth] = m.arena_.size();
    ++i;
  }
  m.arena_.resize(arena_start);
}

void TokenMasker::walk_ranks(Matcher& m, const std::vector<uint32_t>& ranks, TokenBitmask& mask) {
  const TokenVocab& v = *vocab_;
  const auto& ids = v.token_ids();
  if (heads_by_depth_.size() < v.max_depth() + 1) heads_by_depth_.resize(v.max_depth() + 1);
  arena_at_.assign(v.max_depth() + 1, 0);
  const size_t arena_start = m.arena_.size();
  heads_by_depth_[0] = m.heads_;
  arena_at_[0] = arena_start;
  const std::string* prev = nullptr;
  size_t valid = 0;  // depth up to which heads_by_depth_ holds prev's states
  for (uint32_t r : ranks) {
    const std::string& s = v.bytes(ids[r]);
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    size_t d = std::min(common, valid);
    if (prev && common > valid) {  // prev died at depth valid+1, and s shares that byte
      prev = &s;
      continue;
    }
    m.arena_.resize(arena_at_[d]);
    bool ok = true;
    for (; d < s.size(); ++d) {
      bool finished = false;
      if (!m.step(heads_by_depth_[d], static_cast<uint8_t>(s[d]), heads_by_depth_[d + 1], finished) ||
          (heads_by_depth_[d + 1].empty() && d + 1 < s.size())) {
        ok = false;
        break;
      }
      arena_at_[d + 1] = m.arena_.size();
    }
    valid = d;
    prev = &s;
    if (ok) mask_set(mask, ids[r]);
  }
  m.arena_.resize(arena_start);
}

std::shared_ptr<const TokenMasker::CacheEntry> TokenMasker::cache_entry(Matcher& m, int32_t head) {
  const CompiledGrammar& g = *m.grammar_;
  // Key: the positions of the top frames, and whether the stack ends within them.
  std::string key;
  std::vector<Matcher::Frame> chain;
  int32_t f = head;
  for (int k = 0; k < kCachedFrames && f >= 0; ++k) {
    const Matcher::Frame& fr = m.arena_[f];
    chain.push_back(fr);
    key.append(reinterpret_cast<const char*>(&fr), 3 * sizeof(uint32_t));
    f = fr.parent;
  }
  bool cut = f >= 0;
  key += cut ? 'c' : 'e';
  {
    std::lock_guard<std::mutex> lock(g.mask_cache_mu_);
    if (g.mask_cache_vocab_ != vocab_.get()) {
      g.mask_cache_.clear();
      g.mask_cache_bytes_ = 0;
      g.mask_cache_vocab_ = vocab_.get();
    }
    auto it = g.mask_cache_.find(key);
    if (it != g.mask_cache_.end()) return std::static_pointer_cast<const CacheEntry>(it->second);
  }
  // Copy the chain into the arena with the bottom parent cut to kEscape, and walk it.
  const size_t arena_start = m.arena_.size();
  for (size_t k = chain.size(); k-- > 0;) {
    Matcher::Frame fr = chain[k];
    fr.parent = k + 1 == chain.size() ? (cut ? Matcher::kEscape : -1) : static_cast<int32_t>(m.arena_.size() - 1);
    m.arena_.push_back(fr);
  }
  auto entry = std::make_shared<CacheEntry>();
  entry->accepted.assign((vocab_->vocab_size() + 63) / 64, 0);
  std::vector<int32_t> heads = {static_cast<int32_t>(m.arena_.size() - 1)};
  walk(m, heads, entry->accepted, &entry->uncertain);
  m.arena_.resize(arena_start);
  std::lock_guard<std::mutex> lock(g.mask_cache_mu_);
  // Bounded per grammar (a long enum or a minLength string has a state per position): past
  // the bound, entries are still computed and used, but not kept.
  const size_t bytes = entry->accepted.size() * sizeof(uint64_t) +
                      entry->uncertain.size() * sizeof(uint32_t) + key.size() + 64;
  if (g.mask_cache_bytes_ + bytes <= kMaxCacheBytesPerGrammar) {
    g.mask_cache_[key] = entry;
    g.mask_cache_bytes_ += bytes;
  }
  return entry;
}

void TokenMasker::fill(Matcher& m, TokenBitmask& mask) {
  mask.assign((vocab_->vocab_size() + 63) / 64, 0);
  uncertain_.clear();
  for (int32_t h : m.heads_) {
    auto e = cache_entry(m, h);
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= e->accepted[w];
    uncertain_.insert(uncertain_.end(), e->uncertain.begin(), e->uncertain.end());
  }
  if (m.heads_.size() > 1) {
    std::sort(uncertain_.begin(), uncertain_.end());
    uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  }
  // Skip the uncertain tokens some head already accepts.
  const auto& ids = vocab_->token_ids();
  size_t n = 0;
  for (uint32_t r : uncertain_) {
    if (!mask_test(mask, ids[r])) uncertain_[n++] = r;
  }
  uncertain_.resize(n);
  walk_ranks(m, uncertain_, mask);
}

void TokenMasker::fill_uncached(Matcher& m, TokenBitmask& mask) {
  mask.assign((vocab_->vocab_size() + 63) / 64, 0);
  walk(m, m.heads_, mask, nullptr);
}

void TokenMasker::fill_reference(const Matcher& matcher, const TokenVocab& vocab, TokenBitmask& mask) {
  mask.assign((vocab.vocab_size() + 63) / 64, 0);
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    if (vocab.bytes(id).empty()) continue;
    Matcher copy = matcher;
    if (copy.advance(vocab.bytes(id))) mask_set(mask, id);
  }
}

}  // namespace llmserve::structured_output
