// kimi_k2: Moonshot Kimi K2's tool-call sections (vLLM's kimi_k2_tool_parser.py; llama.cpp's
// test-chat.cpp Kimi-K2 cases):
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>
//   {...}<|tool_call_end|>...<|tool_calls_section_end|>
// The header "functions.NAME:INDEX" is the call's id (as vLLM and Kimi's template use it).
#include "server/tool_parsers/formats.h"
#include "server/tool_parsers/section_parser.h"

namespace llmserve::tool_parsers {

std::unique_ptr<ToolParser> make_kimi_k2_tool_parser(const ToolParserOptions& options) {
  SectionFormat f;
  f.parser_name = "kimi_k2";
  f.section_begin = "<|tool_calls_section_begin|>";
  f.call_begin = "<|tool_call_begin|>";
  f.sep = "<|tool_call_argument_begin|>";
  f.call_end = "<|tool_call_end|>";
  f.section_end = "<|tool_calls_section_end|>";
  f.header = SectionFormat::Header::kFunctionsId;
  return make_section_tool_parser(f, options);
}

}  // namespace llmserve::tool_parsers
