// PCRE2 regular expressions for pre-tokenizers (Hugging Face `Split`, GPT-2 `ByteLevel`, the
// llama.cpp per-`tokenizer.ggml.pre` lists). Patterns are compiled in UTF mode with PCRE2_UCP
// (\s, \w, \d and POSIX classes follow Unicode properties) and PCRE2_MATCH_INVALID_UTF (ill-formed
// UTF-8 in the subject never matches a character instead of being an error), JIT-compiled when
// the platform supports it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace llmserve {

/// A compiled pattern; immutable after compile(), safe to share between threads.
class Regex {
 public:
  /// One match: bytes [begin, end) of the subject.
  struct Match {
    size_t begin = 0;
    size_t end = 0;
  };

  /// Compiles `pattern` (PCRE2 syntax, which accepts the Oniguruma/Rust constructs that
  /// tokenizer.json regexes use: \p{L}, (?i:...), (?!...), {1,3}). `dollar_endonly`: `$` matches
  /// only at the very end (ECMAScript/std::regex semantics, which llama.cpp's lists assume).
  /// Errors: InvalidArgument with PCRE2's message and the offset in the pattern.
  static Expected<Regex> compile(std::string_view pattern, bool dollar_endonly = false);

  /// Every non-empty, non-overlapping match in `subject`, left to right (an empty match
  /// advances by one character). Never fails: if PCRE2 reports an error (match/heap limit),
  /// the matches found so far are returned.
  std::vector<Match> find_all(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

}  // namespace llmserve
