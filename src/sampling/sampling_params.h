// Per-request sampling parameters (OpenAI / vLLM semantics).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace llmserve {

/// Most alternatives a request may ask for (OpenAI's top_logprobs limit, vLLM's default).
inline constexpr int32_t kMaxLogprobs = 20;
/// OpenAI's logit_bias limits: at most 300 entries, each bias in [-100, 100].
inline constexpr size_t kMaxLogitBiasEntries = 300;
inline constexpr float kMaxLogitBias = 100.0f;

struct SamplingParams {
  /// 0 = greedy (argmax). Otherwise logits are divided by temperature before softmax.
  float temperature = 1.0f;
  /// Keep only the k most likely tokens; -1 (vLLM's spelling) or 0 disables.
  int32_t top_k = -1;
  /// Nucleus sampling: keep the smallest set of most likely tokens whose probability mass
  /// reaches top_p; 1 disables. Must be in (0, 1].
  float top_p = 1.0f;
  /// vLLM's min_p: after temperature, drop tokens whose probability is below
  /// min_p * (probability of the most likely token). 0 disables; must be in [0, 1].
  float min_p = 0.0f;
  /// OpenAI penalties over the tokens generated so far (not the prompt): the logit of token t
  /// becomes l - frequency_penalty * count(t) - presence_penalty * (count(t) > 0).
  /// Each in [-2, 2]; 0 disables.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  /// HF/vLLM repetition penalty over prompt + generated tokens: a seen token's logit l becomes
  /// l / repetition_penalty if l > 0, else l * repetition_penalty. Must be > 0; 1 disables.
  float repetition_penalty = 1.0f;
  /// EOS (unless ignore_eos) and stop_token_ids are masked, and stop strings are not checked,
  /// until this many tokens have been generated. 0 <= min_tokens <= max_tokens.
  int32_t min_tokens = 0;
  /// Log-probabilities: -1 = none; k >= 0 = the sampled token's logprob plus the k most likely
  /// tokens' (0..kMaxLogprobs), from the log-softmax of the raw logits (before penalties and
  /// temperature; vLLM's default "raw_logprobs").
  int32_t logprobs = -1;
  /// Prompt log-probabilities (vLLM's prompt_logprobs): -1 = none; k >= 0 = for every prompt
  /// position i >= 1, the logprob of prompt token i given tokens 0..i-1 plus the k most likely
  /// tokens there (raw log-softmax, like logprobs). Delivered once, with the first output.
  /// Computing them keeps the logits of every prompt position (one lm_head row per token).
  int32_t prompt_logprobs = -1;
  /// Seed for this request's private RNG: the same seed and request give the same tokens
  /// whatever else is batched. Absent: seeded from the engine seed and the request id.
  std::optional<uint64_t> seed;
  /// Maximum generated tokens (>= 1). The engine rejects prompt + max_tokens > max_model_len.
  int32_t max_tokens = 16;
  /// Generation stops when the text ends with any of these; the stop text is not returned.
  std::vector<std::string> stop;
  /// Token ids that end generation (in addition to EOS unless ignore_eos). They are returned.
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  /// Leave special tokens (BOS/EOS, <|im_end|>, ...) out of the output text (vLLM's
  /// skip_special_tokens, default true). Token ids are returned either way.
  bool skip_special_tokens = true;
  /// vLLM's include_stop_str_in_output: a matched stop string stays at the end of the text.
  bool include_stop_str_in_output = false;
  /// OpenAI's logit_bias: (token id, bias) pairs, ids distinct and in the vocabulary, biases
  /// in [-kMaxLogitBias, kMaxLogitBias], at most kMaxLogitBiasEntries. Added to the raw logits
  /// before anything else, so logprobs reflect it (as OpenAI's do); -100 in practice bans a
  /// token and +100 forces it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  /// vLLM's allowed_token_ids: when non-empty, every other token's logit is -inf (applied
  /// before logit_bias; logprobs reflect it too). Ids in the vocabulary.
  std::vector<int32_t> allowed_token_ids;

  /// Checks ranges; the message names the parameter and the value (for HTTP 400 bodies).
  /// vocab_size bounds stop_token_ids.
  Status validate(int32_t vocab_size) const;
};

}  // namespace llmserve
