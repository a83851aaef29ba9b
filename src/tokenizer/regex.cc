#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace llmserve {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(error, buffer, sizeof(buffer));
  return n < 0 ? "unknown PCRE2 error " + std::to_string(error)
               : std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

/// Length of the character at s[pos] (1 for a byte that starts no well-formed sequence).
size_t char_len(std::string_view s, size_t pos) {
  const utf8::Seq seq = utf8::classify(s, pos);
  return seq.kind == utf8::SeqKind::kComplete ? seq.len : 1;
}

struct MatchData {
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  pcre2_match_data* data;
};

}  // namespace

Expected<Regex> Regex::compile(std::string_view pattern, bool dollar_endonly) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (dollar_endonly) options |= PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    return InvalidArgument("bad regex at offset {}: {}", offset, pcre2_message(error));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  Regex regex;
  regex.code_ = std::move(holder);
  regex.pattern_ = std::string(pattern);
  return regex;
}

std::vector<Regex::Match> Regex::find_all(std::string_view subject) const {
  std::vector<Match> out;
  if (!code_) return out;
  MatchData md(code_->code);
  if (md.data == nullptr) return out;
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc = pcre2_match(code_->code, s, subject.size(), pos, 0, md.data, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The JIT's machine stack is small; the interpreter keeps its backtracking on the heap.
      rc = pcre2_match(code_->code, s, subject.size(), pos, PCRE2_NO_JIT, md.data, nullptr);
    }
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a limit: keep what was found
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end > begin) {
      out.push_back({begin, end});
      pos = end;
    } else {
      if (begin >= subject.size()) break;
      pos = begin + char_len(subject, begin);
    }
  }
  return out;
}

}  // namespace llmserve
