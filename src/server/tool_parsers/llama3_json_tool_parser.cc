// llama3_json: Meta Llama 3.1 / 3.2 / 3.3 JSON tool calls. Their chat templates ask for
//   {"name": function name, "parameters": dictionary of argument name and its value}
// (Llama 3.1 may put <|python_tag|> first); several calls are separated by ";" (vLLM's
// llama_tool_parser.py). There is no marker, so a '{' in content is held back until its first
// key shows it is not a call ("name" or "type" must come first), or until the object ends
// without "name" and "parameters"/"arguments"; then it is released as content.
// <|python_tag|> followed by anything but a JSON call (Llama 3.1's built-in tools,
// `brave_search.call(query="...")`) stays content.
#include <memory>

#include "server/tool_parsers/block_parser.h"
#include "server/tool_parsers/formats.h"

namespace llmserve::tool_parsers {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonToolParser final : public BlockToolParser {
 public:
  explicit Llama3JsonToolParser(const ToolParserOptions& options)
      : BlockToolParser("llama3_json", options, CallIdStyle::kOpenAI) {}

 private:
  enum class State { kContent, kCall, kAfterCall, kAfterSemicolon };

  static constexpr CallObjectParser::Config kConfig{.name_first = true,
                                                    .require_arguments = true};

  void parse(bool at_end) override {
    for (;;) {
      switch (state_) {
        case State::kContent: {
          const std::string_view text = pending();
          const MarkerHit hit = find_marker(text, {kPythonTag, "{"});
          if (hit.pos == std::string_view::npos) {
            const size_t n = at_end ? text.size() : hit.safe;
            emit_content(text.substr(0, n));
            consume(n);
            return;
          }
          emit_content(text.substr(0, hit.pos));
          if (hit.which == 0) {
            consume(hit.pos + kPythonTag.size());
            start_block(kPythonTag);
          } else {
            consume(hit.pos);  // the '{' is the object's first byte
            start_block("");
          }
          start_object(kConfig);
          state_ = State::kCall;
          break;
        }
        case State::kCall: {
          const Step step = step_object(at_end);
          if (step == Step::kNeedMore) return;
          // No end marker: after a broken call the rest is content again.
          state_ = step == Step::kDone ? State::kAfterCall : State::kContent;
          break;
        }
        case State::kAfterCall:  // an optional ';' separates parallel calls; it is dropped
        case State::kAfterSemicolon: {
          skip_ws();
          if (state_ == State::kAfterCall) {
            const Match m = match_literal(";");
            if (m == Match::kNeedMore && !at_end) return;
            if (m == Match::kYes) {
              state_ = State::kAfterSemicolon;
              break;
            }
          } else if (scan_at_end() && !at_end) {
            return;
          }
          drop_scanned();
          state_ = State::kContent;
          break;
        }
      }
    }
  }

  State state_ = State::kContent;
};

}  // namespace

std::unique_ptr<ToolParser> make_llama3_json_tool_parser(const ToolParserOptions& options) {
  return std::make_unique<Llama3JsonToolParser>(options);
}

}  // namespace llmserve::tool_parsers
