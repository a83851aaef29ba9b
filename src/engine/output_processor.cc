#include "engine/output_processor.h"

#include <algorithm>

namespace llmserve {
namespace {

/// Length of the longest suffix of `text` that is a proper prefix of some stop string,
/// starting at or after `emitted`. Text before `emitted` was sent because no stop string could
/// start there, and more text cannot change that, so only the unsent tail is scanned.
size_t held_back_suffix(const std::string& text, const std::vector<std::string>& stops,
                        size_t emitted) {
  size_t best = 0;
  const size_t unsent = text.size() - std::min(emitted, text.size());
  for (const std::string& s : stops) {
    if (s.empty()) continue;
    const size_t max_len = std::min(unsent, s.size() - 1);
    for (size_t len = max_len; len > best; --len)
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
  }
  return best;
}

/// Finds the earliest stop string occurrence that ends in the text added since `from`
/// (text[from..]); occurrences wholly inside text[..from] (possible while min_tokens defers
/// the check) are not matches, as in vLLM. With several stop strings the earliest start wins
/// (a stop string that is a prefix of another one wins at the same start); `*match_len` is
/// the length of the stop string found.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops, size_t from,
                 size_t* match_len) {
  size_t found = std::string::npos;
  for (const std::string& s : stops) {
    // An occurrence ending past `from` starts at from - s.size() + 1 or later.
    const size_t start = from + 1 > s.size() ? from + 1 - s.size() : 0;
    const size_t pos = text.find(s, start);
    if (pos == std::string::npos) continue;
    if (pos < found || (pos == found && s.size() < *match_len)) {
      found = pos;
      *match_len = s.size();
    }
  }
  return found;
}

}  // namespace

FinishReason append_token(Request& req, int32_t token, const Tokenizer& tokenizer,
                          int32_t max_model_len) {
  req.token_ids.push_back(token);
  const SamplingParams& p = req.params;
  // min_tokens (vLLM): EOS / stop_token_ids end a sequence once it has min_tokens outputs
  // (the sampler masks them before that), stop strings only once it has more.
  const bool token_may_stop = req.num_output_tokens() >= p.min_tokens;
  if (token_may_stop && !p.ignore_eos && token == tokenizer.eos_id()) return FinishReason::kStop;
  if (token_may_stop && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
                            p.stop_token_ids.end())
    return FinishReason::kStop;

  const size_t old_size = req.output_text.size();
  req.output_text += req.detokenizer.push(token);
  if (!p.stop.empty() && req.num_output_tokens() > p.min_tokens) {
    size_t stop_len = 0;
    const size_t pos = find_stop(req.output_text, p.stop, old_size, &stop_len);
    if (pos != std::string::npos) {
      // include_stop_str_in_output (vLLM): the matched stop string stays; text after it goes.
      req.output_text.resize(p.include_stop_str_in_output ? pos + stop_len : pos);
      // Bytes of an unfinished character after the cut are dropped with the stop text.
      (void)req.detokenizer.flush();
      req.num_text_emitted = std::min(req.num_text_emitted, pos);
      return FinishReason::kStop;
    }
  }
  if (req.num_output_tokens() >= p.max_tokens || req.num_tokens() >= max_model_len)
    return FinishReason::kLength;
  return FinishReason::kNone;
}

void take_text_delta(Request& req, bool finished, std::string& delta) {
  // At the end the detokenizer releases an unfinished character (as U+FFFD); after a stop
  // string it holds nothing (append_token emptied it), so the cut text stays cut.
  if (finished) req.output_text += req.detokenizer.flush();
  size_t end = req.output_text.size();
  if (!finished) end -= held_back_suffix(req.output_text, req.params.stop, req.num_text_emitted);
  if (end > req.num_text_emitted) {
    delta.assign(req.output_text, req.num_text_emitted, end - req.num_text_emitted);
    req.num_text_emitted = end;
  }
}

}  // namespace llmserve
