// UTF-8 helpers shared by the SentencePiece encoder and the incremental detokenizer.
// Follows the Unicode well-formedness table (Unicode 15, table 3-7) and the "maximal subpart"
// policy for replacing ill-formed input with U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace llmserve::utf8 {

/// U+FFFD REPLACEMENT CHARACTER, UTF-8 encoded.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

enum class SeqKind {
  kComplete,    // a well-formed scalar value of `len` bytes
  kIncomplete,  // a well-formed prefix that runs to the end of the input (len = bytes left)
  kInvalid,     // ill-formed; `len` = its maximal subpart (>= 1 byte), to be replaced by U+FFFD
};

struct Seq {
  SeqKind kind;
  size_t len;
};

/// Classifies the sequence starting at s[pos] (pos < s.size()).
Seq classify(std::string_view s, size_t pos);

/// True when `s` is entirely well-formed UTF-8.
bool is_valid(std::string_view s);

/// Copies `s`, replacing each maximal ill-formed subpart (and a truncated final sequence)
/// with U+FFFD.
std::string sanitize(std::string_view s);

}  // namespace llmserve::utf8
