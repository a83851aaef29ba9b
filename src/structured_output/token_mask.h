// Per-step token masks: which tokens of a vocabulary a Matcher allows next. The vocabulary's
// byte strings are kept as a trie in depth-first order (sorted strings, each node with the end
// of its subtree), and the mask is one walk over it that advances the matcher byte by byte and
// skips a whole subtree at the first byte the grammar refuses (the token-trie walk of
// llguidance and XGrammar: Moskal et al. 2024; Dong et al. 2024, arXiv 2411.15100).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "structured_output/matcher.h"

namespace llmserve {
class Tokenizer;
}

namespace llmserve::structured_output {

/// The byte strings of a vocabulary's tokens, as a trie. Special tokens (and tokens with no
/// bytes) are not in it: a grammar never allows them; stopping is the caller's business
/// (allow the stop tokens when Matcher::can_finish()).
class TokenVocab {
 public:
  /// `token_bytes[id]`: the bytes token id stands for inside a text; "" = not a text token.
  explicit TokenVocab(std::vector<std::string> token_bytes);
  /// From a tokenizer: decode_token(prev, id) with a non-initial `prev` (so SentencePiece's
  /// leading space is kept, as it is mid-text); special tokens excluded.
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tokenizer);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

  struct Node {
    uint8_t byte;
    uint16_t depth;        // 1-based length of the prefix this node ends
    uint32_t subtree_end;  // first node index after this node's subtree
    uint32_t tokens_begin; // this node's token ids: token_ids()[tokens_begin .. tokens_end)
    uint32_t tokens_end;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  /// Token ids in byte-string order (a token's index here is its rank).
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

/// A token mask: bit id set = token id allowed. Words of 64 bits, ceil(vocab_size / 64) of them.
using TokenBitmask = std::vector<uint64_t>;

inline bool mask_test(const TokenBitmask& m, int32_t id) { return (m[id >> 6] >> (id & 63)) & 1; }
inline void mask_set(TokenBitmask& m, int32_t id) { m[id >> 6] |= uint64_t{1} << (id & 63); }

/// Computes masks for matchers over one vocabulary. Not thread-safe (scratch buffers); one per
/// thread.
///
/// Masks are assembled from per-position parts cached in the CompiledGrammar (XGrammar's
/// adaptive token mask cache, Dong et al. 2024 §3.2): for each stack head, the top
/// kCachedFrames frames of its stack are walked once over the whole trie with the frames below
/// cut off, which splits the vocabulary into tokens accepted without leaving those frames
/// (context-independent, stored as a bitset) and tokens that leave them (uncertain, a sorted
/// list). A mask is then the union of the heads' accepted sets plus the uncertain tokens that
/// survive a walk from the real state, sharing prefixes between consecutive tokens.
class TokenMasker {
 public:
  explicit TokenMasker(std::shared_ptr<const TokenVocab> vocab) : vocab_(std::move(vocab)) {}

  /// Frames per cache key.
  static constexpr int kCachedFrames = 3;
  /// Most bytes of cached mask parts kept per grammar (each part holds a vocabulary-sized
  /// bitset, 16 KiB for a 128k vocabulary: 256 MiB is ~16,000 parts; at 64 MiB some MaskBench
  /// schemas overflowed and warm p99 rose from 0.6 to 25 ms). Past it, parts are computed and
  /// used but not kept.
  static constexpr size_t kMaxCacheBytesPerGrammar = size_t{256} << 20;

  /// Sets `mask` (resized to the vocabulary) to the tokens whose whole byte string `matcher`
  /// accepts from its current state. The matcher's state is unchanged.
  void fill(Matcher& matcher, TokenBitmask& mask);
  /// The same mask by one plain trie walk from the state (no cache): the fast path's twin.
  void fill_uncached(Matcher& matcher, TokenBitmask& mask);
  /// The slow twin for tests: every token checked on its own with Matcher::advance on a copy.
  static void fill_reference(const Matcher& matcher, const TokenVocab& vocab, TokenBitmask& mask);

  const TokenVocab& vocab() const { return *vocab_; }

 private:
  struct CacheEntry;
  std::shared_ptr<const CacheEntry> cache_entry(Matcher& m, int32_t head);
  // Walks the trie from `heads`: accepted tokens into `mask`. With `uncertain` (a cached walk
  // whose bottom frame's parent is Matcher::kEscape), a token whose bytes the copied frames
  // consume is accepted; one they refuse after an expansion reached kEscape (frames below might
  // take the rest) goes to `uncertain` by rank; the others are refused.
  void walk(Matcher& m, const std::vector<int32_t>& heads, TokenBitmask& mask, std::vector<uint32_t>* uncertain);
  // Checks the tokens of sorted `ranks` from the matcher's real state.
  void walk_ranks(Matcher& m, const std::vector<uint32_t>& ranks, TokenBitmask& mask);

  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<std::vector<int32_t>> heads_by_depth_;
  std::vector<size_t> arena_at_;
  std::vector<char> tainted_;
  std::vector<uint32_t> uncertain_;
};

}  // namespace llmserve::structured_output
