// SectionToolParser: formats that wrap calls in special-token sections,
//   SECTION_BEGIN CALL_BEGIN header SEP arguments CALL_END ... SECTION_END
// (DeepSeek V3 / V3.1, Kimi K2). The header is the call's name, or its type then its name on
// the next line (DeepSeek V3), or an id "functions.NAME:INDEX" (Kimi K2). The arguments are a
// JSON object, streamed as the model writes it. A call cut off or broken inside its JSON
// drops the rest of its section up to CALL_END.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

struct SectionFormat {
  enum class Header : uint8_t {
    kName,          // NAME SEP {...}
    kTypeThenName,  // TYPE SEP NAME\n[```json\n]{...}[\n```]  (DeepSeek V3)
    kFunctionsId,   // functions.NAME:INDEX SEP {...}, the header being the call's id (Kimi K2)
  };
  std::string_view parser_name;
  std::string_view section_begin, call_begin, sep, call_end, section_end;
  Header header = Header::kName;
};

std::unique_ptr<ToolParser> make_section_tool_parser(const SectionFormat& format,
                                                     const ToolParserOptions& options);

}  // namespace llmserve::tool_parsers
