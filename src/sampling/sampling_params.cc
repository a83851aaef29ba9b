#include "sampling/sampling_params.h"

#include <cmath>

namespace llmserve {

Status SamplingParams::validate(int32_t vocab_size) const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return InvalidArgument("temperature must be a finite number >= 0, got {}", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f))
    return InvalidArgument("top_p must be in (0, 1], got {}", top_p);
  if (top_k < -1)
    return InvalidArgument("top_k must be -1 or 0 (disabled) or >= 1, got {}", top_k);
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    return InvalidArgument("min_p must be in [0, 1], got {}", min_p);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return InvalidArgument("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return InvalidArgument("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f))
    return InvalidArgument("repetition_penalty must be a finite number > 0, got {}",
                           repetition_penalty);
  if (logprobs < -1 || logprobs > kMaxLogprobs)
    return InvalidArgument("logprobs must be between 0 and {} alternatives, got {}", kMaxLogprobs,
                           logprobs);
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxLogprobs)
    return InvalidArgument("prompt_logprobs must be between 0 and {} alternatives, got {}",
                           kMaxLogprobs, prompt_logprobs);
  if (max_tokens < 1) return InvalidArgument("max_tokens must be at least 1, got {}", max_tokens);
  if (min_tokens < 0) return InvalidArgument("min_tokens must be >= 0, got {}", min_tokens);
  if (min_tokens > max_tokens)
    return InvalidArgument("min_tokens ({}) must be <= max_tokens ({})", min_tokens, max_tokens);
  for (int32_t id : stop_token_ids)
    if (id < 0 || id >= vocab_size)
      return InvalidArgument("stop_token_ids: token id {} is outside the vocabulary [0, {})", id,
                             vocab_size);
  if (logit_bias.size() > kMaxLogitBiasEntries)
    return InvalidArgument("logit_bias may hold at most {} entries, got {}", kMaxLogitBiasEntries,
                           logit_bias.size());
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size)
      return InvalidArgument("logit_bias: token id {} is outside the vocabulary [0, {})", id,
                             vocab_size);
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias))
      return InvalidArgument("logit_bias: the bias of token {} must be in [-{}, {}], got {}", id,
                             kMaxLogitBias, kMaxLogitBias, bias);
  }
  for (int32_t id : allowed_token_ids)
    if (id < 0 || id >= vocab_size)
      return InvalidArgument("allowed_token_ids: token id {} is outside the vocabulary [0, {})",
                             id, vocab_size);
  for (const auto& s : stop)
    if (s.empty()) return InvalidArgument("stop: empty stop strings are not allowed");
  return Status::Ok();
}

}  // namespace llmserve
