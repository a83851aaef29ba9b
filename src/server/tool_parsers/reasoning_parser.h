// Reasoning parsers (vLLM's --reasoning-parser): split a reasoning model's output, as it
// streams, into `reasoning_content` (the <think>...</think> span) and `content` (the rest).
//
//  - deepseek_r1 (DeepSeek-R1 and distills; vLLM's deepseek_r1_reasoning_parser.py): the
//    output starts inside reasoning, since R1's templates end the prompt with "<think>\n";
//    a <think> the model writes at the start is dropped; everything before </think> is
//    reasoning (all of it, when </think> never comes: a cut-off thought).
//  - qwen3 (Qwen3; vLLM's qwen3_reasoning_parser.py before Qwen3.5): reasoning only when the
//    output opens with <think>; then </think> ends it, and so does a <tool_call> written
//    before any </think> (the tag starts the content, as newer vLLM does).
//  - deepseek_v3 (DeepSeek-V3.1: thinking is a template switch): like qwen3 without the
//    <tool_call> rule; the prompt decides (reasoning_start_from_prompt).
//  - mistral (Magistral, Ministral 3 reasoning; vLLM's mistral_reasoning_parser.py):
//    [THINK]...[/THINK], only when the output opens with [THINK].
//
// Rules shared by all: whitespace before an opening tag at the start and right after the
// closing tag is formatting and dropped; reasoning text is passed on exactly; a partial tag
// ("</thi") is held back until it is known; nothing after the closing tag is parsed again
// (a later <think> is content). Streamed and non-streamed results agree for any split.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace llmserve::tool_parsers {

/// A delta (or, from result(), everything so far): OpenAI-style field names.
struct ReasoningDelta {
  std::string reasoning_content;
  std::string content;
  bool empty() const { return reasoning_content.empty() && content.empty(); }
};

/// Where the output begins. kDefault: the parser's own rule (above). kInReasoning: the prompt
/// opened the reasoning (it ends with "<think>\n"). kInContent: the prompt closed it
/// ("<think>\n\n</think>\n\n", thinking disabled), so only an opening tag in the output
/// starts reasoning.
enum class ReasoningStart : uint8_t { kDefault, kInReasoning, kInContent };

struct ReasoningParserOptions {
  ReasoningStart start = ReasoningStart::kDefault;
};

/// The tags and rules of one --reasoning-parser name.
struct ReasoningFormat {
  std::string_view name;
  std::string_view start_tag;
  std::string_view end_tag;
  bool starts_in_reasoning = false;  // deepseek_r1: no opening tag needed
  std::string_view implicit_end;     // a marker that ends reasoning and begins content ("")
};

class ReasoningParser {
 public:
  ReasoningParser(const ReasoningFormat& format, const ReasoningParserOptions& options);

  const std::string& name() const { return name_; }
  /// The tag that ends the reasoning span ("</think>", "[/THINK]").
  std::string_view end_tag() const { return format_.end_tag; }
  /// The tag that opens it ("<think>"), and whether the output starts inside it without one.
  std::string_view start_tag() const { return format_.start_tag; }
  bool starts_in_reasoning() const { return format_.starts_in_reasoning; }
  /// Feeds the next text delta; returns what it decided.
  ReasoningDelta push(std::string_view delta);
  /// Ends the output, releasing held-back text. Call once.
  ReasoningDelta finish();
  /// Everything emitted so far (the non-streamed result after finish()).
  const ReasoningDelta& result() const { return result_; }
  /// Whether text arriving now is reasoning (or may be, at the very start): a grammar that
  /// constrains the answer applies only once this is false.
  bool in_reasoning() const;

 private:
  enum class State : uint8_t { kStart, kReasoning, kContentStart, kContent };
  void parse(bool at_end, ReasoningDelta* out);
  void emit(bool reasoning, std::string_view text, ReasoningDelta* out);

  std::string name_;
  ReasoningFormat format_;
  bool initial_reasoning_;
  State state_ = State::kStart;
  std::string buf_;  // held-back text
  bool finished_ = false;
  ReasoningDelta result_;
};

/// The accepted names, sorted: deepseek_r1, deepseek_v3, mistral, qwen3.
std::vector<std::string> reasoning_parser_names();

/// A new parser for one output; an unknown name is kInvalidArgument listing the valid ones.
Expected<std::unique_ptr<ReasoningParser>> make_reasoning_parser(
    std::string_view name, const ReasoningParserOptions& options = {});

/// Where a parser named `name` starts for a rendered prompt: kInReasoning when the prompt ends
/// (up to whitespace) with the start tag, kInContent when it ends with the end tag, kDefault
/// otherwise (also for an unknown name).
ReasoningStart reasoning_start_from_prompt(std::string_view name, std::string_view prompt);

}  // namespace llmserve::tool_parsers
