// The grammar every constraint compiles to: a context-free grammar over bytes. JSON Schema,
// regular expressions, choices and GBNF text all become a Grammar; the Matcher (matcher.h) runs
// it as a pushdown automaton over the UTF-8 bytes of the output, and TokenMasker (token_mask.h)
// turns that into per-step masks over a vocabulary.
//
// Terminals are byte sets (a set of the 256 byte values, matching one byte); code point
// classes are lowered to UTF-8 byte sequences by GrammarBuilder::codepoint_class. A rule is a
// list of alternatives, an alternative a sequence of elements (byte sets and rule references);
// an empty alternative matches the empty string. Left recursion is refused by validate():
// the matcher expands rules top-down (as llama.cpp's GBNF engine and XGrammar's pushdown
// automaton do: XGrammar, Dong et al. 2024, arXiv 2411.15100).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace llmserve::structured_output {

/// The bytes one terminal matches.
using ByteSet = std::bitset<256>;

/// One element of an alternative: a terminal (`byte_set` indexes Grammar::byte_sets) or a
/// reference to a rule (`rule` indexes Grammar::rules).
struct Element {
  enum class Kind : uint8_t { kBytes, kRule };
  Kind kind = Kind::kBytes;
  uint32_t index = 0;

  static Element bytes(uint32_t byte_set) { return {Kind::kBytes, byte_set}; }
  static Element rule(uint32_t rule) { return {Kind::kRule, rule}; }
  bool operator==(const Element&) const = default;
};

using Sequence = std::vector<Element>;

struct Rule {
  std::string name;                    // for messages and dumps; unique within a grammar
  std::vector<Sequence> alternatives;  // an empty Sequence matches ""
};

/// A context-free grammar over bytes; the language is that of rules[root].
struct Grammar {
  std::vector<Rule> rules;
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;

  /// Checks that every index is in range, every rule has at least one alternative, and no rule
  /// is left-recursive (directly or through nullable prefixes). InvalidArgument names the rule.
  Status validate() const;
  /// Removes every alternative that derives no string (it holds an empty byte set, or a rule
  /// that derives none), so a matcher never enters a dead end: an exhausted tuple's ", item"
  /// with `items: false`, an empty enum inside anyOf, "x" root without a base case.
  /// InvalidArgument when the root itself derives no string. Linear in the grammar's size.
  Status prune_unproductive();
  /// Number of elements over all alternatives (the size bound compilation enforces).
  size_t num_elements() const;
  /// GBNF-like text, one rule per line (for debugging and tests).
  std::string dump() const;
};

/// A code point range [first, last], inclusive.
struct CodepointRange {
  uint32_t first = 0;
  uint32_t last = 0;
};

/// Builds a Grammar. Every helper returns an Element that can be used in any sequence; helpers
/// that need structure add rules named after `hint` (made unique with a numeric suffix).
/// Byte sets are interned (equal sets share one index) and so are the rules made by
/// codepoint_class, star, plus, optional and repeat for equal arguments, which keeps grammars
/// small and lets TokenMasker share work between equal rules.
class GrammarBuilder {
 public:
  /// Adds an empty rule and returns its index (alternatives are added with add_alternative).
  uint32_t add_rule(std::string_view hint);
  void add_alternative(uint32_t rule, Sequence sequence);
  /// Number of rules so far.
  uint32_t num_rules() const { return static_cast<uint32_t>(grammar_.rules.size()); }

  /// A terminal matching the bytes in `set`.
  Element byte_set(const ByteSet& set);
  /// A terminal matching exactly byte `b`.
  Element byte(uint8_t b);
  /// The bytes of `text`, one terminal each, appended to `out`.
  void append_literal(std::string_view text, Sequence& out);
  /// A rule matching exactly `text` ("" gives a rule with one empty alternative).
  Element literal(std::string_view text);
  /// A rule matching one UTF-8 encoded code point in the union of `ranges` (or, `negated`, one
  /// code point in none of them). Code points are U+0000..U+10FFFF except surrogates
  /// U+D800..U+DFFF, which are never matched (they are not valid UTF-8).
  Element codepoint_class(std::vector<CodepointRange> ranges, bool negated);
  /// Any one valid UTF-8 code point.
  Element any_codepoint();
  /// A rule matching the sequence.
  Element group(Sequence sequence, std::string_view hint);
  /// A rule with the given alternatives.
  Element choice(std::vector<Sequence> alternatives, std::string_view hint);
  /// e* (right-recursive, so the matcher's stack stays flat through tail calls).
  Element star(Element e);
  /// e+.
  Element plus(Element e);
  /// e?.
  Element optional(Element e);
  /// e{min,max}; max < 0 means unbounded. Builds O(max) rules for bounded max.
  Element repeat(Element e, int64_t min, int64_t max);

  /// Sets the root and returns the grammar (validate() it before use). The builder is left empty.
  Grammar finish(uint32_t root);

  /// Elements added so far (callers use it to bound grammar size while building).
  size_t num_elements() const { return grammar_.num_elements(); }

 private:
  std::string unique_name(std::string_view hint);
  Grammar grammar_;
  std::unordered_map<std::string, uint32_t> interned_rules_;  // structural key -> rule
  std::unordered_map<ByteSet, uint32_t> interned_sets_;        // byte set -> index
  std::unordered_map<std::string, uint32_t> name_counts_;      // hint -> uses so far
};

}  // namespace llmserve::structured_output
