// deepseek_v3 and deepseek_v31: DeepSeek's special-token tool-call sections.
//  - deepseek_v3 (DeepSeek-V3, DeepSeek-R1 and its distills; vLLM's deepseekv3_tool_parser.py):
//      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
//      <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//    (the fence is optional, and its newline before ``` is often missing: llama.cpp's
//    test-chat.cpp).
//  - deepseek_v31 (DeepSeek-V3.1; vLLM's deepseekv31_tool_parser.py):
//      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//      ...<｜tool▁calls▁end｜>
// A section may also open at <｜tool▁call▁begin｜> directly.
#include "server/tool_parsers/formats.h"
#include "server/tool_parsers/section_parser.h"

namespace llmserve::tool_parsers {
namespace {

SectionFormat deepseek_format(std::string_view name, SectionFormat::Header header) {
  SectionFormat f;
  f.parser_name = name;
  f.section_begin = "<｜tool▁calls▁begin｜>";
  f.call_begin = "<｜tool▁call▁begin｜>";
  f.sep = "<｜tool▁sep｜>";
  f.call_end = "<｜tool▁call▁end｜>";
  f.section_end = "<｜tool▁calls▁end｜>";
  f.header = header;
  return f;
}

}  // namespace

std::unique_ptr<ToolParser> make_deepseek_v3_tool_parser(const ToolParserOptions& options) {
  return make_section_tool_parser(
      deepseek_format("deepseek_v3", SectionFormat::Header::kTypeThenName), options);
}

std::unique_ptr<ToolParser> make_deepseek_v31_tool_parser(const ToolParserOptions& options) {
  return make_section_tool_parser(deepseek_format("deepseek_v31", SectionFormat::Header::kName),
                                  options);
}

}  // namespace llmserve::tool_parsers
