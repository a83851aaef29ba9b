// The format parsers' factories (one source file per format family); tool_parser_registry.cc
// maps --tool-call-parser names onto them.
#pragma once

#include <memory>

#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

std::unique_ptr<ToolParser> make_hermes_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_llama3_json_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_mistral_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_deepseek_v3_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_deepseek_v31_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_qwen3_coder_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_granite_tool_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_kimi_k2_tool_parser(const ToolParserOptions& options);

}  // namespace llmserve::tool_parsers
