// Streaming tool-call parsers: turn a model's text output, as it is generated, into OpenAI's
// message shape: `content` plus `tool_calls[]` ({index, id, type: "function", function: {name,
// arguments}}). One parser per model family's format (hermes, llama3_json, mistral, ...: the
// names of vLLM's --tool-call-parser); tool_parser_registry.h makes them by name and detects the
// format from a chat template.
//
// Contract, for every format:
//  - push(delta) as text arrives, finish() once at the end; each returns the events decided by
//    then. Text that may still become a tool-call marker ("<tool" of "<tool_call>") is held
//    back until it is known either way.
//  - Streamed and non-streamed agree exactly: result() is the concatenation of all events, and
//    it does not depend on how the text was split into deltas.
//  - A call's argument fragments join to exactly its `arguments`: the JSON text the model
//    wrote, verbatim (its own spacing), except that raw control characters inside strings come
//    out escaped and invalid UTF-8 as U+FFFD, so a complete call's arguments always parse.
//  - Special tokens must reach the parser as text: decode the output with special tokens kept
//    ([TOOL_CALLS], <｜tool▁calls▁begin｜>, <|python_tag|> are special in their vocabularies).
//  - Whitespace where content touches only tool calls is dropped ("Sure.\n\n<tool_call>..."
//    gives content "Sure."); whitespace between two pieces of content is kept, and an output
//    without calls passes through unchanged.
//  - Malformed output never throws:
//    * until a call's header is known (its name, and its arguments past their first key), a
//      block that turns out not to be a call (bad JSON, no name, a broken marker) is released
//      as content, marker included, as vLLM does;
//    * once the header has been streamed it cannot be taken back: a call whose arguments are
//      cut (max_tokens) or break off invalid keeps what was emitted and has complete = false;
//      the rest of a broken block (up to its end marker, where the format has one) is dropped;
//      where the format has no end marker (llama3_json, mistral's v11 form) it is content.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmserve::tool_parsers {

/// One entry of OpenAI's `message.tool_calls[]` (type is always "function").
struct ToolCall {
  int index = 0;          // 0-based position in tool_calls
  std::string id;         // "call_<24 alnum>", a model-given id, or 9 alnum for Mistral
  std::string name;       // function.name
  std::string arguments;  // function.arguments: JSON text, the joined argument fragments
  bool complete = false;  // the arguments ended as a whole JSON value
};

/// The whole parsed output: `content` ("" when there is none) and the calls in order.
struct ToolParseResult {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

enum class ToolEventKind : uint8_t {
  kContent,            // text: a content delta
  kToolCallBegin,      // index, id, name: a new call (OpenAI: id, type, function.name once)
  kToolCallArguments,  // index, text: the next fragment of that call's function.arguments
};

struct ToolEvent {
  ToolEventKind kind = ToolEventKind::kContent;
  int index = -1;
  std::string text;
  std::string id;
  std::string name;
};

struct ToolParserOptions {
  /// Seed for generated call ids; unset = std::random_device (ids differ on every run).
  std::optional<uint64_t> id_seed;
  /// The request's OpenAI `tools` array; formats whose arguments are not JSON (qwen3_coder's
  /// XML parameters) use each parameter's schema type. May be null.
  nlohmann::json tools = nullptr;
};

/// How generated call ids look: OpenAI's "call_" + 24 alphanumerics, or Mistral's 9
/// alphanumerics (its chat templates reject any other tool_call_id).
enum class CallIdStyle : uint8_t { kOpenAI, kMistral };

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  ToolParser(const ToolParser&) = delete;
  ToolParser& operator=(const ToolParser&) = delete;

  /// The --tool-call-parser name ("hermes", "llama3_json", ...).
  const std::string& name() const { return name_; }

  /// Feeds the next text delta; returns the events it decided (possibly none).
  std::vector<ToolEvent> push(std::string_view delta);
  /// Ends the output: releases held-back text, closes an open call. Call once.
  std::vector<ToolEvent> finish();

  /// Everything emitted so far; the final non-streamed result after finish().
  const ToolParseResult& result() const { return result_; }
  bool finished() const { return finished_; }

 protected:
  ToolParser(std::string name, const ToolParserOptions& options, CallIdStyle id_style);

  /// Consumes as much of pending() as can be decided. With at_end, must consume it all.
  virtual void parse(bool at_end) = 0;

  std::string_view pending() const { return std::string_view(buf_).substr(pos_); }
  void consume(size_t n) { pos_ += n; }

  void emit_content(std::string_view text);
  /// Starts call number result().tool_calls.size(); an empty id is generated.
  void begin_call(std::string name, std::string id = {});
  void emit_arguments(std::string_view fragment);
  void end_call(bool complete);
  bool in_call() const { return in_call_; }

  const ToolParserOptions& options() const { return options_; }

 private:
  void push_event(ToolEvent event);
  std::string generate_id();

  std::string name_;
  ToolParserOptions options_;
  CallIdStyle id_style_;
  std::mt19937_64 rng_;

  std::string buf_;   // input not yet consumed starts at pos_
  size_t pos_ = 0;
  std::string held_ws_;  // trailing whitespace of content: kept only if content follows
  bool in_call_ = false;
  bool finished_ = false;

  std::vector<ToolEvent> events_;
  ToolParseResult result_;
};

/// Runs `parser` over a whole output at once: the non-streamed result.
ToolParseResult parse_tool_calls(ToolParser& parser, std::string_view text);

}  // namespace llmserve::tool_parsers
