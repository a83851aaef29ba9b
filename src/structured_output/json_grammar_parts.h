// Building blocks of JSON grammars (RFC 8259) for the JSON Schema compiler: whitespace,
// strings with length bounds, numbers with integer bounds, string formats, and literal values.
// Every part is exact or a subset of what it names (it never accepts text outside it), so a
// grammar assembled from them never admits an instance the schema rejects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "structured_output/grammar.h"

namespace llmserve::structured_output {

/// Builds and caches the shared parts for one grammar.
class JsonParts {
 public:
  /// `whitespace`: the element allowed between JSON tokens (see JsonSchemaOptions).
  JsonParts(GrammarBuilder& b, Element whitespace) : b_(b), ws_(whitespace) {}

  GrammarBuilder& builder() { return b_; }
  Element ws() const { return ws_; }

  /// One JSON string character as written inside quotes: an unescaped code point
  /// (U+0020.., not '"' or '\\') or an escape (\" \\ \/ \b \f \n \r \t \uXXXX). With
  /// `no_surrogate_escapes`, \uD800-\uDFFF are not allowed (so every character counts once
  /// in minLength/maxLength, as a decoded code point does).
  Element string_char(bool no_surrogate_escapes);
  /// A complete JSON string with [min_length, max_length] characters (max < 0: unbounded).
  Element string(int64_t min_length, int64_t max_length);
  /// A string whose characters are written unescaped only (object keys for additional
  /// properties: an escape could spell a declared name).
  Element plain_string_content();
  /// Any JSON number (RFC 8259 §6).
  Element number();
  /// An integer in [lo, hi] (unset = unbounded), written without fraction or exponent, no "-0".
  Element integer(std::optional<int64_t> lo, std::optional<int64_t> hi);
  /// A number x with bounds whose values are integers (minimum / maximum inclusive or
  /// exclusive), written without exponent; "-0" forms are not produced.
  Element bounded_number(std::optional<int64_t> lo, bool lo_exclusive, std::optional<int64_t> hi,
                         bool hi_exclusive);
  /// A JSON string in `format` (date-time, date, time, uuid, ipv4, email, ...), or nullopt if
  /// the format has no grammar here.
  std::optional<Element> format_string(const std::string& format);
  /// Exactly the JSON text of `value` (objects and arrays with whitespace allowed between tokens;
  /// strings escaped as json.dumps(ensure_ascii=False) writes them).
  Element value_literal(const nlohmann::ordered_json& value);
  /// Any JSON value (objects with any keys, arrays of anything).
  Element any_value();

 private:
  Element digits_range(const std::string& lo, const std::string& hi);
  Element nonneg_range(uint64_t lo, std::optional<uint64_t> hi);
  Element fraction(int kind);  // 0 any (or none), 1 zero (or none), 2 nonzero
  GrammarBuilder& b_;
  Element ws_;
  std::optional<Element> any_value_;
  std::optional<Element> number_;
};

/// One code point of the class (`ranges`, `negated`) as written inside a JSON string: the
/// code point itself where JSON allows it unescaped, else its escape (\" \\ \n \r \t \b \f, or
/// \u00XX for other control characters, either hex case). Used to lower a JSON Schema `pattern`,
/// which constrains the decoded string, onto the JSON text.
Element json_string_class(GrammarBuilder& b, const std::vector<CodepointRange>& ranges, bool negated);
/// The bytes of `text` (UTF-8) as written inside a JSON string, escapes as json.dumps writes them.
void append_json_string_literal(GrammarBuilder& b, std::string_view text, Sequence& out);

/// The JSON text json.dumps(value, ensure_ascii=False) gives for a string (with quotes).
std::string json_string_literal(const std::string& s);

}  // namespace llmserve::structured_output
