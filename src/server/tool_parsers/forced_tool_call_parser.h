// Tool-call parsers for outputs the server forces by grammar, whatever the model's own
// tool-call format (vLLM's tool_choice "required" and named-function behaviour):
//  - tool_choice "required": the output is constrained to a JSON array of calls,
//      [{"name": "<fn>", "parameters": {...}}, ...]
//    (vLLM's schema, minItems 1). Each element becomes a call: its kToolCallBegin as soon as
//    the name string is complete, then its `parameters` value streamed verbatim as argument
//    fragments. There is never any content: whitespace between elements, anything after the
//    array, and the rest of a malformed output are dropped.
//  - tool_choice {"type": "function", "function": {"name": ...}}: the whole output is the
//    arguments object of one call to that function. The call begins at the first push (at
//    finish for an empty output) and every byte of the value is an argument fragment;
//    whitespace before and after the value is dropped.
// Both follow the ToolParser contract (tool_parser.h): split-invariant, fragments join to the
// arguments (through JsonScanner: raw control characters in strings escaped, invalid UTF-8 as
// U+FFFD), a call cut off (max_tokens) keeps what was emitted and has complete = false. Ids are
// generated like the other OpenAI-style parsers ("call_" + 24 alphanumerics, reproducible with
// ToolParserOptions::id_seed).
#pragma once

#include <memory>
#include <string>

#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

/// tool_choice "required": a JSON array of {"name", "parameters"} objects. Keys in any order
/// are accepted ("arguments" too, and other keys are ignored), but the call begins only once
/// its name is known. An element that ends without parameters has arguments "{}". The parser's
/// name() is "required".
std::unique_ptr<ToolParser> make_required_tool_call_parser(const ToolParserOptions& options = {});

/// A named tool_choice: the output is the arguments of one call to `function_name` (non-empty).
/// complete = the output held one whole JSON value. The parser's name() is "named".
std::unique_ptr<ToolParser> make_named_tool_call_parser(std::string function_name,
                                                        const ToolParserOptions& options = {});

}  // namespace llmserve::tool_parsers
