#include "tokenizer/unicode.h"

#include <cstdlib>

#include <utf8proc.h>

#include "tokenizer/utf8.h"

namespace llmserve::unicode {

int32_t decode(std::string_view s, size_t pos, size_t* len) {
  const utf8::Seq seq = utf8::classify(s, pos);
  if (seq.kind != utf8::SeqKind::kComplete) {
    *len = 1;
    return -1;
  }
  *len = seq.len;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data() + pos);
  switch (seq.len) {
    case 1: return p[0];
    case 2: return ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3: return ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    default:
      return ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
}

int32_t decode_last(std::string_view s, size_t end, size_t* len) {
  size_t start = end;
  // Back up over at most 3 continuation bytes to a lead byte.
  while (start > 0 && end - start < 4) {
    --start;
    if ((static_cast<uint8_t>(s[start]) & 0xC0) != 0x80) break;
  }
  size_t n = 0;
  const int32_t cp = decode(s.substr(0, end), start, &n);
  if (cp >= 0 && start + n == end) {
    *len = n;
    return cp;
  }
  *len = 1;
  return -1;
}

bool is_whitespace(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_word_char(int32_t cp) {
  if (cp < 0) return false;
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return cp == 0x200C || cp == 0x200D;  // Join_Control
  }
}

std::string normalize(std::string_view s, Form form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Form::kNFC: options |= UTF8PROC_COMPOSE; break;
    case Form::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case Form::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Form::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    // Ill-formed input: normalize the well-formed runs, keep the rest byte for byte.
    std::string result;
    size_t run = 0;
    for (size_t pos = 0; pos < s.size();) {
      const utf8::Seq seq = utf8::classify(s, pos);
      if (seq.kind == utf8::SeqKind::kComplete) {
        pos += seq.len;
        continue;
      }
      if (pos > run) result += normalize(s.substr(run, pos - run), form);
      result.append(s.substr(pos, seq.len));
      pos += seq.len;
      run = pos;
    }
    if (run < s.size()) result += normalize(s.substr(run), form);
    return result;
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    const int32_t cp = decode(s, pos, &len);
    if (cp < 0) {
      out.push_back(s[pos]);
    } else {
      utf8proc_uint8_t buf[4];
      const utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_tolower(cp), buf);
      out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
    }
    pos += len;
  }
  return out;
}

}  // namespace llmserve::unicode
