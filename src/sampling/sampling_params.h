// Per-request sampling parameters (OpenAI / vLLM semantics).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace llmserve {

struct SamplingParams {
  /// 0 = greedy (argmax). Otherwise logits are divided by temperature before softmax.
  float temperature = 1.0f;
  /// Keep only the k most likely tokens; -1 (vLLM's spelling) or 0 disables.
  int32_t top_k = -1;
  /// Nucleus sampling: keep the smallest set of most likely tokens whose probability mass
  /// reaches top_p; 1 disables. Must be in (0, 1].
  float top_p = 1.0f;
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

  /// Checks ranges; the message names the parameter and the value (for HTTP 400 bodies).
  /// vocab_size bounds stop_token_ids.
  Status validate(int32_t vocab_size) const;
};

}  // namespace llmserve
