// Request: one sequence's state inside the engine (scheduler + output processing).
// The single accounting rule: num_computed_tokens (K/V in the cache) catches up with
// num_tokens() (prompt + generated) by the num_scheduled_tokens each step grants.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "engine/structured_output_manager.h"
#include "kv_cache/block_hash.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

enum class RequestStatus { kWaiting, kRunning, kFinished };

struct Request {
  Request(int64_t id, EngineRequest req, const Tokenizer& tokenizer, uint64_t default_seed);

  int64_t request_id;
  std::vector<int32_t> token_ids;  // prompt followed by generated tokens
  int32_t num_prompt_tokens;
  int32_t num_computed_tokens = 0;
  SamplingParams params;
  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<int32_t> block_table;  // KV block ids; covers num_computed_tokens (+ scheduled)
  // Prefix caching (kv_cache/kv_cache_manager.h).
  std::string cache_salt;                // extra key of the first block's hash
  bool use_prefix_cache = true;          // look the prompt up at admission
  std::vector<BlockHash> block_hashes;   // of the full blocks of token_ids, as far as known
  int32_t num_hashed_blocks = 0;         // leading blocks of block_table indexed by hash
  /// Hybrid KV (a model with both full-attention and sliding-window layers): the sliding
  /// layers' own block table, in their own pool, with null entries before the window.
  std::vector<int32_t> sliding_block_table;
  int32_t num_hashed_sliding_blocks = 0;
  int32_t num_cached_tokens = -1;        // prefix hit at first admission (-1: not admitted)
  std::mt19937_64 rng;               // private sampling RNG (seeded per request)
  RequestTiming timing;
  int32_t num_preemptions = 0;
  int32_t priority = 0;       // lower runs first under SchedulingPolicy::kPriority
  bool batch_member = false;  // static/dynamic batching: belongs to the current batch
  /// params.prompt_logprobs >= 0: entries for prompt positions 1.. computed so far (cleared
  /// when a preempted prefill restarts); moved into the first output.
  std::vector<TokenLogprobs> prompt_logprobs;
  /// Structured outputs: this sequence's grammar state (null = unconstrained).
  std::unique_ptr<GrammarState> grammar;

  // Output processing: incremental detokenization and stop strings.
  IncrementalDetokenizer detokenizer;
  std::string output_text;       // decoded text so far (stop string excluded once found)
  size_t num_text_emitted = 0;   // bytes of output_text already sent to the client

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  bool is_finished() const { return status == RequestStatus::kFinished; }
};

}  // namespace llmserve
