// Small Unicode helpers for the tokenizers (code point decoding, White_Space, word characters,
// normalization forms via utf8proc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmserve::unicode {

/// Decodes the character at s[pos]: its code point and byte length. An ill-formed byte gives
/// -1 with length 1.
int32_t decode(std::string_view s, size_t pos, size_t* len);

/// Code point of the last character of s[0, end) and its byte length (-1, 1 if ill-formed).
int32_t decode_last(std::string_view s, size_t end, size_t* len);

/// Unicode White_Space property (Rust char::is_whitespace, Python str.isspace minus 0x1C..0x1F).
bool is_whitespace(int32_t cp);

/// Regex `\w` of Rust's regex crate: letters, marks, decimal numbers, connector punctuation.
bool is_word_char(int32_t cp);

enum class Form { kNFC, kNFD, kNFKC, kNFKD };

/// `s` in normalization form `form`. Ill-formed UTF-8 is returned unchanged.
std::string normalize(std::string_view s, Form form);

/// Lowercase mapping per code point (utf8proc_tolower); ill-formed bytes are kept.
std::string to_lower(std::string_view s);

}  // namespace llmserve::unicode
