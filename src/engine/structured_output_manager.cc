#include "engine/structured_output_manager.h"

#include <algorithm>
#include <limits>

#include "common/timing.h"
#include "engine/request.h"
#include "structured_output/stats.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

using structured_output::mask_test;

GrammarState::GrammarState(std::shared_ptr<const structured_output::CompiledGrammar> grammar,
                           std::vector<int32_t> start_after)
    : matcher(std::move(grammar)), start_after_ids(std::move(start_after)) {
  active = start_after_ids.empty();
}

bool StructuredOutputManager::constrains(const Request& req) {
  return req.grammar != nullptr && req.grammar->active;
}

const structured_output::TokenVocab& StructuredOutputManager::vocab() {
  if (!vocab_) {
    vocab_ = structured_output::TokenVocab::from_tokenizer(tokenizer_);
    masker_ = std::make_unique<structured_output::TokenMasker>(vocab_);
  }
  return *vocab_;
}

int64_t StructuredOutputManager::apply_mask(Request& req, float* logits, int32_t vocab_size) {
  vocab();
  GrammarState& g = *req.grammar;
  const double start = now_seconds();
  masker_->fill(g.matcher, mask_);
  structured_output::record_mask_seconds(now_seconds() - start);
  const SamplingParams& p = req.params;
  const bool may_stop = g.matcher.can_finish();
  const int32_t eos = tokenizer_.eos_id();
  const int32_t n = std::min(vocab_size, vocab_->vocab_size());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int64_t allowed = 0;
  for (int32_t id = 0; id < vocab_size; ++id) {
    bool ok = id < n && mask_test(mask_, id);
    if (!ok && may_stop)
      ok = (id == eos && !p.ignore_eos) ||
           std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) !=
               p.stop_token_ids.end();
    // A token already at -inf (allowed_token_ids, min_tokens) is not an option either.
    if (!ok || logits[id] == kNegInf)
      logits[id] = kNegInf;
    else
      ++allowed;
  }
  return allowed;
}

bool StructuredOutputManager::accept_token(Request& req, int32_t token) {
  GrammarState& g = *req.grammar;
  if (!g.active) {
    // Find the end of the reasoning span: the latest outputs equal start_after_ids.
    const std::vector<int32_t>& want = g.start_after_ids;
    if (token == want[g.start_matched]) {
      ++g.start_matched;
    } else {
      g.start_matched = token == want[0] ? 1 : 0;
    }
    if (g.start_matched == want.size()) g.active = true;
    return false;
  }
  vocab();
  // Stop tokens end the sequence without text (append_token decides); nothing to advance.
  if (token < vocab_->vocab_size() && !vocab_->bytes(token).empty())
    g.matcher.advance(vocab_->bytes(token));
  return g.matcher.is_terminated();
}

}  // namespace llmserve
