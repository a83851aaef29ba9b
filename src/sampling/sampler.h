// Token sampling from one row of logits: greedy, temperature, top-k, top-p.
#pragma once

#include <cstdint>
#include <random>

#include "sampling/sampling_params.h"

namespace llmserve {

/// Picks the next token from logits[vocab_size] (float32, unnormalised).
/// temperature == 0: argmax (lowest id on ties). Otherwise softmax(logits / T), restricted to
/// the top_k most likely tokens (if top_k >= 1) and then to the smallest prefix (by
/// descending probability) whose mass reaches top_p; one draw from `rng`.
/// Top-k/top-p select candidates with partial selection (std::nth_element / partial_sort on
/// the candidate set only), never a full sort of the vocabulary when top_k is set.
/// `scratch` is reused between calls to avoid allocation.
int32_t sample_token(const float* logits, int32_t vocab_size, const SamplingParams& params,
                     std::mt19937_64& rng, std::vector<std::pair<float, int32_t>>& scratch);

}  // namespace llmserve
