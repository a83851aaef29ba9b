#include "server/tool_parsers/call_object.h"

#include <utility>

#include <nlohmann/json.hpp>

namespace llmserve::tool_parsers {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Decodes a JSON string literal the scanner has validated; "" if it somehow is not one.
std::string decode_string(const std::string& literal) {
  try {
    const nlohmann::json j = nlohmann::json::parse(literal);
    if (j.is_string()) return j.get<std::string>();
  } catch (const nlohmann::json::exception&) {
  }
  return {};
}

// Granite-style arguments: a string whose content is a serialized JSON object.
bool holds_json_object(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  return i < s.size() && s[i] == '{' && nlohmann::json::accept(s);
}

}  // namespace

CallObjectParser::Result CallObjectParser::feed(char c) {
  switch (state_) {
    case State::kOpen:
      if (is_ws(c)) return Result::kMore;
      if (c != '{') return fail();
      state_ = State::kKeyFirst;
      return Result::kMore;
    case State::kKeyFirst:
    case State::kKey:
      if (is_ws(c)) return Result::kMore;
      if (c == '}' && state_ == State::kKeyFirst) return end_object();
      if (c != '"') return fail();
      scanner_.reset();
      text_.clear();
      (void)scanner_.feed(c, &text_);
      state_ = State::kKeyString;
      return Result::kMore;
    case State::kKeyString:
      switch (scanner_.feed(c, &text_)) {
        case JsonScanner::Result::kDone: return on_key_done();
        case JsonScanner::Result::kMore: return Result::kMore;
        default: return fail();
      }
    case State::kColon:
      if (is_ws(c)) return Result::kMore;
      if (c != ':') return fail();
      state_ = State::kValueStart;
      return Result::kMore;
    case State::kValueStart:
      if (is_ws(c)) return Result::kMore;
      scanner_.reset();
      text_.clear();
      if (role_ == Role::kName && c != '"') return fail();
      if (role_ == Role::kArguments) {
        args_started_ = true;
        streaming_args_ = c == '{';
      }
      state_ = State::kValue;
      [[fallthrough]];
    case State::kValue: {
      std::string out;
      const JsonScanner::Result r = scanner_.feed(c, &out);
      if (r == JsonScanner::Result::kError) return fail();
      if (r == JsonScanner::Result::kDoneBefore) {  // a number ended before `c`
        if (on_value_done() == Result::kError) return Result::kError;
        return feed(c);
      }
      if (role_ == Role::kArguments && streaming_args_) {
        args_ += out;
      } else if (role_ != Role::kOther) {
        text_ += out;
      }
      if (r == JsonScanner::Result::kDone) return on_value_done();
      return Result::kMore;
    }
    case State::kCommaOrEnd:
      if (is_ws(c)) return Result::kMore;
      if (c == ',') {
        state_ = State::kKey;
        return Result::kMore;
      }
      if (c == '}') return end_object();
      return fail();
    case State::kDone:
    case State::kError:
      return fail();
  }
  return fail();
}

CallObjectParser::Result CallObjectParser::on_key_done() {
  const std::string key = decode_string(text_);
  if (config_.name_first && first_key_ && key != "name" && key != "type") return fail();
  first_key_ = false;
  if (key == "name" && name_.empty()) {
    role_ = Role::kName;
  } else if ((key == "arguments" || key == "parameters") && !have_args_ && !args_started_) {
    role_ = Role::kArguments;
  } else {
    role_ = Role::kOther;
  }
  state_ = State::kColon;
  return Result::kMore;
}

CallObjectParser::Result CallObjectParser::on_value_done() {
  if (role_ == Role::kName) {
    name_ = decode_string(text_);
    if (name_.empty()) return fail();
  } else if (role_ == Role::kArguments) {
    have_args_ = true;
    if (!streaming_args_) {
      if (!text_.empty() && text_[0] == '"') {
        const std::string inner = decode_string(text_);
        args_ += holds_json_object(inner) ? inner : text_;
      } else if (text_ == "null") {
        args_ += "{}";
      } else {
        args_ += text_;
      }
    }
    streaming_args_ = false;
  }
  role_ = Role::kOther;
  state_ = State::kCommaOrEnd;
  return Result::kMore;
}

CallObjectParser::Result CallObjectParser::end_object() {
  if (name_.empty()) return fail();
  if (!have_args_) {
    if (config_.require_arguments) return fail();
    args_ += "{}";
    have_args_ = true;
  }
  state_ = State::kDone;
  return Result::kDone;
}

std::string CallObjectParser::take_arguments() { return std::exchange(args_, {}); }

}  // namespace llmserve::tool_parsers
