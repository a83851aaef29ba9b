// JsonScanner: an incremental, validating scanner for one JSON value (RFC 8259), fed one byte at
// a time as a model writes it. Tool-call parsers use it to find where a call's arguments end
// (a `}` inside a string is not the end) and to stream them: every byte fed comes back as the
// text to emit, so the fragments of a call join to exactly its `arguments` string.
//
// Two leniencies, so that what it emits is always valid JSON however the model wrote it: a raw
// control character inside a string (a literal newline in "line1<LF>line2") is emitted
// escaped ("\n", "\u0001"), and invalid UTF-8 inside a string is emitted as U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::tool_parsers {

/// Passes UTF-8 through byte by byte, holding a multi-byte sequence until it is whole and
/// writing U+FFFD for each broken one, so its output is valid UTF-8 for any split of the input.
class Utf8Sanitizer {
 public:
  void feed(char c, std::string* out);
  /// Ends the text: an unfinished sequence becomes U+FFFD.
  void flush(std::string* out);
  bool idle() const { return need_ == 0; }

 private:
  std::string pending_;
  int need_ = 0;
  unsigned char lo_ = 0x80, hi_ = 0xBF;
};

/// The whole of `s` through a Utf8Sanitizer.
std::string sanitize_utf8(std::string_view s);

class JsonScanner {
 public:
  enum class Result : uint8_t {
    kMore,        // byte accepted, the value is not complete yet
    kDone,        // byte accepted and it completed the value
    kDoneBefore,  // the value (a top-level number) ended before this byte; byte not consumed
    kError,       // byte cannot continue a JSON value; not consumed
  };

  /// Feeds one byte. Leading whitespace is accepted (and emitted) before the value starts.
  /// On kMore/kDone the text to emit for this byte is appended to *out (the byte itself, or an
  /// escape for a raw control character in a string).
  Result feed(char c, std::string* out);

  /// True when the input ended here and the value is complete (only a top-level number can
  /// be complete without a terminating byte; it is also true after kDone).
  bool complete_at_end() const;

  bool done() const { return state_ == State::kDone; }
  /// An object key has been read completely (somewhere in the value).
  bool seen_key() const { return seen_key_; }
  bool failed() const { return state_ == State::kError; }
  /// The first non-whitespace byte of the value, or 0 before it.
  char first_char() const { return first_; }
  void reset() { *this = JsonScanner(); }

 private:
  enum class State : uint8_t {
    kValue,       // expecting a value (whitespace allowed)
    kArrayFirst,  // after '[': a value or ']'
    kObjectFirst, // after '{': a key or '}'
    kObjectKey,   // after ',' in an object: a key
    kColon,       // after a key
    kAfterValue,  // after a value inside a container: ',' or the closer
    kString,
    kEscape,
    kUnicode,     // inside \uXXXX, hex_left_ digits to go
    kNumSign, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp,
    kLiteral,     // inside true/false/null
    kDone,
    kError,
  };

  Result value_start(char c, std::string* out);
  Result value_end();  // a scalar or container just ended
  Result number(char c, std::string* out);
  Result fail() { state_ = State::kError; return Result::kError; }

  static constexpr size_t kMaxDepth = 512;

  State state_ = State::kValue;
  std::vector<char> stack_;  // '{' or '[' per open container
  bool string_is_key_ = false;
  int hex_left_ = 0;
  const char* literal_ = nullptr;  // the rest of "true"/"false"/"null" still expected
  char first_ = 0;
  bool seen_key_ = false;
  Utf8Sanitizer utf8_;
};

}  // namespace llmserve::tool_parsers
