// qwen3_coder: Qwen3-Coder's (and Qwen3.5's) XML-style calls (vLLM's
// qwen3coder_tool_parser.py; llama.cpp's test-chat.cpp Qwen3-Coder cases):
//   <tool_call>
//   <function=NAME>
//   <parameter=KEY>
//   VALUE
//   </parameter>
//   </function>
//   </tool_call>
// The arguments are built as JSON, `{"KEY": VALUE, ...}`, streamed one parameter at a time.
// One newline after <parameter=KEY> and one before </parameter> are formatting and dropped.
// A value's JSON type comes from the tool's schema in ToolParserOptions::tools: "string" (and
// any parameter without a schema) is a JSON string, streamed as it arrives; integer, number,
// boolean, null, object and array are converted when the value is whole, and fall back to a
// string when the text does not parse as that type. Some models omit the opening <tool_call>
// (llama.cpp's tests) or a </parameter>; both are accepted.
#include <memory>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/block_parser.h"
#include "server/tool_parsers/formats.h"

namespace llmserve::tool_parsers {
namespace {

constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kToolCallEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";
constexpr size_t kMaxName = 256;

// Escapes bytes for the inside of a JSON string; byte-wise, so any split gives the same text.
std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out.push_back(kHex[(c >> 4) & 0xF]);
          out.push_back(kHex[c & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// The schema type of `param` of function `fn` in an OpenAI tools array: "string" when unknown,
// "" when the schema gives no single type (anyOf, ...).
std::string param_type_or_throw(const nlohmann::json& tools, const std::string& fn,
                                const std::string& param) {
  if (!tools.is_array()) return "string";
  for (const auto& tool : tools) {
    const auto* f = tool.is_object() && tool.contains("function") ? &tool["function"] : &tool;
    if (!f->is_object() || f->value("name", "") != fn) continue;
    const auto props = f->value("parameters", nlohmann::json::object())
                           .value("properties", nlohmann::json::object());
    if (!props.is_object() || !props.contains(param) || !props[param].is_object()) {
      return "string";
    }
    const auto& type = props[param].value("type", nlohmann::json());
    if (type.is_string()) return type.get<std::string>();
    if (type.is_array()) {
      for (const auto& t : type) {
        if (t.is_string() && t != "null") return t.get<std::string>();
      }
    }
    return "";
  }
  return "string";
}

std::string param_type(const nlohmann::json& tools, const std::string& fn,
                       const std::string& param) {
  try {
    return param_type_or_throw(tools, fn, param);
  } catch (const nlohmann::json::exception&) {  // a malformed tools array: no schema
    return "string";
  }
}

// A whole non-string value as JSON text, or a JSON string when it does not parse as `type`.
std::string convert_value(const std::string& raw, const std::string& type) {
  const std::string v = trim(raw);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(v);
  } catch (const nlohmann::json::exception&) {
    j = nlohmann::json::value_t::discarded;
  }
  const bool ok = !j.is_discarded() &&
                  (type == "integer"   ? j.is_number_integer()
                   : type == "number"  ? j.is_number()
                   : type == "boolean" ? j.is_boolean()
                   : type == "null"    ? j.is_null()
                   : type == "object"  ? j.is_object()
                   : type == "array"   ? j.is_array()
                                       : true);
  if (ok) return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "\"" + json_escape(sanitize_utf8(raw)) + "\"";
}

class Qwen3CoderToolParser final : public BlockToolParser {
 public:
  explicit Qwen3CoderToolParser(const ToolParserOptions& options)
      : BlockToolParser("qwen3_coder", options, CallIdStyle::kOpenAI) {}

 private:
  enum class State { kContent, kFunction, kFunctionName, kParams, kParamName, kValue,
                     kAfterFunction, kSkip };

  void parse(bool at_end) override {
    while (step(at_end)) {
    }
  }

  // Returns false when it needs more input.
  bool step(bool at_end) {
    switch (state_) {
      case State::kContent: {
        const std::string_view text = pending();
        const MarkerHit hit = find_marker(text, {kToolCall, kFunction});
        if (hit.pos == std::string_view::npos) {
          const size_t n = at_end ? text.size() : hit.safe;
          emit_content(text.substr(0, n));
          consume(n);
          return false;
        }
        emit_content(text.substr(0, hit.pos));
        if (hit.which == 0) {
          consume(hit.pos + kToolCall.size());
          start_block(kToolCall);
        } else {
          consume(hit.pos);
          start_block("");
        }
        state_ = State::kFunction;
        return true;
      }
      case State::kFunction: {
        skip_ws();
        const Match m = match_literal(kFunction);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        if (m == Match::kNo) return reverted();
        state_ = State::kFunctionName;
        return true;
      }
      case State::kFunctionName: {
        std::string name;
        const Match m = read_until(">", kMaxName, &name);
        if (m == Match::kNeedMore) return give_up_if(at_end);
        name_ = sanitize_utf8(trim(name));
        if (m == Match::kNo || name_.empty()) return reverted();
        commit(name_);
        emit_arguments("{");
        num_params_ = 0;
        state_ = State::kParams;
        return true;
      }
      case State::kParams: {
        skip_ws();
        Match m = match_literal(kParameter);
        if (m == Match::kYes) {
          drop_scanned();
          state_ = State::kParamName;
          return true;
        }
        if (m == Match::kNo) m = match_literal(kFunctionEnd);
        if (m == Match::kYes) {
          drop_scanned();
          emit_arguments("}");
          end_call(true);
          state_ = State::kAfterFunction;
          return true;
        }
        if (m == Match::kNeedMore && !at_end) return false;
        return broken();
      }
      case State::kParamName: {
        std::string key;
        const Match m = read_until(">", kMaxName, &key);
        if (m == Match::kNeedMore && !at_end) return false;
        if (m != Match::kYes) return broken();
        drop_scanned();
        key = sanitize_utf8(trim(key));
        type_ = param_type(options().tools, name_, key);
        std::string head = num_params_++ > 0 ? ", \"" : "\"";
        head += json_escape(key) + "\": ";
        if (type_ == "string") head += "\"";
        emit_arguments(head);
        value_.clear();
        value_started_ = false;
        state_ = State::kValue;
        return true;
      }
      case State::kValue:
        return step_value(at_end);
      case State::kAfterFunction: {
        skip_ws();
        const Match m = match_literal(kToolCallEnd);
        if (m == Match::kNeedMore && !at_end) return false;
        if (m == Match::kNeedMore) scan_ = pending().size();
        drop_scanned();
        state_ = State::kContent;
        return true;
      }
      case State::kSkip: {
        const std::string_view text = pending();
        const MarkerHit hit = find_marker(text, {kToolCallEnd});
        if (hit.pos == std::string_view::npos) {
          consume(at_end ? text.size() : hit.safe);
          return false;
        }
        consume(hit.pos + kToolCallEnd.size());
        state_ = State::kContent;
        return true;
      }
    }
    return false;
  }

  // A value runs to </parameter> (or, when that is missing, the next <parameter= or
  // </function>). Strings stream; other types are held until the value is whole.
  bool step_value(bool at_end) {
    std::string_view text = pending();
    if (!value_started_) {
      if (text.empty()) {
        if (!at_end) return false;
      } else {
        value_started_ = true;
        if (text[0] == '\n') {
          consume(1);
          text.remove_prefix(1);
        }
      }
    }
    const MarkerHit hit = find_marker(text, {kParameterEnd, kParameter, kFunctionEnd});
    const bool found = hit.pos != std::string_view::npos;
    size_t n = found ? hit.pos : at_end ? text.size() : hit.safe;
    size_t take = n;
    if (take > 0 && text[take - 1] == '\n') --take;  // the newline before the end tag
    const std::string_view chunk = text.substr(0, take);
    if (type_ == "string") {
      std::string valid;
      for (char c : chunk) value_utf8_.feed(c, &valid);
      emit_arguments(json_escape(valid));
    } else {
      value_.append(chunk);
    }
    if (!found && !at_end) {
      consume(take);  // a trailing '\n' stays pending: it may be the one before </parameter>
      return false;
    }
    consume(n + (found && hit.which == 0 ? kParameterEnd.size() : 0));
    std::string tail;
    value_utf8_.flush(&tail);
    emit_arguments(type_ == "string" ? tail + "\"" : convert_value(value_, type_));
    if (!found) return broken();  // the output ended inside a value
    state_ = State::kParams;
    return true;
  }

  bool give_up_if(bool at_end) { return at_end && reverted(); }
  bool reverted() {
    revert();
    state_ = State::kContent;
    return true;
  }
  bool broken() {
    drop_scanned();
    end_call(false);
    state_ = State::kSkip;
    return true;
  }

  State state_ = State::kContent;
  std::string name_;
  std::string type_;
  std::string value_;
  Utf8Sanitizer value_utf8_;
  bool value_started_ = false;
  int num_params_ = 0;
};

}  // namespace

std::unique_ptr<ToolParser> make_qwen3_coder_tool_parser(const ToolParserOptions& options) {
  return std::make_unique<Qwen3CoderToolParser>(options);
}

}  // namespace llmserve::tool_parsers
