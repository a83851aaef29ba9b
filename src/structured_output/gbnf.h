// GBNF, llama.cpp's grammar language, compiled to the Grammar IR (grammar.h), so that grammars
// written for llama.cpp work unchanged. Spec: llama.cpp grammars/README.md ("GBNF Guide").
//
//   root  ::= ("- " item)+          # the start rule is `root`
//   item  ::= [^\n]+ "\n"           # rules: name ::= alternatives
//   num   ::= "-"? [0-9]{1,16}      # sequences, | alternatives, ( ) groups
//
// Accepted: rule names of letters, digits, '-' (and '_'); string literals "..." and character
// classes [...] / [^...] with ranges, holding raw UTF-8 or the escapes \n \r \t \\ \" \[ \]
// \xHH \uHHHH \UHHHHHHHH (values are code points, matched as UTF-8; any other ASCII
// punctuation may be escaped as itself); `.` (any code point); postfix * + ? {m} {m,} {m,n},
// which may be stacked (`x+?` is (x+)?); `#` comments to the end of the line. A rule ends at
// the end of its line, except inside parentheses, after `::=` or `|`, and (an extension that
// llama.cpp lacks) before a line that starts with `|`.
//
// Refused with a one-line InvalidArgument "GBNF line:column: what": token references (<think>,
// <[id]>, !<...>, which constrain token ids rather than text), undefined rules, a rule defined
// twice (llama.cpp keeps the last definition silently), a missing `root`, unterminated
// literals, classes and groups, bad escapes and ranges, repetition bounds or nesting beyond
// GrammarLimits, grammars of more than GrammarLimits::max_elements elements, and left
// recursion (from Grammar::validate, naming the rule). A repetition of an expression that can
// match "" (`("a"?)*`) is compiled exactly (as the repetition of its non-empty part) instead of
// being refused as left-recursive.
//
// The second half of this header is the expression tree that both text front ends (this one and
// regex.h) parse into, and its lowering to a GrammarBuilder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "structured_output/grammar.h"

namespace llmserve::structured_output {

/// Bounds on what grammar text (GBNF or a regex) may compile to; a refusal names the limit.
struct GrammarLimits {
  size_t max_elements = 1'000'000;  // Grammar::num_elements() of the result
  int64_t max_repetition = 10'000;  // m and n in {m}, {m,}, {m,n}
  int max_nesting = 200;            // depth of ( ) groups
  /// Quantifiers inside quantifiers (the deepest chain, after collapsing repeats of unbounded
  /// repeats): each level of a repeated optional part multiplies the ways one text splits
  /// into copies, and the matcher follows them all (20 nested "( ?){0,2}" made each token's
  /// mask take seconds and stalled the engine).
  int max_repeat_nesting = 8;
};

struct Expr;
/// The deepest chain of kRepeat nodes in `e` (0 = no repeat).
int repeat_depth(const Expr& e);

/// Compiles GBNF text; the start rule is `root`. The result is validated.
Expected<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

// ---- expression trees (shared by the GBNF and regex front ends) ------------------------------

/// An expression over code points. An empty kSequence matches "".
struct Expr {
  enum class Kind : uint8_t { kLiteral, kClass, kAny, kRef, kSequence, kChoice, kRepeat };
  Kind kind = Kind::kSequence;
  std::string text;                    // kLiteral: UTF-8 bytes
  std::vector<CodepointRange> ranges;  // kClass
  bool negated = false;                // kClass
  uint32_t rule = 0;                   // kRef: index into ExprLowering's rule table
  int64_t min = 0;                     // kRepeat
  int64_t max = -1;                    // kRepeat: < 0 = unbounded
  std::vector<Expr> children;          // kSequence, kChoice; kRepeat: exactly one

  static Expr literal(std::string utf8);
  static Expr code_points(std::vector<CodepointRange> ranges, bool negated);
  static Expr any();
  static Expr ref(uint32_t rule);
  /// A sequence (a single item is returned as itself).
  static Expr sequence(std::vector<Expr> items);
  /// A choice (a single alternative is returned as itself).
  static Expr choice(std::vector<Expr> alternatives);
  static Expr repeat(Expr e, int64_t min, int64_t max);
};

/// Lowers expression trees into a GrammarBuilder. Repetitions of nullable expressions are built
/// from the expression's non-empty part (L(e)* = (L(e) \ {""})*), which keeps the grammar free
/// of the left recursion a naive e* would have. Stops growing the grammar (and reports it from
/// status()) once about `max_elements` elements were added.
class ExprLowering {
 public:
  /// `rules[i]` is the body of the rule that kRef index i names, `rule_ids[i]` its rule in `b`.
  ExprLowering(GrammarBuilder& b, std::vector<const Expr*> rules, std::vector<uint32_t> rule_ids,
               size_t max_elements);

  /// Lowers code points as they are written inside a JSON string (json_string_class): for a
  /// JSON Schema `pattern`, whose regex constrains the decoded string.
  void set_json_string(bool on) { json_string_ = on; }
  /// Names helper rules after `hint` (e.g. the rule being defined).
  void set_hint(std::string_view hint) { hint_ = hint; }
  /// Adds `body`'s alternatives (a kChoice's children, else `body` itself) to `rule`.
  void define_rule(uint32_t rule, const Expr& body);
  /// Appends elements matching exactly `e` to `out`.
  void lower_into(const Expr& e, Sequence& out);
  /// One element matching exactly `e`.
  Element lower_element(const Expr& e);
  /// True if `e` matches "".
  bool nullable(const Expr& e) const;
  /// Ok, or the refusal naming max_elements.
  Status status() const;

 private:
  Element repetition(Element e, int64_t min, int64_t max);
  Element nothing();  // matches no string
  Element nonempty(const Expr& e);
  void nonempty_alternatives(const Expr& e, std::vector<Sequence>& out);
  Element nonempty_rule(uint32_t rule);
  void charge(size_t num_elements);

  GrammarBuilder& b_;
  std::vector<const Expr*> rules_;
  std::vector<uint32_t> rule_ids_;
  std::vector<char> rule_nullable_;
  std::unordered_map<uint32_t, uint32_t> nonempty_rules_;  // rule table index -> builder rule
  std::string hint_ = "expr";
  bool json_string_ = false;
  size_t max_elements_;
  size_t num_charged_ = 0;
};

/// Appends the UTF-8 encoding of `cp` (<= U+10FFFF, not a surrogate) to `out`.
void append_utf8(uint32_t cp, std::string& out);
/// Decodes one well-formed UTF-8 code point at s[pos], advancing pos; false if ill-formed.
bool decode_utf8(std::string_view s, size_t& pos, uint32_t& cp);

}  // namespace llmserve::structured_output
