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
                           std::vector<int32_t> start_after, std::vector<int32_t> open)
    : matcher(std::move(grammar)), start_after_ids(std::move(start_after)), open_ids(std::move(open)) {
  active = start_after_ids.empty();
  undecided = !active && !open_ids.empty();
}

bool StructuredOutputManager::constrains(const Request& req) {
  return req.grammar != nullptr && (req.grammar->active || req.grammar->undecided);
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
  const int32_t eos = tokenizer_.eos_id();
  const int32_t n = std::min(vocab_size, vocab_->vocab_size());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Stop tokens are special (never in the trie): their logits are kept aside and restored
  // after the mask when the grammar may end here.
  stop_scratch_.clear();
  // Undecided: the span's opening id stays allowed beside what the grammar allows.
  if (g.undecided && g.open_ids[0] >= 0 && g.open_ids[0] < vocab_size)
    stop_scratch_.emplace_back(g.open_ids[0], logits[g.open_ids[0]]);
  if (g.matcher.can_finish()) {
    if (!p.ignore_eos && eos >= 0 && eos < vocab_size) stop_scratch_.emplace_back(eos, logits[eos]);
    for (int32_t id : p.stop_token_ids)
      if (id >= 0 && id < vocab_size) stop_scratch_.emplace_back(id, logits[id]);
  }
  // Word by word: whole words of allowed (or refused) tokens are the common case.
  int64_t allowed = 0;
  for (int32_t w = 0; w * 64 < vocab_size; ++w) {
    const int32_t begin = w * 64, end = std::min(vocab_size, begin + 64);
    const uint64_t bits = begin < n ? mask_[static_cast<size_t>(w)] : 0;
    if (bits == 0) {
      std::fill(logits + begin, logits + end, kNegInf);
      continue;
    }
    for (int32_t id = begin; id < end; ++id) {
      if (id < n && ((bits >> (id - begin)) & 1) != 0 && logits[id] != kNegInf)
        ++allowed;
      else
        logits[id] = kNegInf;
    }
  }
  for (const auto& [id, value] : stop_scratch_)
    if (logits[id] == kNegInf && value != kNegInf) {  // not already counted as a text token
      logits[id] = value;
      ++allowed;
    }
  return allowed;
}

bool StructuredOutputManager::accept_token(Request& req, int32_t token) {
  GrammarState& g = *req.grammar;
  if (g.undecided) {
    g.undecided = false;
    if (token == g.open_ids[0]) return false;  // reasoning: wait for start_after_ids
    g.active = true;                            // no span: this token is the grammar's
  }
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
