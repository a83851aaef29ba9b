#include "server/tool_parsers/chat_output_parser.h"

#include <utility>

#include "common/check.h"

namespace llmserve::tool_parsers {
namespace {

void append_events(std::vector<ToolEvent> events, ChatDelta* out) {
  for (ToolEvent& ev : events) {
    switch (ev.kind) {
      case ToolEventKind::kContent:
        out->content += ev.text;
        break;
      case ToolEventKind::kToolCallBegin: {
        ToolCallDelta d;
        d.index = ev.index;
        d.id = std::move(ev.id);
        d.name = std::move(ev.name);
        out->tool_calls.push_back(std::move(d));
        break;
      }
      case ToolEventKind::kToolCallArguments:
        if (out->tool_calls.empty() || out->tool_calls.back().index != ev.index) {
          ToolCallDelta d;
          d.index = ev.index;
          out->tool_calls.push_back(std::move(d));
        }
        out->tool_calls.back().arguments += ev.text;
        break;
    }
  }
}

}  // namespace

ChatOutputParser::ChatOutputParser(std::unique_ptr<ReasoningParser> reasoning,
                                   std::unique_ptr<ToolParser> tools)
    : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}

void ChatOutputParser::add_content(std::string_view text, bool at_end, ChatDelta* out) {
  if (tools_ == nullptr) {
    out->content.append(text);
    content_.append(text);
    return;
  }
  if (!text.empty()) append_events(tools_->push(text), out);
  if (at_end) append_events(tools_->finish(), out);
}

ChatDelta ChatOutputParser::push(std::string_view delta) {
  LLMS_CHECK(!finished_, "ChatOutputParser::push after finish");
  ChatDelta out;
  if (reasoning_ == nullptr) {
    add_content(delta, /*at_end=*/false, &out);
    return out;
  }
  ReasoningDelta r = reasoning_->push(delta);
  out.reasoning_content = std::move(r.reasoning_content);
  add_content(r.content, /*at_end=*/false, &out);
  return out;
}

ChatDelta ChatOutputParser::finish() {
  LLMS_CHECK(!finished_, "ChatOutputParser::finish twice");
  finished_ = true;
  ChatDelta out;
  if (reasoning_ == nullptr) {
    add_content("", /*at_end=*/true, &out);
    return out;
  }
  ReasoningDelta r = reasoning_->finish();
  out.reasoning_content = std::move(r.reasoning_content);
  add_content(r.content, /*at_end=*/true, &out);
  return out;
}

ChatOutput ChatOutputParser::result() const {
  ChatOutput out;
  if (reasoning_ != nullptr) out.reasoning_content = reasoning_->result().reasoning_content;
  if (tools_ != nullptr) {
    out.content = tools_->result().content;
    out.tool_calls = tools_->result().tool_calls;
  } else {
    out.content = content_;
  }
  return out;
}

nlohmann::json to_openai_json(const ToolCallDelta& delta) {
  nlohmann::json j = {{"index", delta.index}};
  if (delta.first()) {
    j["id"] = delta.id;
    j["type"] = "function";
    j["function"] = {{"name", delta.name}, {"arguments", delta.arguments}};
  } else {
    j["function"] = {{"arguments", delta.arguments}};
  }
  return j;
}

nlohmann::json to_openai_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace llmserve::tool_parsers
