#include "server/chat_output.h"

#include "common/check.h"
#include "server/tool_parsers/forced_tool_call_parser.h"
#include "server/tool_parsers/tool_parser_registry.h"

namespace llmserve {

using nlohmann::json;

std::unique_ptr<tool_parsers::ChatOutputParser> make_chat_output_parser(const ChatParsing& p) {
  if (!p.active()) return nullptr;
  std::unique_ptr<tool_parsers::ReasoningParser> reasoning;
  if (!p.reasoning_parser.empty()) {
    tool_parsers::ReasoningParserOptions opt;
    opt.start = p.reasoning_start;
    auto made = tool_parsers::make_reasoning_parser(p.reasoning_parser, opt);
    LLMS_CHECK(made.ok(), "reasoning parser '{}' was checked at start-up", p.reasoning_parser);
    reasoning = std::move(*made);
  }
  std::unique_ptr<tool_parsers::ToolParser> tools;
  tool_parsers::ToolParserOptions opt;
  opt.tools = p.tools_json;
  switch (p.tools) {
    case ChatParsing::Tools::kNone: break;
    case ChatParsing::Tools::kFormat: {
      auto made = tool_parsers::make_tool_parser(p.tool_parser, opt);
      LLMS_CHECK(made.ok(), "tool-call parser '{}' was checked at start-up", p.tool_parser);
      tools = std::move(*made);
      break;
    }
    case ChatParsing::Tools::kRequired:
      tools = tool_parsers::make_required_tool_call_parser(opt);
      break;
    case ChatParsing::Tools::kNamed:
      tools = tool_parsers::make_named_tool_call_parser(p.function, opt);
      break;
  }
  return std::make_unique<tool_parsers::ChatOutputParser>(std::move(reasoning), std::move(tools));
}

json chat_delta_json(const tool_parsers::ChatDelta& d) {
  json delta = json::object();
  if (!d.reasoning_content.empty()) {
    delta["reasoning_content"] = d.reasoning_content;
    delta["reasoning"] = d.reasoning_content;
  }
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    for (const tool_parsers::ToolCallDelta& c : d.tool_calls) calls.push_back(to_openai_json(c));
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

}  // namespace llmserve
