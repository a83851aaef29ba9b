// Token sampling from one row of logits: sequence-dependent logits processors (min_tokens,
// repetition / frequency / presence penalties), then greedy or temperature, min-p, top-k, top-p.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace llmserve {

/// One sampled token's log-probability and the `top` most likely tokens' (id, logprob),
/// most likely first (lowest id on ties).
struct TokenLogprobs {
  float logprob = 0;
  /// vLLM's rank: how many tokens have a logit >= this token's (1 = the most likely).
  int32_t rank = 1;
  std::vector<std::pair<int32_t, float>> top;
};

/// log_softmax(logits)[token], its rank and the k most likely tokens'. The sampled token's
/// value is computed on its own, so it does not depend on k.
TokenLogprobs compute_logprobs(const float* logits, int32_t vocab_size, int32_t token, int32_t k,
                               std::vector<std::pair<float, int32_t>>& scratch);

/// Reusable buffers for apply_logits_processors (all-zero between calls).
struct LogitsProcessorScratch {
  std::vector<float> logits;     // the processed copy of a logits row
  std::vector<int32_t> counts;   // per token id: occurrences in the output
  std::vector<uint8_t> seen;     // per token id: in prompt or output
};

/// True when the request restricts the raw logits (logit_bias, allowed_token_ids).
bool has_logit_restrictions(const SamplingParams& params);

/// allowed_token_ids (every other id -> -inf), then logit_bias (added), on logits[vocab_size]
/// in place. Per row, so batch-invariant. The result is what logprobs are computed from.
void apply_logit_restrictions(float* logits, int32_t vocab_size, const SamplingParams& params,
                              std::vector<uint8_t>& allowed_scratch);

/// True when apply_logits_processors would change anything for a sequence that has generated
/// `num_output_tokens` tokens (callers skip the copy otherwise).
bool needs_logits_processing(const SamplingParams& params, int32_t num_output_tokens);

/// Applies, in vLLM's order, to logits[vocab_size] in place:
/// 1. min_tokens: while output.size() < min_tokens, EOS (`eos_id`, unless ignore_eos or < 0)
///    and every stop_token_id get -inf;
/// 2. repetition_penalty r over every distinct token of prompt + output: l > 0 -> l / r,
///    else l * r;
/// 3. frequency / presence over the output: l -= frequency * count + presence * (count > 0).
void apply_logits_processors(float* logits, int32_t vocab_size, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             int32_t eos_id, LogitsProcessorScratch& scratch);

/// Picks the next token from logits[vocab_size] (float32, unnormalised; already processed).
/// temperature == 0: argmax (lowest id on ties). Otherwise softmax(logits / T), restricted to
/// the tokens whose probability is >= min_p * the largest (vLLM V1 applies min_p right after
/// temperature), to the top_k most likely tokens (if top_k >= 1) and then to the smallest
/// prefix (by descending probability) of those whose renormalised mass reaches top_p; one
/// draw from `rng`.
/// Top-k/top-p select candidates with partial selection (std::nth_element / partial_sort on
/// the candidate set only), never a full sort of the vocabulary when top_k is set.
/// `scratch` is reused between calls to avoid allocation.
int32_t sample_token(const float* logits, int32_t vocab_size, const SamplingParams& params,
                     std::mt19937_64& rng, std::vector<std::pair<float, int32_t>>& scratch);

}  // namespace llmserve
