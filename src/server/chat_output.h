// How a chat reply's text becomes OpenAI's message: which reasoning parser and which tool-call
// parser a request's output goes through (server/tool_parsers/), decided per request from the
// server's flags, the chat template and the request's tool_choice.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/chat_output_parser.h"
#include "server/tool_parsers/reasoning_parser.h"

namespace llmserve {

/// The server's chat-output flags (vLLM's spellings).
struct ChatOutputConfig {
  /// --tool-call-parser NAME; "" = detected from the chat template (detect_tool_parser).
  std::string tool_call_parser;
  /// --enable-auto-tool-choice: vLLM needs it for tool_choice "auto"; here "auto" works
  /// whenever a tool-call format is known, and the flag makes a missing one a start-up error.
  bool enable_auto_tool_choice = false;
  /// --reasoning-parser NAME; "" = no reasoning split.
  std::string reasoning_parser;
};

/// One request's output parsing.
struct ChatParsing {
  std::string reasoning_parser;  // "" = none
  tool_parsers::ReasoningStart reasoning_start = tool_parsers::ReasoningStart::kDefault;
  enum class Tools {
    kNone,      // no tool calls (tool_choice "none" or no tools)
    kFormat,    // tool_choice "auto": the model's own format, parsed by `tool_parser`
    kRequired,  // tool_choice "required": the grammar-forced JSON array
    kNamed,     // a named function: the output is its arguments
  };
  Tools tools = Tools::kNone;
  std::string tool_parser;  // kFormat
  std::string function;     // kNamed
  nlohmann::json tools_json = nullptr;  // the request's tools (qwen3_coder's parameter types)

  bool active() const { return !reasoning_parser.empty() || tools != Tools::kNone; }
};

/// A new parser for one choice (null when !parsing.active()). Names were checked at start-up.
std::unique_ptr<tool_parsers::ChatOutputParser> make_chat_output_parser(const ChatParsing& parsing);

/// OpenAI's delta object for a streamed ChatDelta: {"content"?, "reasoning_content"? and
/// "reasoning"? (vLLM's two spellings), "tool_calls"?}; {} when the delta is empty.
nlohmann::json chat_delta_json(const tool_parsers::ChatDelta& delta);

}  // namespace llmserve
