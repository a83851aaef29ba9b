// CallObjectParser: one tool call written as a JSON object, {"name": "f", "arguments": {...}},
// parsed byte by byte (the shape Hermes, Llama 3.x, Mistral's array form and Granite share).
// Keys may come in any order; "parameters" is accepted for "arguments" (Llama 3.x's spelling);
// other keys ("type", "id") are validated and ignored. The arguments text is the value as the
// model wrote it, so it can be streamed while the model writes it, with three conversions
// decided once the value is whole: a JSON string holding a serialized object (Granite writes
// "arguments": "{\"a\": 1}") is unwrapped to that object's text, null becomes "{}", and a
// missing arguments key gives "{}".
#pragma once

#include <cstdint>
#include <string>

#include "server/tool_parsers/json_scanner.h"

namespace llmserve::tool_parsers {

class CallObjectParser {
 public:
  struct Config {
    /// The first key must be "name" or "type": prose that happens to hold a JSON object is
    /// rejected at its first key (llama3_json, whose calls have no marker before them).
    bool name_first = false;
    /// An object without an arguments/parameters key is not a call (llama3_json).
    bool require_arguments = false;
  };
  enum class Result : uint8_t { kMore, kDone, kError };  // kError: byte not consumed

  CallObjectParser() = default;
  explicit CallObjectParser(Config config) : config_(config) {}
  void reset() { *this = CallObjectParser(config_); }

  /// Feeds one byte (leading whitespace before '{' is accepted).
  Result feed(char c);

  /// The header is known: the name is decoded and the arguments are under way (an object
  /// value past its first key, or a whole value), or the object ended. From here the caller
  /// streams take_arguments() after each feed.
  bool ready() const {
    return !name_.empty() &&
           (have_args_ || done() || (streaming_args_ && scanner_.seen_key()));
  }
  bool done() const { return state_ == State::kDone; }
  const std::string& name() const { return name_; }
  /// The arguments text decided since the last call (everything so far, the first time).
  std::string take_arguments();

 private:
  enum class State : uint8_t { kOpen, kKeyFirst, kKey, kKeyString, kColon, kValueStart,
                               kValue, kCommaOrEnd, kDone, kError };
  enum class Role : uint8_t { kName, kArguments, kOther };

  Result fail() { state_ = State::kError; return Result::kError; }
  Result on_key_done();
  Result on_value_done();
  Result end_object();

  Config config_;
  State state_ = State::kOpen;
  Role role_ = Role::kOther;
  JsonScanner scanner_;  // the current key or value
  std::string text_;     // the current key, or a name / buffered arguments value
  bool first_key_ = true;
  bool streaming_args_ = false;  // an object value: its bytes go straight to args_
  bool args_started_ = false;
  bool have_args_ = false;
  std::string name_;
  std::string args_;
};

}  // namespace llmserve::tool_parsers
