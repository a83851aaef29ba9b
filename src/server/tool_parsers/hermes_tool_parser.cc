// hermes: NousResearch Hermes 2 Pro / Hermes 3, Qwen2.5, Qwen3, SmolLM3 and other templates
// that ask for
//   <tool_call>
//   {"name": <function-name>, "arguments": <args-json-object>}
//   </tool_call>
// one block per call, several in a row for parallel calls (the wording of Qwen2.5's and
// Qwen3's chat templates; vLLM's hermes_tool_parser.py parses the same). A missing
// </tool_call> at the end of the output (the model stopped on EOS) still closes the call.
#include <memory>

#include "server/tool_parsers/block_parser.h"
#include "server/tool_parsers/formats.h"

namespace llmserve::tool_parsers {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesToolParser final : public BlockToolParser {
 public:
  explicit HermesToolParser(const ToolParserOptions& options)
      : BlockToolParser("hermes", options, CallIdStyle::kOpenAI) {}

 private:
  enum class State { kContent, kCall, kAfterCall, kSkip };

  void parse(bool at_end) override {
    for (;;) {
      switch (state_) {
        case State::kContent: {
          const std::string_view text = pending();
          const MarkerHit hit = find_marker(text, {kOpen});
          if (hit.pos == std::string_view::npos) {
            const size_t n = at_end ? text.size() : hit.safe;
            emit_content(text.substr(0, n));
            consume(n);
            return;
          }
          emit_content(text.substr(0, hit.pos));
          consume(hit.pos + kOpen.size());
          start_block(kOpen);
          start_object({});
          state_ = State::kCall;
          break;
        }
        case State::kCall: {
          const Step step = step_object(at_end);
          if (step == Step::kNeedMore) return;
          state_ = step == Step::kDone     ? State::kAfterCall
                   : step == Step::kBroken ? State::kSkip
                                           : State::kContent;
          break;
        }
        case State::kAfterCall: {  // whitespace, then </tool_call>; anything else is content
          skip_ws();
          const Match m = match_literal(kClose);
          if (m == Match::kNeedMore && !at_end) return;
          if (m == Match::kNeedMore) {  // a close tag cut off at the end
            scan_ = pending().size();
          }
          drop_scanned();
          state_ = State::kContent;
          break;
        }
        case State::kSkip: {  // the rest of a broken call, up to its close tag, is dropped
          const std::string_view text = pending();
          const MarkerHit hit = find_marker(text, {kClose, kOpen});
          if (hit.pos == std::string_view::npos) {
            consume(at_end ? text.size() : hit.safe);
            return;
          }
          consume(hit.which == 0 ? hit.pos + kClose.size() : hit.pos);
          state_ = State::kContent;
          break;
        }
      }
    }
  }

  State state_ = State::kContent;
};

}  // namespace

std::unique_ptr<ToolParser> make_hermes_tool_parser(const ToolParserOptions& options) {
  return std::make_unique<HermesToolParser>(options);
}

}  // namespace llmserve::tool_parsers
