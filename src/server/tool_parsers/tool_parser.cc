#include "server/tool_parsers/tool_parser.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace llmserve::tool_parsers {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

constexpr std::string_view kAlnum =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

}  // namespace

ToolParser::ToolParser(std::string name, const ToolParserOptions& options, CallIdStyle id_style)
    : name_(std::move(name)),
      options_(options),
      id_style_(id_style),
      rng_(options.id_seed ? *options.id_seed : std::random_device{}()) {}

std::vector<ToolEvent> ToolParser::push(std::string_view delta) {
  LLMS_CHECK(!finished_, "ToolParser::push after finish");
  buf_.append(delta);
  parse(/*at_end=*/false);
  LLMS_CHECK(pos_ <= buf_.size());
  // Drop the consumed prefix once it dominates, so the buffer stays as small as what is held.
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return std::exchange(events_, {});
}

std::vector<ToolEvent> ToolParser::finish() {
  LLMS_CHECK(!finished_, "ToolParser::finish twice");
  parse(/*at_end=*/true);
  if (in_call_) end_call(false);
  if (pos_ < buf_.size()) emit_content(pending());  // formats consume it all; a safety net
  buf_.clear();
  pos_ = 0;
  if (!held_ws_.empty() && result_.tool_calls.empty()) {
    // No calls: the output's trailing whitespace is content like the rest.
    ToolEvent ev;
    ev.text = std::exchange(held_ws_, {});
    push_event(std::move(ev));
  }
  held_ws_.clear();
  finished_ = true;
  return std::exchange(events_, {});
}

void ToolParser::emit_content(std::string_view text) {
  if (text.empty()) return;
  LLMS_CHECK(!in_call_, "content emitted inside a tool call");
  size_t begin = 0;
  if (result_.content.empty() && !result_.tool_calls.empty()) {
    // Whitespace after a call with no content before it is formatting.
    while (begin < text.size() && is_ws(text[begin])) ++begin;
  }
  size_t end = text.size();
  while (end > begin && is_ws(text[end - 1])) --end;
  if (end > begin) {
    ToolEvent ev;
    ev.text = std::exchange(held_ws_, {});
    ev.text.append(text.substr(begin, end - begin));
    push_event(std::move(ev));
  }
  held_ws_.append(text.substr(std::max(begin, end)));
}

void ToolParser::begin_call(std::string name, std::string id) {
  LLMS_CHECK(!in_call_, "begin_call inside a call");
  if (result_.content.empty()) held_ws_.clear();  // whitespace before the first call
  ToolEvent ev;
  ev.kind = ToolEventKind::kToolCallBegin;
  ev.index = static_cast<int>(result_.tool_calls.size());
  ev.id = id.empty() ? generate_id() : std::move(id);
  ev.name = std::move(name);
  in_call_ = true;
  push_event(std::move(ev));
}

void ToolParser::emit_arguments(std::string_view fragment) {
  LLMS_CHECK(in_call_, "arguments outside a tool call");
  if (fragment.empty()) return;
  ToolEvent ev;
  ev.kind = ToolEventKind::kToolCallArguments;
  ev.index = static_cast<int>(result_.tool_calls.size()) - 1;
  ev.text = std::string(fragment);
  push_event(std::move(ev));
}

void ToolParser::end_call(bool complete) {
  LLMS_CHECK(in_call_, "end_call outside a tool call");
  result_.tool_calls.back().complete = complete;
  in_call_ = false;
}

void ToolParser::push_event(ToolEvent event) {
  switch (event.kind) {
    case ToolEventKind::kContent:
      result_.content += event.text;
      break;
    case ToolEventKind::kToolCallBegin: {
      ToolCall call;
      call.index = event.index;
      call.id = event.id;
      call.name = event.name;
      result_.tool_calls.push_back(std::move(call));
      break;
    }
    case ToolEventKind::kToolCallArguments:
      result_.tool_calls.back().arguments += event.text;
      break;
  }
  // Merge with the previous event of this push when it continues the same thing.
  if (!events_.empty() && event.kind != ToolEventKind::kToolCallBegin) {
    ToolEvent& last = events_.back();
    const bool same_content =
        event.kind == ToolEventKind::kContent && last.kind == ToolEventKind::kContent;
    const bool same_args = event.kind == ToolEventKind::kToolCallArguments &&
                           last.kind == ToolEventKind::kToolCallArguments &&
                           last.index == event.index;
    if (same_content || same_args) {
      last.text += event.text;
      return;
    }
  }
  events_.push_back(std::move(event));
}

std::string ToolParser::generate_id() {
  const size_t n = id_style_ == CallIdStyle::kMistral ? 9 : 24;
  std::uniform_int_distribution<size_t> pick(0, kAlnum.size() - 1);
  std::string id = id_style_ == CallIdStyle::kMistral ? "" : "call_";
  for (size_t i = 0; i < n; ++i) id.push_back(kAlnum[pick(rng_)]);
  return id;
}

ToolParseResult parse_tool_calls(ToolParser& parser, std::string_view text) {
  (void)parser.push(text);
  (void)parser.finish();
  return parser.result();
}

}  // namespace llmserve::tool_parsers
