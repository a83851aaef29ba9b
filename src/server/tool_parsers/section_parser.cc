#include "server/tool_parsers/section_parser.h"

#include <string>

#include "server/tool_parsers/block_parser.h"
#include "server/tool_parsers/json_scanner.h"

namespace llmserve::tool_parsers {
namespace {

constexpr size_t kMaxType = 64;
constexpr size_t kMaxName = 256;

std::string trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// "functions.get_weather:0" -> "get_weather" (Kimi K2's call ids).
std::string name_from_functions_id(std::string_view id) {
  if (id.substr(0, 10) == "functions.") id.remove_prefix(10);
  const size_t colon = id.rfind(':');
  if (colon != std::string_view::npos) id = id.substr(0, colon);
  return std::string(id);
}

class SectionToolParser final : public BlockToolParser {
 public:
  SectionToolParser(const SectionFormat& format, const ToolParserOptions& options)
      : BlockToolParser(std::string(format.parser_name), options, CallIdStyle::kOpenAI),
        f_(format) {}

 private:
  enum class State { kContent, kSectionStart, kHeader, kName, kFence, kArgs, kCloseFence,
                     kCallEnd, kBetweenCalls, kSkip };

  void parse(bool at_end) override {
    while (step(at_end)) {
    }
  }

  // Returns false when it needs more input.
  bool step(bool at_end) {
    switch (state_) {
      case State::kContent: {
        const std::string_view text = pending();
        const MarkerHit hit = find_marker(text, {f_.section_begin, f_.call_begin});
        if (hit.pos == std::string_view::npos) {
          const size_t n = at_end ? text.size() : hit.safe;
          emit_content(text.substr(0, n));
          consume(n);
          return false;
        }
        emit_content(text.substr(0, hit.pos));
        const std::string_view marker = hit.which == 0 ? f_.section_begin : f_.call_begin;
        consume(hit.pos + marker.size());
        start_block(marker);
        state_ = hit.which == 0 ? State::kSectionStart : State::kHeader;
        return true;
      }
      case State::kSectionStart: {
        skip_ws();
        const Match m = match_literal(f_.call_begin);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        if (m == Match::kNo) return reverted();
        state_ = State::kHeader;
        return true;
      }
      case State::kHeader: {
        const bool type_first = f_.header == SectionFormat::Header::kTypeThenName;
        std::string text;
        const Match m = read_until(f_.sep, type_first ? kMaxType : kMaxName, &text);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        if (m == Match::kNo) return reverted();
        if (type_first) {
          state_ = State::kName;
          return true;
        }
        id_.clear();
        name_ = sanitize_utf8(trim(text));
        if (f_.header == SectionFormat::Header::kFunctionsId) {
          id_ = name_;
          name_ = name_from_functions_id(id_);
        }
        if (name_.empty()) return reverted();
        start_arguments(name_, id_);
        state_ = State::kArgs;
        return true;
      }
      case State::kName: {
        std::string text;
        const Match m = read_until("\n", kMaxName, &text);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        name_ = sanitize_utf8(trim(text));
        if (m == Match::kNo || name_.empty()) return reverted();
        state_ = State::kFence;
        return true;
      }
      case State::kFence: {  // an optional ```json or ``` before the arguments
        skip_ws();
        Match m = match_literal("```json");
        if (m == Match::kNo) m = match_literal("```");
        if (m == Match::kNeedMore) return give_up_if(at_end);
        start_arguments(name_);
        state_ = State::kArgs;
        return true;
      }
      case State::kArgs: {
        const Step s = step_arguments(at_end);
        if (s == Step::kNeedMore) return false;
        state_ = s == Step::kDone     ? State::kCloseFence
                 : s == Step::kBroken ? State::kSkip
                                      : State::kContent;
        return true;
      }
      case State::kCloseFence: {
        skip_ws();
        if (f_.header == SectionFormat::Header::kTypeThenName) {
          const Match m = match_literal("```");
          if (m == Match::kNeedMore && !at_end) return false;
        }
        state_ = State::kCallEnd;
        return true;
      }
      case State::kCallEnd:
      case State::kBetweenCalls: {
        skip_ws();
        const bool call_end = state_ == State::kCallEnd;
        Match m = match_literal(call_end ? f_.call_end : f_.call_begin);
        if (m == Match::kYes) {
          if (call_end) {
            drop_scanned();
            state_ = State::kBetweenCalls;
          } else {
            state_ = State::kHeader;  // examined only: a bad header goes back as content
          }
          return true;
        }
        if (m == Match::kNo) m = match_literal(f_.section_end);
        if (m == Match::kNeedMore && !at_end) return false;
        if (m == Match::kNeedMore) scan_ = pending().size();  // a marker cut off at the end
        drop_scanned();  // the end of the section, or a missing end marker: content again
        state_ = State::kContent;
        return true;
      }
      case State::kSkip: {
        const std::string_view text = pending();
        const MarkerHit hit = find_marker(text, {f_.call_end, f_.section_end});
        if (hit.pos == std::string_view::npos) {
          consume(at_end ? text.size() : hit.safe);
          return false;
        }
        consume(hit.pos + (hit.which == 0 ? f_.call_end.size() : f_.section_end.size()));
        state_ = hit.which == 0 ? State::kBetweenCalls : State::kContent;
        return true;
      }
    }
    return false;
  }

  bool give_up_if(bool at_end) { return at_end && reverted(); }
  bool reverted() {
    revert();
    state_ = State::kContent;
    return true;
  }

  const SectionFormat f_;
  State state_ = State::kContent;
  std::string name_;
  std::string id_;
};

}  // namespace

std::unique_ptr<ToolParser> make_section_tool_parser(const SectionFormat& format,
                                                     const ToolParserOptions& options) {
  return std::make_unique<SectionToolParser>(format, options);
}

}  // namespace llmserve::tool_parsers
