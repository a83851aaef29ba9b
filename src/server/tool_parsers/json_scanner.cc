#include "server/tool_parsers/json_scanner.h"

#include <fmt/format.h>

namespace llmserve::tool_parsers {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

void Utf8Sanitizer::feed(char c, std::string* out) {
  const auto u = static_cast<unsigned char>(c);
  if (need_ > 0) {
    if (u >= lo_ && u <= hi_) {
      pending_.push_back(c);
      lo_ = 0x80;
      hi_ = 0xBF;
      if (--need_ == 0) {
        out->append(pending_);
        pending_.clear();
      }
      return;
    }
    flush(out);  // a broken sequence; `c` starts afresh
  }
  if (u < 0x80) {
    out->push_back(c);
    return;
  }
  lo_ = 0x80;
  hi_ = 0xBF;
  if (u >= 0xC2 && u <= 0xDF) {
    need_ = 1;
  } else if (u >= 0xE0 && u <= 0xEF) {
    need_ = 2;
    if (u == 0xE0) lo_ = 0xA0;  // no overlong forms
    if (u == 0xED) hi_ = 0x9F;  // no surrogates
  } else if (u >= 0xF0 && u <= 0xF4) {
    need_ = 3;
    if (u == 0xF0) lo_ = 0x90;
    if (u == 0xF4) hi_ = 0x8F;  // nothing past U+10FFFF
  } else {
    out->append(kReplacement);
    return;
  }
  pending_.assign(1, c);
}

void Utf8Sanitizer::flush(std::string* out) {
  if (need_ == 0) return;
  out->append(kReplacement);
  pending_.clear();
  need_ = 0;
}

std::string sanitize_utf8(std::string_view s) {
  Utf8Sanitizer u;
  std::string out;
  for (char c : s) u.feed(c, &out);
  u.flush(&out);
  return out;
}

JsonScanner::Result JsonScanner::value_start(char c, std::string* out) {
  if (first_ == 0) first_ = c;
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxDepth) return fail();
      stack_.push_back(c);
      state_ = c == '{' ? State::kObjectFirst : State::kArrayFirst;
      break;
    case '"':
      state_ = State::kString;
      string_is_key_ = false;
      break;
    case '-': state_ = State::kNumSign; break;
    case '0': state_ = State::kNumZero; break;
    case 't': literal_ = "rue"; state_ = State::kLiteral; break;
    case 'f': literal_ = "alse"; state_ = State::kLiteral; break;
    case 'n': literal_ = "ull"; state_ = State::kLiteral; break;
    default:
      if (c >= '1' && c <= '9') { state_ = State::kNumInt; break; }
      return fail();
  }
  out->push_back(c);
  return Result::kMore;
}

JsonScanner::Result JsonScanner::value_end() {
  if (stack_.empty()) {
    state_ = State::kDone;
    return Result::kDone;
  }
  state_ = State::kAfterValue;
  return Result::kMore;
}

JsonScanner::Result JsonScanner::number(char c, std::string* out) {
  State next = State::kError;
  switch (state_) {
    case State::kNumSign:
      if (c == '0') next = State::kNumZero;
      else if (is_digit(c)) next = State::kNumInt;
      break;
    case State::kNumZero:
      if (c == '.') next = State::kNumDot;
      else if (c == 'e' || c == 'E') next = State::kNumE;
      break;
    case State::kNumInt:
      if (is_digit(c)) next = State::kNumInt;
      else if (c == '.') next = State::kNumDot;
      else if (c == 'e' || c == 'E') next = State::kNumE;
      break;
    case State::kNumDot:
      if (is_digit(c)) next = State::kNumFrac;
      break;
    case State::kNumFrac:
      if (is_digit(c)) next = State::kNumFrac;
      else if (c == 'e' || c == 'E') next = State::kNumE;
      break;
    case State::kNumE:
      if (c == '+' || c == '-') next = State::kNumESign;
      else if (is_digit(c)) next = State::kNumExp;
      break;
    case State::kNumESign:
    case State::kNumExp:
      if (is_digit(c)) next = State::kNumExp;
      break;
    default:
      break;
  }
  if (next != State::kError) {
    state_ = next;
    out->push_back(c);
    return Result::kMore;
  }
  // `c` does not continue the number: it ends here if it is in a final state.
  const bool final_state = state_ == State::kNumZero || state_ == State::kNumInt ||
                           state_ == State::kNumFrac || state_ == State::kNumExp;
  if (!final_state) return fail();
  if (stack_.empty()) {
    state_ = State::kDone;
    return Result::kDoneBefore;
  }
  state_ = State::kAfterValue;
  return feed(c, out);
}

JsonScanner::Result JsonScanner::feed(char c, std::string* out) {
  switch (state_) {
    case State::kDone:
    case State::kError:
      return fail();
    case State::kValue:
      if (is_ws(c)) { out->push_back(c); return Result::kMore; }
      return value_start(c, out);
    case State::kArrayFirst:
      if (is_ws(c)) { out->push_back(c); return Result::kMore; }
      if (c == ']') {
        stack_.pop_back();
        out->push_back(c);
        return value_end();
      }
      return value_start(c, out);
    case State::kObjectFirst:
    case State::kObjectKey:
      if (is_ws(c)) { out->push_back(c); return Result::kMore; }
      if (c == '}' && state_ == State::kObjectFirst) {
        stack_.pop_back();
        out->push_back(c);
        return value_end();
      }
      if (c != '"') return fail();
      state_ = State::kString;
      string_is_key_ = true;
      out->push_back(c);
      return Result::kMore;
    case State::kColon:
      if (is_ws(c)) { out->push_back(c); return Result::kMore; }
      if (c != ':') return fail();
      state_ = State::kValue;
      out->push_back(c);
      return Result::kMore;
    case State::kAfterValue:
      if (is_ws(c)) { out->push_back(c); return Result::kMore; }
      if (c == ',') {
        state_ = stack_.back() == '{' ? State::kObjectKey : State::kValue;
        out->push_back(c);
        return Result::kMore;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        stack_.pop_back();
        out->push_back(c);
        return value_end();
      }
      return fail();
    case State::kString:
      if (static_cast<unsigned char>(c) >= 0x80) {
        utf8_.feed(c, out);
        return Result::kMore;
      }
      utf8_.flush(out);  // an ASCII byte ends any multi-byte sequence
      if (c == '"') {
        out->push_back(c);
        if (string_is_key_) {
          seen_key_ = true;
          state_ = State::kColon;
          return Result::kMore;
        }
        return value_end();
      }
      if (c == '\\') {
        state_ = State::kEscape;
        out->push_back(c);
        return Result::kMore;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        // A raw control character: emit it escaped so the output stays valid JSON.
        switch (c) {
          case '\n': out->append("\\n"); break;
          case '\r': out->append("\\r"); break;
          case '\t': out->append("\\t"); break;
          default: out->append(fmt::format("\\u{:04x}", static_cast<int>(c))); break;
        }
        return Result::kMore;
      }
      out->push_back(c);
      return Result::kMore;
    case State::kEscape:
      switch (c) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          state_ = State::kString;
          break;
        case 'u':
          state_ = State::kUnicode;
          hex_left_ = 4;
          break;
        default:
          return fail();
      }
      out->push_back(c);
      return Result::kMore;
    case State::kUnicode:
      if (!is_hex(c)) return fail();
      out->push_back(c);
      if (--hex_left_ == 0) state_ = State::kString;
      return Result::kMore;
    case State::kLiteral:
      if (c != *literal_) return fail();
      out->push_back(c);
      if (*++literal_ == '\0') return value_end();
      return Result::kMore;
    default:
      return number(c, out);
  }
}

bool JsonScanner::complete_at_end() const {
  if (state_ == State::kDone) return true;
  return stack_.empty() && (state_ == State::kNumZero || state_ == State::kNumInt ||
                            state_ == State::kNumFrac || state_ == State::kNumExp);
}

}  // namespace llmserve::tool_parsers
