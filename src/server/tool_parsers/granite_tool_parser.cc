// granite: IBM Granite 3.x's tool calls (vLLM's granite_tool_parser.py): a marker, then a JSON
// array of call objects,
//   <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {...}]
// Granite 3.0 writes the <|tool_call|> token, 3.1 and later the text <tool_call> (with no
// closing tag, unlike hermes). A marker followed by anything but an array or a call object
// stays content.
#include <memory>

#include "server/tool_parsers/block_parser.h"
#include "server/tool_parsers/formats.h"

namespace llmserve::tool_parsers {
namespace {

constexpr std::string_view kToken = "<|tool_call|>";
constexpr std::string_view kText = "<tool_call>";

class GraniteToolParser final : public BlockToolParser {
 public:
  explicit GraniteToolParser(const ToolParserOptions& options)
      : BlockToolParser("granite", options, CallIdStyle::kOpenAI) {}

 private:
  enum class State { kContent, kAfterMarker, kItem, kObject, kSep };

  void parse(bool at_end) override {
    while (step(at_end)) {
    }
  }

  // Returns false when it needs more input.
  bool step(bool at_end) {
    switch (state_) {
      case State::kContent: {
        const std::string_view text = pending();
        const MarkerHit hit = find_marker(text, {kToken, kText});
        if (hit.pos == std::string_view::npos) {
          const size_t n = at_end ? text.size() : hit.safe;
          emit_content(text.substr(0, n));
          consume(n);
          return false;
        }
        emit_content(text.substr(0, hit.pos));
        const std::string_view marker = hit.which == 0 ? kToken : kText;
        consume(hit.pos + marker.size());
        start_block(marker);
        state_ = State::kAfterMarker;
        return true;
      }
      case State::kAfterMarker:
      case State::kItem: {
        skip_ws();
        if (scan_at_end()) {
          if (!at_end) return false;
          return reverted();
        }
        if (state_ == State::kAfterMarker && scan_char() == '[') {
          ++scan_;
          in_array_ = true;
          state_ = State::kItem;
          return true;
        }
        if (scan_char() != '{') return reverted();
        if (state_ == State::kAfterMarker) in_array_ = false;
        start_object({});
        state_ = State::kObject;
        return true;
      }
      case State::kObject: {
        const Step s = step_object(at_end);
        if (s == Step::kNeedMore) return false;
        state_ = s == Step::kDone && in_array_ ? State::kSep : State::kContent;
        return true;
      }
      case State::kSep: {
        skip_ws();
        if (scan_at_end() && !at_end) return false;
        if (!scan_at_end() && scan_char() == ',') {
          ++scan_;  // examined only: a bad next item gives ", ..." back as content
          state_ = State::kItem;
          return true;
        }
        if (!scan_at_end() && scan_char() == ']') ++scan_;
        drop_scanned();
        state_ = State::kContent;
        return true;
      }
    }
    return false;
  }

  bool reverted() {
    revert();
    state_ = State::kContent;
    return true;
  }

  State state_ = State::kContent;
  bool in_array_ = false;
};

}  // namespace

std::unique_ptr<ToolParser> make_granite_tool_parser(const ToolParserOptions& options) {
  return std::make_unique<GraniteToolParser>(options);
}

}  // namespace llmserve::tool_parsers
