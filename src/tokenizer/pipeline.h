// The stages of a Hugging Face tokenizers pipeline (normalizers, pre-tokenizers, per-token
// decoders), also used to express llama.cpp's GGUF byte-level pipeline (regex splits then the
// byte-to-unicode mapping). Semantics follow the tokenizers crate (tokenizers/src/normalizers,
// pre_tokenizers, decoders); each class notes where it departs.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace llmserve {

// ---- normalizers ------------------------------------------------------------------------------

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string apply(std::string text) const = 0;
};

/// NFC / NFD / NFKC / NFKD (utf8proc).
std::unique_ptr<Normalizer> make_unicode_normalizer(unicode::Form form);
/// Lowercase (per code point).
std::unique_ptr<Normalizer> make_lowercase_normalizer();
/// Prepend `prefix` to non-empty text.
std::unique_ptr<Normalizer> make_prepend_normalizer(std::string prefix);
/// Replace every literal `pattern` (or every match of `regex` when set) with `content`.
std::unique_ptr<Normalizer> make_replace_normalizer(std::string pattern, std::unique_ptr<Regex> regex,
                                                    std::string content);
/// Strip Unicode whitespace on the left and/or right.
std::unique_ptr<Normalizer> make_strip_normalizer(bool left, bool right);
std::unique_ptr<Normalizer> make_normalizer_sequence(std::vector<std::unique_ptr<Normalizer>> parts);

// ---- pre-tokenizers ---------------------------------------------------------------------------

/// tokenizers SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Splits each piece further (in place). `at_text_start`: the pieces come from the fragment
  /// that starts the input (not one after an added token); Metaspace's "first" scheme uses it.
  virtual void apply(std::vector<std::string>& pieces, bool at_text_start) const = 0;
};

/// Split on matches of `regex` (or the literal `pattern` when regex is null).
std::unique_ptr<PreTokenizer> make_split_pre_tokenizer(std::unique_ptr<Regex> regex,
                                                       std::string pattern, SplitBehavior behavior,
                                                       bool invert);
/// ByteLevel: optional prefix space, optional split with the GPT-2 regex, then every byte
/// spelled as its bytes_to_unicode character.
Expected<std::unique_ptr<PreTokenizer>> make_byte_level_pre_tokenizer(bool add_prefix_space,
                                                                      bool use_regex);
/// Digits: ASCII digits isolated one by one (individual) or as runs.
Expected<std::unique_ptr<PreTokenizer>> make_digits_pre_tokenizer(bool individual);
/// Metaspace: ' ' -> replacement, the replacement prepended per prepend_scheme ("always",
/// "first", "never") unless already there, then (split) split before each replacement.
std::unique_ptr<PreTokenizer> make_metaspace_pre_tokenizer(std::string replacement,
                                                           std::string prepend_scheme, bool split);
/// WhitespaceSplit (split on whitespace, removed) and Whitespace (\w+|[^\w\s]+).
Expected<std::unique_ptr<PreTokenizer>> make_whitespace_pre_tokenizer(bool split_only);
std::unique_ptr<PreTokenizer> make_pre_tokenizer_sequence(
    std::vector<std::unique_ptr<PreTokenizer>> parts);

/// The pieces of `text` cut by `matches` (sorted, non-overlapping) under `behavior`; empty
/// pieces are dropped.
std::vector<std::string> split_pieces(std::string_view text, const std::vector<Regex::Match>& matches,
                                      SplitBehavior behavior, bool invert);

// ---- decoders (per token) ---------------------------------------------------------------------

class Decoder {
 public:
  virtual ~Decoder() = default;
  /// Transforms one model token's string. `at_start`: nothing visible precedes it.
  virtual void apply(std::string& token, bool at_start) const = 0;
};

/// ByteLevel: characters -> bytes (a token with an unmapped character stays as it is).
std::unique_ptr<Decoder> make_byte_level_decoder();
/// Metaspace: replacement -> ' ', and the leading space of the first token dropped unless
/// prepend_scheme is "never".
std::unique_ptr<Decoder> make_metaspace_decoder(std::string replacement, bool strip_first);
/// Replace literal `pattern` with `content`.
std::unique_ptr<Decoder> make_replace_decoder(std::string pattern, std::string content);
/// ByteFallback: a "<0xNN>" token becomes that byte.
std::unique_ptr<Decoder> make_byte_fallback_decoder();
/// Strip: up to `start` leading `content` characters of the first token. (tokenizers strips
/// every token, which after Fuse is the whole text; `stop` is not supported per token.)
std::unique_ptr<Decoder> make_strip_decoder(std::string content, int start);
std::unique_ptr<Decoder> make_decoder_sequence(std::vector<std::unique_ptr<Decoder>> parts);

}  // namespace llmserve
