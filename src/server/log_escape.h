// Text from clients written into log lines and headers.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace llmserve {

/// `s` with control characters (and backslash) written as \xNN, so that a request path,
/// header or field name cannot forge log lines or send terminal escapes.
inline std::string escape_for_log(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == '\\')
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

}  // namespace llmserve
