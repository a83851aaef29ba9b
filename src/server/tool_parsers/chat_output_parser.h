// ChatOutputParser: the reasoning parser and the tool-call parser chained, for the server's
// chat completions. Text deltas go in; OpenAI-shaped deltas come out ({reasoning_content,
// content, tool_calls[]}), one per SSE chunk, and result() is the non-streamed message. The
// reasoning span is never parsed for tool calls (a model may think about "<tool_call>").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/reasoning_parser.h"
#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

/// One entry of OpenAI's `delta.tool_calls[]`. A call's first delta has its id and name (and
/// then type "function"); later ones only the next arguments fragment.
struct ToolCallDelta {
  int index = 0;
  std::string id;         // "" after the first delta
  std::string name;       // "" after the first delta
  std::string arguments;  // the fragment ("" allowed in the first delta)
  bool first() const { return !id.empty(); }
};

struct ChatDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const {
    return reasoning_content.empty() && content.empty() && tool_calls.empty();
  }
};

/// The whole message: content is "" when there is none (OpenAI: null with tool_calls).
struct ChatOutput {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

class ChatOutputParser {
 public:
  /// Either parser may be null: no reasoning split / no tool-call parsing.
  ChatOutputParser(std::unique_ptr<ReasoningParser> reasoning, std::unique_ptr<ToolParser> tools);

  ChatDelta push(std::string_view delta);
  ChatDelta finish();
  ChatOutput result() const;

  /// See ReasoningParser::in_reasoning (false without a reasoning parser).
  bool in_reasoning() const { return reasoning_ != nullptr && reasoning_->in_reasoning(); }
  bool has_tool_calls() const {
    return tools_ != nullptr && !tools_->result().tool_calls.empty();
  }

 private:
  void add_content(std::string_view text, bool at_end, ChatDelta* out);

  std::unique_ptr<ReasoningParser> reasoning_;
  std::unique_ptr<ToolParser> tools_;
  std::string content_;
  bool finished_ = false;
};

/// OpenAI's JSON for a streamed delta entry: {"index", "id", "type", "function": {"name",
/// "arguments"}} for a call's first, {"index", "function": {"arguments"}} after.
nlohmann::json to_openai_json(const ToolCallDelta& delta);
/// OpenAI's JSON for `message.tool_calls[i]`: {"id", "type", "function": {"name", "arguments"}}.
nlohmann::json to_openai_json(const ToolCall& call);

}  // namespace llmserve::tool_parsers
