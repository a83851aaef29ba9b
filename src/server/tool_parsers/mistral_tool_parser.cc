// mistral: Mistral's [TOOL_CALLS] formats (vLLM's mistral_tool_parser.py, mistral-common):
//  - tokenizer before v11 (Mistral 7B v0.3, Nemo 2407): a JSON array of call objects,
//      [TOOL_CALLS][{"name": "add", "arguments": {"a": 1}, "id": "abc123XYZ"}, ...]
//  - v11 and later (Mistral Small 3.x, Devstral, Magistral, Ministral 3): one marker per call,
//      [TOOL_CALLS]add[ARGS]{"a": 1}[TOOL_CALLS]mul[ARGS]{"b": 2}
//    with [CALL_ID]id before [ARGS] on some (Mistral Small 3.2), and no [ARGS] when the
//    detokenizer skipped that special token ([TOOL_CALLS]add{"a": 1}).
// Generated ids are 9 alphanumerics: Mistral's templates reject any other tool_call_id. A
// [CALL_ID] the model wrote is used as the id; an "id" key inside an array object is ignored
// (it comes after the arguments, when the call has already been streamed).
#include <memory>

#include "server/tool_parsers/block_parser.h"
#include "server/tool_parsers/formats.h"

namespace llmserve::tool_parsers {
namespace {

constexpr std::string_view kBot = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";
constexpr size_t kMaxName = 256;
constexpr size_t kMaxId = 64;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.';
}

class MistralToolParser final : public BlockToolParser {
 public:
  explicit MistralToolParser(const ToolParserOptions& options)
      : BlockToolParser("mistral", options, CallIdStyle::kMistral) {}

 private:
  enum class State { kContent, kAfterBot, kName, kCallId, kArgs, kObject, kArrayItem,
                     kArrayObject, kArraySep };

  // Returns false when it needs more input.
  bool step(bool at_end) {
    switch (state_) {
      case State::kContent: {
        const std::string_view text = pending();
        const MarkerHit hit = find_marker(text, {kBot});
        if (hit.pos == std::string_view::npos) {
          const size_t n = at_end ? text.size() : hit.safe;
          emit_content(text.substr(0, n));
          consume(n);
          return false;
        }
        emit_content(text.substr(0, hit.pos));
        consume(hit.pos + kBot.size());
        start_block(kBot);
        state_ = State::kAfterBot;
        return true;
      }
      case State::kAfterBot: {
        skip_ws();
        if (scan_at_end()) return give_up_if(at_end);
        const char c = scan_char();
        if (c == '[') {
          ++scan_;
          state_ = State::kArrayItem;
        } else if (c == '{') {
          start_object({});
          state_ = State::kObject;
        } else if (is_name_char(c)) {
          name_.clear();
          state_ = State::kName;
        } else {
          return reverted();
        }
        return true;
      }
      case State::kName: {
        while (!scan_at_end() && is_name_char(scan_char()) && name_.size() <= kMaxName) {
          name_.push_back(scan_char());
          ++scan_;
        }
        if (name_.size() > kMaxName) return reverted();
        if (scan_at_end()) return give_up_if(at_end);
        if (scan_char() == '{') {
          start_arguments(name_);
          state_ = State::kArgs;
          return true;
        }
        Match m = match_literal(kArgs);
        if (m == Match::kYes) {
          start_arguments(name_);
          state_ = State::kArgs;
          return true;
        }
        if (m == Match::kNo) m = match_literal(kCallId);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        if (m == Match::kNo) return reverted();
        state_ = State::kCallId;
        return true;
      }
      case State::kCallId: {
        std::string id;
        const Match m = read_until(kArgs, kMaxId, &id);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        if (m == Match::kNo) return reverted();
        start_arguments(name_, id);
        state_ = State::kArgs;
        return true;
      }
      case State::kArgs:
      case State::kObject: {
        const Step s = state_ == State::kArgs ? step_arguments(at_end) : step_object(at_end);
        if (s == Step::kNeedMore) return false;
        state_ = State::kContent;  // the next call has its own [TOOL_CALLS]
        return true;
      }
      case State::kArrayItem: {
        skip_ws();
        if (scan_at_end()) return give_up_if(at_end);
        if (scan_char() != '{') return reverted();
        start_object({});
        state_ = State::kArrayObject;
        return true;
      }
      case State::kArrayObject: {
        const Step s = step_object(at_end);
        if (s == Step::kNeedMore) return false;
        state_ = s == Step::kDone ? State::kArraySep : State::kContent;
        return true;
      }
      case State::kArraySep: {
        skip_ws();
        if (scan_at_end()) {
          if (!at_end) return false;
          drop_scanned();
          state_ = State::kContent;
          return true;
        }
        if (scan_char() == ',') {
          ++scan_;  // examined, not consumed: a bad next item gives ", ..." back as content
          state_ = State::kArrayItem;
          return true;
        }
        if (scan_char() == ']') ++scan_;
        drop_scanned();
        state_ = State::kContent;
        return true;
      }
    }
    return false;
  }

  void parse(bool at_end) override {
    while (step(at_end)) {
    }
  }

  bool give_up_if(bool at_end) {
    if (!at_end) return false;
    return reverted();
  }
  bool reverted() {
    revert();
    state_ = State::kContent;
    return true;
  }

  State state_ = State::kContent;
  std::string name_;
};

}  // namespace

std::unique_ptr<ToolParser> make_mistral_tool_parser(const ToolParserOptions& options) {
  return std::make_unique<MistralToolParser>(options);
}

}  // namespace llmserve::tool_parsers
