// GPT-2's reversible byte <-> printable-character mapping (bytes_to_unicode in OpenAI's
// encoder.py, Hugging Face's ByteLevel pre-tokenizer/decoder): the printable bytes '!'..'~',
// 0xA1..0xAC and 0xAE..0xFF stand for themselves, the other 68 bytes for U+0100.. in order.
#pragma once

#include <string>
#include <string_view>

namespace llmserve::byte_level {

/// Each byte of `bytes` spelled as its mapped character (UTF-8).
std::string encode(std::string_view bytes);

/// The inverse of encode: each character of `text` becomes its byte. Returns false (leaving
/// `out` unspecified) if some character is not in the mapping.
bool decode(std::string_view text, std::string& out);

}  // namespace llmserve::byte_level
