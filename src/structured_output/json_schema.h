// JSON Schema -> Grammar. The grammar accepts a subset of the instances the schema accepts
// (never an invalid one); where a keyword cannot be enforced exactly it is refused with an
// error naming it and the schema path, never ignored. Keywords (JSON Schema 2020-12 with the
// draft-4..7 spellings: `definitions`, array-form `items`, boolean `exclusiveMinimum`):
//  - honoured: type, enum, const, properties, required, additionalProperties, items,
//    prefixItems, additionalItems, minItems, maxItems, minLength, maxLength, pattern (ECMA-262
//    search semantics), format (date-time, date, time, uuid, ipv4, email), minimum, maximum,
//    exclusiveMinimum, exclusiveMaximum (integer-valued bounds for `number`), multipleOf 1 on
//    integers, anyOf, oneOf (when its alternatives are disjoint), allOf (merged), local $ref
//    (recursive too), boolean schemas, uniqueItems false, minProperties/maxProperties when
//    already implied;
//  - refused: not, if/then/else, dependencies, dependentRequired, dependentSchemas,
//    patternProperties, propertyNames, contains, unevaluated*, $dynamicRef, uniqueItems true,
//    multipleOf other than 1, fractional number bounds, formats jsonschema checks that have no
//    grammar here (uri, hostname, ipv6, regex, duration, ...), remote $ref;
//  - annotations (no constraint, as the specification says): title, description, default,
//    examples, $comment, readOnly, deprecated, ..., unknown formats and unknown keywords.
// Objects: declared properties in the schema's order (optional ones may be skipped), then any
// additional properties (keys written without escapes, never a declared name). Strings are
// compared exactly as written (an enum value must be spelled as json.dumps writes it).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "structured_output/grammar.h"

namespace llmserve::structured_output {

/// How JSON tokens may be separated.
struct JsonWhitespace {
  /// vLLM's disable_any_whitespace: no whitespace at all between tokens.
  bool compact = false;
  /// Longest run of spaces/tabs after an optional newline (the default is bounded so a model
  /// cannot spend max_tokens on whitespace). The default form is llama.cpp's
  /// json-schema-to-grammar `space` rule shape: "" | " " | "\n" [ \t]{0,N}.
  int max_indent = 20;
  /// vLLM's whitespace_pattern (outlines' JSON whitespace option): when not empty, a regular
  /// expression (whole match, regex.h's syntax) for the whitespace allowed between tokens,
  /// replacing the default. Its language may hold only JSON whitespace (space, \t, \n, \r):
  /// anything else is InvalidArgument. Ignored when `compact`.
  std::string pattern;
};

/// OK when `pattern` compiles (regex.h) and every byte it may match is JSON whitespace
/// (space, \t, \n, \r); else InvalidArgument saying which.
Status check_whitespace_pattern(const std::string& pattern);

struct JsonSchemaOptions {
  JsonWhitespace whitespace;
  /// Compilation bound: more grammar elements than this is ResourceExhausted.
  size_t max_grammar_elements = 2'000'000;
  /// Longest string / array bound expanded into the grammar (larger is refused).
  int64_t max_repeat = 10'000;
};

/// Compiles `schema` (keys in the order written: ordered_json). InvalidArgument names the
/// unsupported keyword or malformed part with its JSON pointer path; ResourceExhausted when the
/// grammar would exceed the bounds.
Expected<Grammar> compile_json_schema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});

/// Most levels of nested arrays / objects a schema document may have (compile_json_schema's
/// own limit; checked first, without recursion, so a schema nested 100,000 deep sent as text is
/// refused before anything walks it recursively).
inline constexpr size_t kMaxSchemaNesting = 64;

/// Objects with 2..kMaxAnyOrderProperties declared properties accept them in any order (a rule
/// per subset of the properties written so far: 2^n rules); larger ones follow `properties`
/// order, with additional properties after the declared ones.
inline constexpr size_t kMaxAnyOrderProperties = 8;
/// True when `value` has more than `max_depth` levels of nested arrays / objects. Iterative.
bool json_nesting_exceeds(const nlohmann::ordered_json& value, size_t max_depth);

/// Any JSON object (response_format json_object).
Grammar json_object_grammar(const JsonSchemaOptions& options = {});

}  // namespace llmserve::structured_output
