// What a request body asks of its output's shape: the structured-output fields of OpenAI
// (response_format), vLLM (structured_outputs and the older guided_* spellings) and llama.cpp
// (grammar, json_schema), and the tool-call fields (tools, tool_choice, parallel_tool_calls).
// Bodies are read with their key order kept (ordered_json): a schema's properties are
// generated in the order the client wrote them.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "structured_output/constraint.h"

namespace llmserve {

/// One constraint on the whole output, and the field that asked for it (errors name it).
struct OutputConstraint {
  structured_output::ConstraintSpec spec;
  std::string param;
};

/// Reads the structured-output fields of a /v1/completions or /v1/chat/completions body:
///  - response_format: {"type": "text"} (none), {"type": "json_object"}, {"type":
///    "json_schema", "json_schema": {"name", "schema", "strict", "description"}} (OpenAI);
///  - structured_outputs: {json | regex | choice | grammar | json_object, plus
///    disable_any_whitespace or whitespace_pattern} (vLLM); guided_json / guided_regex /
///    guided_choice / guided_grammar / guided_whitespace_pattern (vLLM's older names);
///  - grammar (GBNF text) and json_schema (a schema object) (llama.cpp).
/// `*out` stays nullopt when none asks for anything. Errors (400 naming the field): wrong
/// shapes, unknown keys inside these objects, more than one constraint, a whitespace pattern
/// that may match more than JSON whitespace or comes without a JSON constraint.
std::optional<ApiError> read_output_constraint(const nlohmann::ordered_json& body,
                                               std::optional<OutputConstraint>* out);

/// A chat request's tool fields, validated.
struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kNamed };
  /// OpenAI's default: "auto" when tools are given, else "none".
  Mode mode = Mode::kNone;
  std::string function;  // kNamed: the function's name (one of tools)
  bool parallel_tool_calls = true;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
};

/// Reads tools / tool_choice / parallel_tool_calls. Errors (400 naming the field): a
/// tool_choice other than "none" / "auto" / "required" / {"type": "function", "function":
/// {"name"}}, a named or required choice without tools, a name that is not a tool's,
/// parallel_tool_calls not a boolean. The shape of `tools` itself is protocol.cc's check.
std::optional<ApiError> read_tool_choice(const nlohmann::ordered_json& body, ToolChoice* out);

/// The JSON Schema (text) that forces tool calls, as vLLM builds it: kRequired -> an array of
/// at least one (at most one without parallel_tool_calls) {"name": <a tool's name>,
/// "parameters": <its parameters schema>} objects, keys in that order and no others; kNamed ->
/// the named function's parameters schema (the output is its arguments). A tool without
/// parameters takes any object.
std::string forced_tool_call_schema(const ToolChoice& choice);

}  // namespace llmserve
