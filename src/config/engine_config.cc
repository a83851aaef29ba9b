#include "config/engine_config.h"

namespace llmserve {

Status CacheConfig::validate() const {
  if (block_size < 1 || block_size > 1024)
    return InvalidArgument("--block-size must be in [1, 1024], got {}", block_size);
  if (kv_cache_memory_bytes < 0)
    return InvalidArgument("--kv-cache-memory must be >= 0 bytes, got {}", kv_cache_memory_bytes);
  if (num_kv_blocks < 0)
    return InvalidArgument("--num-kv-blocks must be >= 0, got {}", num_kv_blocks);
  if (block_size > 0 && int64_t{num_kv_blocks} * block_size > (int64_t{1} << 31))
    return InvalidArgument("--num-kv-blocks {} x --block-size {} exceeds 2^31 token slots",
                           num_kv_blocks, block_size);
  return Status::Ok();
}

Status SchedulerConfig::validate() const {
  if (max_num_seqs < 1) return InvalidArgument("--max-num-seqs must be >= 1, got {}", max_num_seqs);
  if (max_num_batched_tokens < 1)
    return InvalidArgument("--max-num-batched-tokens must be >= 1, got {}",
                           max_num_batched_tokens);
  if (!(max_delay_ms >= 0) || max_delay_ms > 3.6e6)
    return InvalidArgument("--max-delay-ms must be in [0, 3600000], got {}", max_delay_ms);
  if (max_model_len < 0)
    return InvalidArgument("--max-model-len must be >= 1, got {}", max_model_len);
  if (!enable_chunked_prefill && max_model_len > max_num_batched_tokens)
    return InvalidArgument(
        "--max-num-batched-tokens ({}) is smaller than --max-model-len ({}) with chunked "
        "prefill disabled: long prompts could never be scheduled",
        max_num_batched_tokens, max_model_len);
  return Status::Ok();
}

Status EngineConfig::validate() const {
  if (model_path.empty()) return InvalidArgument("no model path given");
  if (num_threads < 0 || num_threads > kMaxThreads)
    return InvalidArgument("--threads must be in [0, {}], got {}", kMaxThreads, num_threads);
  LLMS_RETURN_IF_ERROR(cache.validate());
  return scheduler.validate();
}

}  // namespace llmserve
