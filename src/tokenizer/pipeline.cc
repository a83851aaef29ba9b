#include "tokenizer/pipeline.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/vocab.h"

namespace llmserve {
namespace {

/// GPT-2's pre-tokenizer regex (tokenizers ByteLevel, OpenAI encoder.py).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::vector<Regex::Match> find_literal(std::string_view text, std::string_view pattern) {
  std::vector<Regex::Match> out;
  if (pattern.empty()) return out;
  for (size_t pos = 0; (pos = text.find(pattern, pos)) != std::string_view::npos;
       pos += pattern.size()) {
    out.push_back({pos, pos + pattern.size()});
  }
  return out;
}

std::string replace_matches(std::string_view text, const std::vector<Regex::Match>& matches,
                            std::string_view content) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (const Regex::Match& m : matches) {
    out.append(text.substr(pos, m.begin - pos));
    out.append(content);
    pos = m.end;
  }
  out.append(text.substr(pos));
  return out;
}

// ---- normalizers ----

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::Form form) : form_(form) {}
  std::string apply(std::string text) const override { return unicode::normalize(text, form_); }

 private:
  unicode::Form form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string apply(std::string text) const override { return unicode::to_lower(text); }
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string apply(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string pattern, std::unique_ptr<Regex> regex, std::string content)
      : pattern_(std::move(pattern)), regex_(std::move(regex)), content_(std::move(content)) {}
  std::string apply(std::string text) const override {
    return replace_matches(text, regex_ ? regex_->find_all(text) : find_literal(text, pattern_),
                           content_);
  }

 private:
  std::string pattern_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string apply(std::string text) const override {
    size_t begin = 0;
    size_t end = text.size();
    size_t len = 0;
    while (left_ && begin < end && unicode::is_whitespace(unicode::decode(text, begin, &len))) {
      begin += len;
    }
    while (right_ && end > begin && unicode::is_whitespace(unicode::decode_last(text, end, &len))) {
      end -= len;
    }
    return text.substr(begin, end - begin);
  }

 private:
  bool left_;
  bool right_;
};

class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string apply(std::string text) const override {
    for (const auto& p : parts_) text = p->apply(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// ---- pre-tokenizers ----

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, std::string pattern, SplitBehavior behavior,
                    bool invert)
      : regex_(std::move(regex)), pattern_(std::move(pattern)), behavior_(behavior),
        invert_(invert) {}

  void apply(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size() * 2);
    for (const std::string& piece : pieces) {
      const auto matches = regex_ ? regex_->find_all(piece) : find_literal(piece, pattern_);
      for (std::string& p : split_pieces(piece, matches, behavior_, invert_)) {
        out.push_back(std::move(p));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}

  void apply(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (std::string& piece : pieces) {
      if (add_prefix_space_ && (piece.empty() || piece[0] != ' ')) piece.insert(0, 1, ' ');
      if (regex_) {
        for (const std::string& p :
             split_pieces(piece, regex_->find_all(piece), SplitBehavior::kIsolated, false)) {
          out.push_back(byte_level::encode(p));
        }
      } else if (!piece.empty()) {
        out.push_back(byte_level::encode(piece));
      }
    }
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, std::string scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(std::move(scheme)), split_(split) {}

  void apply(std::vector<std::string>& pieces, bool at_text_start) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string piece = replace_matches(pieces[i], find_literal(pieces[i], " "), replacement_);
      const bool prepend = scheme_ == "always" || (scheme_ == "first" && at_text_start && i == 0);
      if (prepend && piece.compare(0, replacement_.size(), replacement_) != 0) {
        piece.insert(0, replacement_);
      }
      if (split_) {
        for (std::string& p : split_pieces(piece, find_literal(piece, replacement_),
                                           SplitBehavior::kMergedWithNext, false)) {
          out.push_back(std::move(p));
        }
      } else if (!piece.empty()) {
        out.push_back(std::move(piece));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  std::string scheme_;
  bool split_;
};

class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void apply(std::vector<std::string>& pieces, bool at_text_start) const override {
    for (const auto& p : parts_) p->apply(pieces, at_text_start);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// ---- decoders ----

class ByteLevelDecoder final : public Decoder {
 public:
  void apply(std::string& token, bool) const override {
    std::string bytes;
    if (byte_level::decode(token, bytes)) token = std::move(bytes);
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void apply(std::string& token, bool at_start) const override {
    // tokenizers drops every replacement character of the first token (not only the leading
    // one) when a prefix was prepended.
    const std::string_view with = at_start && strip_first_ ? "" : " ";
    token = replace_matches(token, find_literal(token, replacement_), with);
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::string& token, bool) const override {
    token = replace_matches(token, find_literal(token, pattern_), content_);
  }

 private:
  std::string pattern_;
  std::string content_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void apply(std::string& token, bool) const override {
    const int byte = parse_byte_piece(token);
    if (byte >= 0) token.assign(1, static_cast<char>(byte));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, int start) : content_(std::move(content)), start_(start) {}
  void apply(std::string& token, bool at_start) const override {
    if (!at_start || content_.empty()) return;
    for (int i = 0; i < start_ && token.compare(0, content_.size(), content_) == 0; ++i) {
      token.erase(0, content_.size());
    }
  }

 private:
  std::string content_;
  int start_;
};

class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void apply(std::string& token, bool at_start) const override {
    for (const auto& p : parts_) p->apply(token, at_start);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::vector<std::string> split_pieces(std::string_view text, const std::vector<Regex::Match>& matches,
                                      SplitBehavior behavior, bool invert) {
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Part> parts;
  size_t pos = 0;
  for (const Regex::Match& m : matches) {
    if (m.begin > pos) parts.push_back({pos, m.begin, invert});
    parts.push_back({m.begin, m.end, !invert});
    pos = m.end;
  }
  if (pos < text.size()) parts.push_back({pos, text.size(), invert});

  std::vector<Part> merged;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Part& p : parts)
        if (!p.is_match) merged.push_back(p);
      break;
    case SplitBehavior::kIsolated:
      merged = parts;
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_match = false;
      for (size_t i = parts.size(); i-- > 0;) {
        const Part& p = parts[i];
        if (p.is_match && !next_match && !merged.empty()) {
          merged.back().begin = p.begin;
        } else {
          merged.push_back(p);
        }
        next_match = p.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const Part& p : merged) {
    if (p.end > p.begin) out.emplace_back(text.substr(p.begin, p.end - p.begin));
  }
  return out;
}

std::unique_ptr<Normalizer> make_unicode_normalizer(unicode::Form form) {
  return std::make_unique<UnicodeNormalizer>(form);
}
std::unique_ptr<Normalizer> make_lowercase_normalizer() {
  return std::make_unique<LowercaseNormalizer>();
}
std::unique_ptr<Normalizer> make_prepend_normalizer(std::string prefix) {
  return std::make_unique<PrependNormalizer>(std::move(prefix));
}
std::unique_ptr<Normalizer> make_replace_normalizer(std::string pattern, std::unique_ptr<Regex> regex,
                                                    std::string content) {
  return std::make_unique<ReplaceNormalizer>(std::move(pattern), std::move(regex),
                                             std::move(content));
}
std::unique_ptr<Normalizer> make_strip_normalizer(bool left, bool right) {
  return std::make_unique<StripNormalizer>(left, right);
}
std::unique_ptr<Normalizer> make_normalizer_sequence(std::vector<std::unique_ptr<Normalizer>> parts) {
  return std::make_unique<NormalizerSequence>(std::move(parts));
}

std::unique_ptr<PreTokenizer> make_split_pre_tokenizer(std::unique_ptr<Regex> regex,
                                                       std::string pattern, SplitBehavior behavior,
                                                       bool invert) {
  return std::make_unique<SplitPreTokenizer>(std::move(regex), std::move(pattern), behavior,
                                             invert);
}

Expected<std::unique_ptr<PreTokenizer>> make_byte_level_pre_tokenizer(bool add_prefix_space,
                                                                      bool use_regex) {
  std::unique_ptr<Regex> regex;
  if (use_regex) {
    LLMS_ASSIGN_OR_RETURN(Regex r, Regex::compile(kGpt2Regex));
    regex = std::make_unique<Regex>(std::move(r));
  }
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, std::move(regex)));
}

Expected<std::unique_ptr<PreTokenizer>> make_digits_pre_tokenizer(bool individual) {
  LLMS_ASSIGN_OR_RETURN(Regex r, Regex::compile("[0-9]"));
  return make_split_pre_tokenizer(std::make_unique<Regex>(std::move(r)), "",
                                  individual ? SplitBehavior::kIsolated
                                             : SplitBehavior::kContiguous,
                                  false);
}

std::unique_ptr<PreTokenizer> make_metaspace_pre_tokenizer(std::string replacement,
                                                           std::string prepend_scheme, bool split) {
  return std::make_unique<MetaspacePreTokenizer>(std::move(replacement), std::move(prepend_scheme),
                                                 split);
}

Expected<std::unique_ptr<PreTokenizer>> make_whitespace_pre_tokenizer(bool split_only) {
  if (split_only) {
    LLMS_ASSIGN_OR_RETURN(Regex r, Regex::compile(R"(\s+)"));
    return make_split_pre_tokenizer(std::make_unique<Regex>(std::move(r)), "",
                                    SplitBehavior::kRemoved, false);
  }
  LLMS_ASSIGN_OR_RETURN(Regex r, Regex::compile(R"(\w+|[^\w\s]+)"));
  return make_split_pre_tokenizer(std::make_unique<Regex>(std::move(r)), "",
                                  SplitBehavior::kRemoved, true);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer_sequence(
    std::vector<std::unique_ptr<PreTokenizer>> parts) {
  return std::make_unique<PreTokenizerSequence>(std::move(parts));
}

std::unique_ptr<Decoder> make_byte_level_decoder() { return std::make_unique<ByteLevelDecoder>(); }
std::unique_ptr<Decoder> make_metaspace_decoder(std::string replacement, bool strip_first) {
  return std::make_unique<MetaspaceDecoder>(std::move(replacement), strip_first);
}
std::unique_ptr<Decoder> make_replace_decoder(std::string pattern, std::string content) {
  return std::make_unique<ReplaceDecoder>(std::move(pattern), std::move(content));
}
std::unique_ptr<Decoder> make_byte_fallback_decoder() {
  return std::make_unique<ByteFallbackDecoder>();
}
std::unique_ptr<Decoder> make_strip_decoder(std::string content, int start) {
  return std::make_unique<StripDecoder>(std::move(content), start);
}
std::unique_ptr<Decoder> make_decoder_sequence(std::vector<std::unique_ptr<Decoder>> parts) {
  return std::make_unique<DecoderSequence>(std::move(parts));
}

}  // namespace llmserve
