// One entry point from a request's constraint (JSON Schema, any JSON object, regular expression,
// fixed choices, GBNF grammar) to a compiled grammar, with a bounded cache keyed by the
// constraint's text so a schema sent with every request is compiled once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "structured_output/json_schema.h"
#include "structured_output/matcher.h"

namespace llmserve::structured_output {

struct ConstraintSpec {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonSchema;
  /// JSON Schema text, regular expression (whole-output match) or GBNF text.
  std::string text;
  /// kChoice: the output is exactly one of these strings.
  std::vector<std::string> choices;
  JsonSchemaOptions json;
};

/// Compiles `spec`. Errors: InvalidArgument naming the keyword / construct / position
/// (malformed schema JSON too), ResourceExhausted when over the size bounds.
Expected<std::shared_ptr<const CompiledGrammar>> compile_constraint(const ConstraintSpec& spec);

/// compile_constraint through a process-wide cache of the last `capacity` distinct specs
/// whose grammars hold at most `max_cached_elements` elements together (errors are not
/// cached; a grammar larger than the budget is returned but not kept). Thread-safe.
Expected<std::shared_ptr<const CompiledGrammar>> compile_constraint_cached(
    const ConstraintSpec& spec, size_t capacity = 64, size_t max_cached_elements = 4'000'000);

}  // namespace llmserve::structured_output
