#include "server/tool_parsers/reasoning_parser.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/check.h"
#include "server/tool_parsers/marker.h"

namespace llmserve::tool_parsers {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

constexpr ReasoningFormat kFormats[] = {
    {"deepseek_r1", "<think>", "</think>", /*starts_in_reasoning=*/true, ""},
    {"deepseek_v3", "<think>", "</think>", /*starts_in_reasoning=*/false, ""},
    {"mistral", "[THINK]", "[/THINK]", /*starts_in_reasoning=*/false, ""},
    {"qwen3", "<think>", "</think>", /*starts_in_reasoning=*/false, "<tool_call>"},
};

const ReasoningFormat* find_format(std::string_view name) {
  for (const ReasoningFormat& f : kFormats) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

ReasoningParser::ReasoningParser(const ReasoningFormat& format,
                                 const ReasoningParserOptions& options)
    : name_(format.name),
      format_(format),
      initial_reasoning_(options.start == ReasoningStart::kInReasoning   ? true
                         : options.start == ReasoningStart::kInContent ? false
                                                                       : format.starts_in_reasoning) {}

ReasoningDelta ReasoningParser::push(std::string_view delta) {
  LLMS_CHECK(!finished_, "ReasoningParser::push after finish");
  buf_.append(delta);
  ReasoningDelta out;
  parse(/*at_end=*/false, &out);
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  LLMS_CHECK(!finished_, "ReasoningParser::finish twice");
  ReasoningDelta out;
  parse(/*at_end=*/true, &out);
  finished_ = true;
  return out;
}

bool ReasoningParser::in_reasoning() const {
  return state_ == State::kReasoning || (state_ == State::kStart && initial_reasoning_);
}

void ReasoningParser::emit(bool reasoning, std::string_view text, ReasoningDelta* out) {
  if (text.empty()) return;
  (reasoning ? out->reasoning_content : out->content).append(text);
  (reasoning ? result_.reasoning_content : result_.content).append(text);
}

void ReasoningParser::parse(bool at_end, ReasoningDelta* out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {  // whitespace, then maybe the opening tag
        size_t i = 0;
        while (i < buf_.size() && is_ws(buf_[i])) ++i;
        if (i == buf_.size() && !at_end) return;
        const std::string_view rest = std::string_view(buf_).substr(i);
        const std::string_view tag = format_.start_tag;
        if (rest.substr(0, tag.size()) == tag) {
          buf_.erase(0, i + tag.size());
          state_ = State::kReasoning;
          break;
        }
        if (!at_end && tag.substr(0, rest.size()) == rest) return;  // a partial tag
        state_ = initial_reasoning_ ? State::kReasoning : State::kContent;
        break;
      }
      case State::kReasoning: {
        const MarkerHit hit = find_marker(buf_, {format_.end_tag, format_.implicit_end});
        if (hit.pos == std::string_view::npos) {
          const size_t n = at_end ? buf_.size() : hit.safe;
          emit(true, std::string_view(buf_).substr(0, n), out);
          buf_.erase(0, n);
          return;
        }
        emit(true, std::string_view(buf_).substr(0, hit.pos), out);
        if (hit.which == 0) {
          buf_.erase(0, hit.pos + format_.end_tag.size());
          state_ = State::kContentStart;
        } else {
          buf_.erase(0, hit.pos);  // the implicit end marker is content
          state_ = State::kContent;
        }
        break;
      }
      case State::kContentStart: {  // whitespace after the closing tag is dropped
        const auto it = std::find_if(buf_.begin(), buf_.end(), [](char c) { return !is_ws(c); });
        buf_.erase(buf_.begin(), it);
        if (buf_.empty()) return;
        state_ = State::kContent;
        break;
      }
      case State::kContent:
        emit(false, buf_, out);
        buf_.clear();
        return;
    }
  }
}

std::vector<std::string> reasoning_parser_names() {
  std::vector<std::string> names;
  for (const ReasoningFormat& f : kFormats) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

Expected<std::unique_ptr<ReasoningParser>> make_reasoning_parser(
    std::string_view name, const ReasoningParserOptions& options) {
  const ReasoningFormat* f = find_format(name);
  if (f == nullptr) {
    return InvalidArgument("unknown reasoning parser '{}'; valid names: {}", name,
                           fmt::join(reasoning_parser_names(), ", "));
  }
  return std::make_unique<ReasoningParser>(*f, options);
}

ReasoningStart reasoning_start_from_prompt(std::string_view name, std::string_view prompt) {
  const ReasoningFormat* f = find_format(name);
  if (f == nullptr) return ReasoningStart::kDefault;
  while (!prompt.empty() && is_ws(prompt.back())) prompt.remove_suffix(1);
  const auto ends_with = [&](std::string_view s) {
    return prompt.size() >= s.size() && prompt.substr(prompt.size() - s.size()) == s;
  };
  if (ends_with(f->start_tag)) return ReasoningStart::kInReasoning;
  if (ends_with(f->end_tag)) return ReasoningStart::kInContent;
  return ReasoningStart::kDefault;
}

}  // namespace llmserve::tool_parsers
