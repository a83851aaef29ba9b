// Structured outputs inside the engine: one grammar matcher per constrained sequence, and the
// per-row token mask applied to its logits before sampling (vLLM V1's StructuredOutputManager
// role; the grammar engine itself is src/structured_output/).
//
// Per row and per sample: every sequence (each of a request's n samples is its own engine
// request) has its own Matcher, advanced only by the tokens that sequence sampled, so a
// constrained sequence's tokens never depend on its batch neighbours (batch invariance).
// The matcher state follows the output tokens, which preemption (recompute) and prefix-cache
// hits never discard, so nothing needs replaying after either.
//
// Order in a step (EngineCore::step): raw logits -> logit_bias / allowed_token_ids (logprobs
// are taken here, vLLM's raw logprobs) -> penalties / min_tokens -> grammar mask -> sampler.
// The mask is computed on the engine thread right after the forward pass: on a CPU the forward
// pass already uses every core, so a mask thread overlapped with it would only take cycles
// from it (measured cost: docs/structured_outputs.md).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "structured_output/matcher.h"
#include "structured_output/token_mask.h"

namespace llmserve {

class Tokenizer;
struct Request;

/// One sequence's grammar state.
struct GrammarState {
  GrammarState(std::shared_ptr<const structured_output::CompiledGrammar> grammar,
               std::vector<int32_t> start_after_ids, std::vector<int32_t> open_ids = {});

  structured_output::Matcher matcher;
  /// Token ids that end a reasoning span (e.g. "</think>"): the grammar applies to what
  /// follows them. Empty: it applies from the first output token.
  std::vector<int32_t> start_after_ids;
  /// Ids that may open the reasoning span at the very start (EngineRequest's
  /// grammar_reasoning_open_ids); `undecided` until the first output token shows which.
  std::vector<int32_t> open_ids;
  bool undecided = false;
  bool active = false;  // start_after_ids seen (or empty), or the output did not open a span
  size_t start_matched = 0;  // start_after_ids' leading ids matched by the latest outputs
};

/// Masks rows and advances matchers for the engine. Owned by the engine; used from its step
/// thread only.
class StructuredOutputManager {
 public:
  explicit StructuredOutputManager(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  /// True when `req`'s next token is constrained (a grammar that is active, or undecided
  /// between it and opening a reasoning span).
  static bool constrains(const Request& req);

  /// Sets every token the grammar does not allow next to -inf in logits[vocab_size] (in
  /// place). EOS (unless ignore_eos) and stop_token_ids stay allowed only when the output so
  /// far is a complete sentence of the grammar. Returns the number of allowed tokens (0: the
  /// grammar is stuck, e.g. the vocabulary cannot spell what it needs next).
  int64_t apply_mask(Request& req, float* logits, int32_t vocab_size);

  /// Advances `req`'s grammar by the sampled `token` (no-op before the grammar is active; the
  /// token that completes start_after_ids activates it). Returns true when the grammar has
  /// ended: no further byte is allowed, so the sequence is complete and stops.
  bool accept_token(Request& req, int32_t token);

  /// The vocabulary's token bytes as the grammar sees them (built on first use: one
  /// decode_token per id).
  const structured_output::TokenVocab& vocab();

 private:
  const Tokenizer& tokenizer_;
  std::shared_ptr<const structured_output::TokenVocab> vocab_;  // built on first use
  std::unique_ptr<structured_output::TokenMasker> masker_;
  structured_output::TokenBitmask mask_;
  std::vector<std::pair<int32_t, float>> stop_scratch_;  // stop tokens' logits, kept aside
};

}  // namespace llmserve
