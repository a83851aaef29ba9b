#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8.h"

namespace llmserve {
namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

/// transformers' PreTrainedTokenizerBase.clean_up_tokenization (same order of replacements).
void clean_up_tokenization(std::string& s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},    {" ?", "?"},    {" !", "!"},      {" ,", ","},    {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"},    {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all(s, from, to);
}

}  // namespace

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t id : ids) {
    out += decode_token(prev, id);
    prev = id;
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const {
  std::string raw;
  int32_t prev = -1;
  for (int32_t id : ids) {
    raw += decode_token(prev, id, options.skip_special_tokens);
    prev = id;
  }
  std::string out = utf8::sanitize(raw);
  if (options.clean_up_tokenization_spaces.value_or(clean_up_tokenization_spaces())) {
    clean_up_tokenization(out);
  }
  return out;
}

}  // namespace llmserve
