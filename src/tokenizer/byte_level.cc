#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

namespace llmserve::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 512> cp_to_byte;  // code points < 512 cover the whole mapping

  Tables() {
    cp_to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      cp_to_byte[cp] = static_cast<int16_t>(b);
      std::string& s = byte_to_utf8[b];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

bool decode(std::string_view text, std::string& out) {
  const Tables& t = tables();
  out.clear();
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    int cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((b0 & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
      if (cp < 0x80) return false;  // overlong
      i += 2;
    } else {
      return false;
    }
    if (cp >= 512 || t.cp_to_byte[cp] < 0) return false;
    out.push_back(static_cast<char>(t.cp_to_byte[cp]));
  }
  return true;
}

}  // namespace llmserve::byte_level
