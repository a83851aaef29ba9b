// Regular expressions (JSON Schema `pattern`, vLLM `regex` / `structured_outputs.regex`)
// compiled exactly to the Grammar IR.
//
// Dialect: the part of ECMAScript RegExp (ECMA-262 §22.2, with the `u` flag's code point
// semantics, as JSON Schema 2020-12 §6.4 recommends) that a context-free grammar represents
// exactly:
//   - literals (raw UTF-8), `.` (any code point except the line terminators \n \r U+2028 U+2029)
//   - escapes \d \w \s \D \W \S (ECMAScript's ASCII \d \w and Unicode White_Space+line
//     terminators \s), \t \n \r \f \v \0, \cX, \xHH, \uHHHH (surrogate pairs combine),
//     \u{H...}, and any non-alphanumeric character escaped as itself (\. \/ \- ...)
//   - classes [...] and [^...] with ranges and the escapes above inside ([\b] is U+0008);
//     `[]` matches nothing and `[^]` any code point
//   - groups ( ), (?: ), (?<name> ); alternation |
//   - quantifiers * + ? {m} {m,} {m,n} and their lazy forms (*? etc.: laziness picks among
//     matches, it does not change which strings match); a `{` that does not start a quantifier
//     is a literal, as are a lone `]` and `}` (ECMA-262 Annex B)
//   - anchors ^ and $ only at the start and end of the pattern or of a top-level alternative
// Refused with InvalidArgument naming the construct and its position (never approximated):
// backreferences (\1, \k<name>), lookahead and lookbehind, \b \B word boundaries, anchors
// elsewhere, inline flags and modifiers ((?i) ...), Unicode property escapes (\p{..}), octal
// escapes, unknown letter escapes (\e, \z ...), `{,n}` (not an ECMAScript quantifier), a class
// escape as a range endpoint ([\d-z]), and bounds or nesting beyond GrammarLimits (gbnf.h).
// A lone surrogate (\uD800) is kept as a code point no UTF-8 string contains.
#pragma once

#include <string_view>

#include "common/status.h"
#include "structured_output/gbnf.h"
#include "structured_output/grammar.h"

namespace llmserve::structured_output {

struct RegexOptions {
  /// JSON Schema `pattern` semantics (ECMA-262 RegExp.prototype.test, unanchored): the string
  /// must CONTAIN a match, i.e. the pattern becomes .*(p).* with `.*` over any code point
  /// (newlines included), except on a side where the alternative is anchored with ^ or $.
  /// false: the whole string must match (vLLM `regex`); ^ and $ are then no-ops.
  bool search = false;
  /// Match the text as written inside a JSON string (escapes where JSON requires them), for a
  /// JSON Schema `pattern`: the regex constrains the decoded string, the grammar its JSON text.
  bool json_string = false;
  GrammarLimits limits{};
};

/// Compiles `pattern` into `b` and returns the element matching its language.
Expected<Element> compile_regex(std::string_view pattern, GrammarBuilder& b, const RegexOptions& options = {});

/// A validated grammar whose language is compile_regex's (root = the pattern).
Expected<Grammar> regex_grammar(std::string_view pattern, const RegexOptions& options = {});

}  // namespace llmserve::structured_output
