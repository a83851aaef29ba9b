#include "server/tool_parsers/forced_tool_call_parser.h"

#include <cstdint>
#include <utility>

#include "common/check.h"
#include "server/tool_parsers/call_object.h"
#include "server/tool_parsers/json_scanner.h"

namespace llmserve::tool_parsers {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The array form of tool_choice "required". A byte-by-byte state machine with all its state
// in members, so it consumes every byte it is given and never holds text back.
class RequiredToolCallParser final : public ToolParser {
 public:
  explicit RequiredToolCallParser(const ToolParserOptions& options)
      : ToolParser("required", options, CallIdStyle::kOpenAI) {}

 private:
  enum class State : uint8_t {
    kOpen,      // before the '['
    kFirst,     // after '[': an element or ']'
    kNext,      // after ',': an element
    kElement,   // inside an element object
    kAfter,     // after an element: ',' or ']'
    kClosed,    // after the ']': the rest is dropped
    kDropped,   // malformed: the rest is dropped
  };

  void parse(bool /*at_end*/) override {
    const std::string_view text = pending();
    for (char c : text) step(c);
    consume(text.size());
    flush_arguments();
    // At the end, ToolParser::finish closes a call still open as incomplete.
  }

  void step(char c) {
    switch (state_) {
      case State::kOpen:
        if (is_ws(c)) return;
        state_ = c == '[' ? State::kFirst : State::kDropped;
        return;
      case State::kFirst:
      case State::kNext:
        if (is_ws(c)) return;
        if (c == ']' && state_ == State::kFirst) {
          state_ = State::kClosed;
          return;
        }
        object_ = CallObjectParser();
        state_ = State::kElement;
        feed_element(c);
        return;
      case State::kElement:
        feed_element(c);
        return;
      case State::kAfter:
        if (is_ws(c)) return;
        state_ = c == ',' ? State::kNext : c == ']' ? State::kClosed : State::kDropped;
        return;
      case State::kClosed:
      case State::kDropped:
        return;
    }
  }

  void feed_element(char c) {
    const CallObjectParser::Result r = object_.feed(c);
    if (r == CallObjectParser::Result::kError) {
      if (in_call()) {
        flush_arguments();
        end_call(false);
      }
      state_ = State::kDropped;
      return;
    }
    if (!in_call() && !object_.name().empty()) {
      begin_call(object_.name());
      pending_args_ = object_.take_arguments();  // parameters written before the name
    } else if (in_call()) {
      pending_args_ += object_.take_arguments();
    }
    if (r == CallObjectParser::Result::kDone) {
      // A done object always has a name (CallObjectParser rejects one without), so the call
      // is open here.
      flush_arguments();
      end_call(true);
      state_ = State::kAfter;
    }
  }

  // Arguments are batched per push (and per call) rather than emitted byte by byte.
  void flush_arguments() {
    if (in_call()) emit_arguments(pending_args_);
    pending_args_.clear();
  }

  State state_ = State::kOpen;
  CallObjectParser object_;
  std::string pending_args_;
};

// A named tool_choice: the whole output is one call's arguments.
class NamedToolCallParser final : public ToolParser {
 public:
  NamedToolCallParser(std::string function_name, const ToolParserOptions& options)
      : ToolParser("named", options, CallIdStyle::kOpenAI),
        function_name_(std::move(function_name)) {
    LLMS_CHECK(!function_name_.empty(), "a named tool call needs a function name");
  }

 private:
  enum class State : uint8_t { kValue, kAfter };

  void parse(bool at_end) override {
    if (!begun_) {
      begun_ = true;
      begin_call(function_name_);
    }
    const std::string_view text = pending();
    std::string out;
    for (char c : text) {
      if (state_ != State::kValue) break;  // after the value (or a break in it): dropped
      if (scanner_.first_char() == 0 && is_ws(c)) continue;  // whitespace before the value
      const JsonScanner::Result r = scanner_.feed(c, &out);
      if (r != JsonScanner::Result::kMore) state_ = State::kAfter;
    }
    consume(text.size());
    if (in_call()) emit_arguments(out);
    if (at_end && in_call()) end_call(scanner_.complete_at_end());
  }

  std::string function_name_;
  bool begun_ = false;
  State state_ = State::kValue;
  JsonScanner scanner_;
};

}  // namespace

std::unique_ptr<ToolParser> make_required_tool_call_parser(const ToolParserOptions& options) {
  return std::make_unique<RequiredToolCallParser>(options);
}

std::unique_ptr<ToolParser> make_named_tool_call_parser(std::string function_name,
                                                        const ToolParserOptions& options) {
  return std::make_unique<NamedToolCallParser>(std::move(function_name), options);
}

}  // namespace llmserve::tool_parsers
