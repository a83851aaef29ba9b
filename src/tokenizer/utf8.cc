#include "tokenizer/utf8.h"

#include <cstdint>

namespace llmserve::utf8 {
namespace {

/// Expected total length of a sequence starting with `lead`, or 0 if `lead` cannot start one.
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte, C0/C1 (overlong) or F5..FF
}

/// The allowed range of the second byte: narrower than 80..BF after E0, ED, F0 and F4 (rules
/// out overlong forms, surrogates and values above U+10FFFF).
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool is_continuation(uint8_t b) { return b >= 0x80 && b <= 0xBF; }

}  // namespace

Seq classify(std::string_view s, size_t pos) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  const size_t need = sequence_length(lead);
  if (need == 0) return {SeqKind::kInvalid, 1};
  for (size_t k = 1; k < need; ++k) {
    if (pos + k >= s.size()) return {SeqKind::kIncomplete, k};
    const auto b = static_cast<uint8_t>(s[pos + k]);
    const bool ok = k == 1 ? second_byte_ok(lead, b) : is_continuation(b);
    if (!ok) return {SeqKind::kInvalid, k};
  }
  return {SeqKind::kComplete, need};
}

bool is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Seq seq = classify(s, pos);
    if (seq.kind != SeqKind::kComplete) return false;
    pos += seq.len;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Seq seq = classify(s, pos);
    if (seq.kind == SeqKind::kComplete) {
      out.append(s.substr(pos, seq.len));
    } else {
      out.append(kReplacement);
    }
    pos += seq.len;
  }
  return out;
}

}  // namespace llmserve::utf8
