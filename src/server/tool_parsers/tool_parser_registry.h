// Making tool-call parsers by name (vLLM's --tool-call-parser names) and choosing one from a
// model's chat template when no name is given.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

/// The accepted names, sorted: deepseek_v3, deepseek_v31, granite, hermes, kimi_k2,
/// llama3_json, llama4_json (= llama3_json), mistral, qwen3_coder, qwen3_xml (= qwen3_coder).
std::vector<std::string> tool_parser_names();

/// A new parser (one per request: parsers hold the state of one output). An unknown name is
/// kInvalidArgument naming it and listing the valid ones.
Expected<std::unique_ptr<ToolParser>> make_tool_parser(std::string_view name,
                                                       const ToolParserOptions& options = {});

/// The parser name for the tool-call format a Jinja chat template's text emits (it renders
/// past assistant tool calls the way the model writes them, and instructs the model to), or
/// nullopt for a template without tool calls. Looks for each format's markers:
///   <｜tool▁calls▁begin｜> with ```json -> deepseek_v3, without -> deepseek_v31;
///   <|tool_calls_section_begin|> -> kimi_k2;  [TOOL_CALLS] -> mistral;
///   <function= with <parameter= -> qwen3_coder;  <|tool_call|> -> granite;
///   <tool_call> -> hermes;  <|python_tag|>, or Llama 3 headers with "parameters" -> llama3_json;
/// and nullopt for near misses this library does not parse (GLM's <arg_key>, Seed-OSS's
/// <seed:tool_call>, MiniMax's <invoke>, functionary's <function=NAME>{json}).
std::optional<std::string> detect_tool_parser(std::string_view chat_template);

}  // namespace llmserve::tool_parsers
