// Logits of every position of one token sequence, computed through the same runner, paged KV
// cache and attention backend the engine uses, in chunks (chunked prefill).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "models/model_file.h"

namespace llmserve {

struct PromptLogitsOptions {
  std::string attention_backend = "flash";
  std::optional<DType> dtype;           // --dtype: weights converted at load; nullopt = file's
  std::optional<DType> kv_cache_dtype;  // nullopt = the model's default (after `dtype`)
  int32_t chunk_size = 2048;  // tokens per forward pass
  int32_t block_size = 16;
  int32_t num_threads = 1;
  /// The context served (0 = max_position_embeddings): LongRoPE's long / short choice.
  int32_t max_model_len = 0;
};

/// Returns float32 logits [token_ids.size(), vocab_size], row-major. Errors: unknown backend,
/// token id out of range, empty input (InvalidArgument), model construction errors.
Expected<std::vector<float>> compute_prompt_logits(const ModelFile& file,
                                                   const std::vector<int32_t>& token_ids,
                                                   const PromptLogitsOptions& options);

}  // namespace llmserve
