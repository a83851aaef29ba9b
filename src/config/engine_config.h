// Cache, scheduler and engine configuration: plain structs with validate(). CLI flags map
// one-to-one onto these fields and use vLLM's names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace llmserve {

/// Default KV cache budget when neither --kv-cache-memory nor --num-kv-blocks is given.
inline constexpr int64_t kDefaultKvCacheMemoryBytes = 2LL << 30;  // 2 GiB

struct CacheConfig {
  int32_t block_size = 16;          // tokens per KV block (--block-size)
  int64_t kv_cache_memory_bytes = 0;  // --kv-cache-memory; 0 = default budget
  int32_t num_kv_blocks = 0;        // --num-kv-blocks; overrides the memory budget when > 0
  /// --kv-cache-dtype: element type of the KV cache; nullopt ("auto") = the model's dtype
  /// after --dtype (vLLM's "auto").
  std::optional<DType> kv_cache_dtype;
  /// --enable-prefix-caching / --no-enable-prefix-caching (vLLM's flag; on by default, as in
  /// vLLM V1): full KV blocks are indexed by their token prefix and shared across requests.
  bool enable_prefix_caching = true;
  /// --kv-cache-prefault / --no-kv-cache-prefault: write the KV blocks a full batch can hold
  /// (min(pool, max_num_seqs x the blocks of one max_model_len sequence)) once at start-up,
  /// so their pages are committed before the first request instead of being faulted in
  /// under it (first touch ran at 0.6-1.3 GB/s on the 2-core VM: +5-18 % output tok/s for 32
  /// concurrent requests; docs/performance.md). llama.cpp clears its whole KV buffer at
  /// creation (src/llama-kv-cache.cpp) and vLLM zero-fills its KV tensors, so both commit it
  /// up front too. Off here (library, generate); `serve` and `bench` turn it on.
  bool kv_cache_prefault = false;

  Status validate() const;
};

/// --scheduling-policy: admission order of waiting requests.
enum class SchedulingPolicy {
  kFcfs,      // arrival order
  kPriority,  // lowest EngineRequest::priority first, ties by arrival (vLLM)
};

/// --batching: when requests may join a running batch.
enum class BatchingMode {
  kContinuous,  // iteration-level: join and leave at every step (Orca / vLLM)
  kStatic,      // a batch of up to max_num_seqs runs until all members finish
  kDynamic,     // like static, but launched when max_num_seqs wait or the oldest waited
                // max_delay_ms (Triton's dynamic batcher)
};

/// --prefill-policy, when chunked prefill is off (continuous mode).
enum class PrefillPolicy {
  kPrefillFirst,  // a step with admissible waiting prompts runs only whole prefills
  kMixed,         // whole prefills and running decodes share a step
};

struct SchedulerConfig {
  int32_t max_num_seqs = 128;              // --max-num-seqs: sequences running per step
  /// --max-num-batched-tokens: tokens per step. 512, not vLLM's GPU default of 2048: on a
  /// 2-core CPU a 512-token step of bench-250m takes ~1 s (every running decode waits that
  /// long), and with 32 queued 150-token prompts it halves TTFT p50 (4.8 vs 6.7-8.0 s) at the
  /// same throughput (docs/performance.md).
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 0;               // --max-model-len: 0 = from the model
  bool enable_chunked_prefill = true;      // split prompts longer than the leftover budget
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  BatchingMode batching = BatchingMode::kContinuous;
  double max_delay_ms = 10.0;              // --max-delay-ms (dynamic batching only)
  PrefillPolicy prefill_policy = PrefillPolicy::kPrefillFirst;
  /// Check scheduler/KV invariants after every step (tests turn this on; cheap enough).
  bool check_invariants = false;
  /// Set by the engine from the model, not a flag: the sliding window when every layer of the
  /// model slides (0 otherwise). A running sequence's blocks wholly before the window of its
  /// next query then go back to the pool (KVCacheManager::free_blocks_before).
  int32_t sliding_window = 0;
  /// Set by the engine: the model mixes full-attention and sliding-window layers (Gemma 2/3,
  /// Qwen2 with max_window_layers). sliding_window is then the sliding layers' window, and
  /// those layers keep their KV in a pool of their own with a block table per sequence
  /// (Request::sliding_block_table; vLLM's hybrid KV cache manager, one group per attention
  /// type), freed before the window; the full-attention layers keep every block.
  bool hybrid_kv = false;

  Status validate() const;
};

/// Upper bound for --threads (far above any sensible value; stops thread-creation failures).
inline constexpr int32_t kMaxThreads = 1024;

struct EngineConfig {
  std::string model_path;       // GGUF file or llama2.c .bin
  std::string tokenizer_path;   // llama2.c tokenizer.bin (required for .bin models)
  std::string served_model_name;  // --served-model-name; default: file stem
  int32_t num_threads = 0;      // --threads; 0 = physical cores
  uint64_t seed = 0;            // engine default seed for requests without one
  std::string attention_backend = "flash";  // --attention-backend: flash | naive
  /// --dtype: element type float weights are converted to at load; nullopt = "auto" (each
  /// tensor's file dtype). See ModelLoadOptions::dtype.
  std::optional<DType> dtype;
  /// --generation-config (vLLM's meaning): "auto" = the checkpoint's generation_config.json
  /// sampling defaults; "vllm" = none (the eos ids still stop generation, as in vLLM); any
  /// other value = a directory whose generation_config.json replaces the checkpoint's.
  std::string generation_config = "auto";
  /// --quantization: quantize float weight matrices at load (models/quantize_model.h: "q8_0",
  /// "q4_k_m", ...); "" = use the weights as stored.
  std::string quantization;
  CacheConfig cache;
  SchedulerConfig scheduler;

  Status validate() const;
};

}  // namespace llmserve
