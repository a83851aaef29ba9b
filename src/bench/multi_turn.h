// Multi-turn conversations (`--multi-turn-conversations C`): C conversations of T turns run
// at once; each turn resends the whole conversation so far (every earlier turn's prompt part
// and generated reply) plus U new user tokens and generates O tokens, so with prefix caching
// a turn finds the history's full KV blocks cached and computes mostly the new part. A
// conversation's next turn is sent when its previous reply has finished (no think time).
// In process the history is token ids (the previous prompt, the generated ids, U new random
// ids); through `bench serve` it is text (the previous prompt text, the completion text, U
// new random words), which any /v1/completions server (llmserve, vLLM, llama-server)
// tokenizes itself.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/workload.h"
#include "common/status.h"

namespace llmserve::bench {

struct MultiTurnOptions {
  int32_t conversations = 1;  // C (--multi-turn-conversations)
  int32_t turns = 3;          // T (--multi-turn-turns)
  int32_t new_tokens = 64;    // U (--multi-turn-new-tokens): new user tokens (words) per turn
  int32_t output_len = 128;   // O (--output-len): tokens generated per turn
  uint64_t seed = 0;
};

/// The C x T requests: request c * T + t is conversation c's turn t (conversation = c, turn =
/// t). Turn 0 starts at t = 0 and its prompt is BOS + U random ids (in-process; a BOS-less
/// vocabulary gives U ids) or U random words (`as_text`); turn t > 0 follows turn t - 1
/// (BenchRequest::follows) and holds only its own new part: U random ids, or " " + U random
/// words. output_len = O for every turn; prompt_len is the in-process prompt length
/// (multi_turn_prompt_len), 0 for text (the server reports it). Deterministic in `seed`.
/// Errors (InvalidArgument, naming the flag): conversations outside [1, kMaxNumPrompts],
/// turns < 1, conversations x turns > kMaxNumPrompts, new_tokens < 1, output_len < 1, no
/// sampleable token ids.
Expected<std::vector<BenchRequest>> make_multi_turn_workload(const MultiTurnOptions& options,
                                                             const VocabInfo& vocab,
                                                             bool as_text);

/// The option checks of make_multi_turn_workload, for a command line to refuse bad values
/// before loading a model.
Status check_multi_turn_options(const MultiTurnOptions& options);

/// In-process prompt tokens of 0-based turn `turn`: (BOS) + (turn + 1) x U + turn x O.
int64_t multi_turn_prompt_len(const MultiTurnOptions& options, int32_t turn, bool bos);

/// `n` words drawn uniformly from a fixed list of common English words, separated by single
/// spaces (the random text of bench serve's multi-turn turns; about one token per word for
/// BPE vocabularies of natural text).
std::string random_words(int32_t n, std::mt19937_64& rng);

}  // namespace llmserve::bench
