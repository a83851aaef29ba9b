// Runs a Grammar over bytes as a nondeterministic pushdown automaton. The state is a set of
// stacks; each stack is a chain of frames (rule alternative, position) kept in an arena and
// shared between stacks (a graph-structured stack, as in XGrammar's persistent stack, Dong et
// al. 2024, arXiv 2411.15100). Advancing by one byte keeps the stacks whose top terminal
// accepts it; rule references are expanded top-down (left recursion is refused by
// Grammar::validate), and a reference in tail position replaces its frame, so right-recursive
// repetition runs in constant stack depth.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "structured_output/grammar.h"

namespace llmserve::structured_output {

class CompiledGrammar;

/// One sequence's position in a grammar. Copyable (copies share the immutable compiled
/// grammar; the stack arena is per matcher). Not thread-safe; one per sequence.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  /// Consumes `bytes`; false (state unchanged) if the grammar does not allow them here.
  bool advance(std::string_view bytes);
  /// Consumes one byte; false (state unchanged) if not allowed.
  bool advance_byte(uint8_t b);
  /// True when the bytes so far form a complete sentence (the model may stop here).
  bool can_finish() const;
  /// True when no further byte is allowed (only stopping is; implies can_finish() or a dead state
  /// that advance() never produces).
  bool is_terminated() const;
  /// Bytes allowed next (the union of the top terminals).
  ByteSet next_bytes() const;
  /// Back to the start.
  void reset();

  const CompiledGrammar& grammar() const { return *grammar_; }

  /// Number of stacks in the current state (0 = dead).
  size_t num_stacks() const { return heads_.size(); }

 private:
  friend class TokenMasker;
  struct Frame {
    uint32_t rule;     // rule index
    uint32_t alt;      // alternative index
    uint32_t pos;      // element index within the alternative
    int32_t parent;    // frame index in arena_, -1 = bottom
  };
  // Expands frame `f` (its position may be at a rule reference or at the end of its
  // alternative) into frames whose element is a terminal, appended to out_heads; sets
  // `finished` when the bottom frame completes. Frames are unique by content (intern).
  void visit(Frame f, std::vector<int32_t>& out_heads, bool& finished);
  void begin_step();
  int32_t intern(const Frame& f, bool& existed);
  void rebuild_table();
  // Advances the stacks `from` (frame ids) by byte `b` into out_heads; true if any stack
  // survived or one completed (then `finished`). Frames are appended to arena_.
  bool step(const std::vector<int32_t>& from, uint8_t b, std::vector<int32_t>& out_heads, bool& finished);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<Frame> arena_;
  std::vector<int32_t> heads_;  // frames whose top element is a terminal
  bool finished_ = false;       // a stack emptied: the input so far is a sentence
  // TokenMasker's cached walks start from a copy of the top frames whose bottom parent is
  // kEscape; reaching it sets escaped_ (the token's fate depends on the frames below).
  static constexpr int32_t kEscape = -2;
  bool escaped_ = false;
  std::vector<int32_t> scratch_;
  // Frames by content (open addressing over frame ids, -1 empty; ids past the arena are stale).
  std::vector<int32_t> table_;
  size_t table_count_ = 0;
  // visited_[frame id] == stamp_: expanded in this step already.
  std::vector<uint32_t> visited_;
  uint32_t stamp_ = 0;
};

/// A validated Grammar ready to run (shared by every Matcher and TokenMasker on it).
class CompiledGrammar {
 public:
  /// Validates `grammar` (Grammar::validate's errors).
  static Expected<std::shared_ptr<const CompiledGrammar>> compile(Grammar grammar);

  const Grammar& grammar() const { return grammar_; }
  /// True if rule `r` can match "".
  bool nullable(uint32_t r) const { return nullable_[r] != 0; }

 private:
  explicit CompiledGrammar(Grammar g);
  friend class TokenMasker;
  Grammar grammar_;
  std::vector<char> nullable_;
  // TokenMasker's per-position mask parts (for one vocabulary), filled lazily, shared by every
  // matcher on this grammar.
  mutable std::mutex mask_cache_mu_;
  mutable const void* mask_cache_vocab_ = nullptr;
  mutable std::unordered_map<std::string, std::shared_ptr<const void>> mask_cache_;
  mutable size_t mask_cache_bytes_ = 0;  // what mask_cache_ holds (TokenMasker's bound)
};

/// True iff `text` is a complete sentence of `grammar` (a slow, obvious use of Matcher for tests
/// and grammar-check).
bool grammar_accepts(const std::shared_ptr<const CompiledGrammar>& grammar, std::string_view text);

}  // namespace llmserve::structured_output
