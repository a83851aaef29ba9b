// What goes into and out of the engine: plain data, no strings but the text deltas.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace llmserve {
namespace structured_output {
class CompiledGrammar;
}

/// kToolCalls is never produced by the engine: the server reports a stop whose output parsed
/// into tool calls as "tool_calls" (OpenAI's finish_reason).
enum class FinishReason { kNone, kStop, kLength, kAbort, kToolCalls };

/// "stop", "length", "abort", "tool_calls" (OpenAI finish_reason spelling), "" for kNone.
const char* finish_reason_name(FinishReason r);

/// A tokenized request as submitted to the engine.
struct EngineRequest {
  std::vector<int32_t> prompt_token_ids;  // BOS already included if wanted
  SamplingParams params;
  double arrival_time = 0;  // seconds, now_seconds() when the HTTP/CLI request arrived
  /// --scheduling-policy priority: lower runs first, ties by arrival (vLLM semantics).
  int32_t priority = 0;
  /// vLLM's cache_salt: mixed into the hash of the request's first KV block, so requests
  /// with different salts never share a cached block (tenant isolation; "" = none).
  std::string cache_salt;
  /// False: this request computes its whole prompt (no prefix-cache lookup; llama.cpp's
  /// cache_prompt). Its blocks are still indexed for later requests.
  bool use_prefix_cache = true;
  /// Structured outputs: the grammar the output must follow (structured_output/constraint.h
  /// compiles it), or null. Each sample of an n > 1 request gets its own matcher.
  std::shared_ptr<const structured_output::CompiledGrammar> grammar;
  /// With `grammar`: the token ids that end a reasoning span ("</think>"); the grammar
  /// constrains only what follows them. Empty = from the first output token.
  std::vector<int32_t> grammar_start_after_ids;
  /// With grammar_start_after_ids: the ids that open a reasoning span ("<think>") when the
  /// model may or may not reason (qwen3's rule). Then the first output token is either the
  /// first of these (the grammar waits for the span's end) or one the grammar allows (it
  /// applies from there). Empty: the output starts inside the span.
  std::vector<int32_t> grammar_reasoning_open_ids;
  /// The API's id of the request (e.g. "chatcmpl-…"), shown by the dashboard (GET /ui); the
  /// engine does not read it.
  std::string external_id;
};

/// Per-request timing, seconds on the now_seconds() clock (0 = not yet).
struct RequestTiming {
  double arrival_time = 0;
  double first_scheduled_time = 0;
  double first_token_time = 0;
  double last_token_time = 0;
  double finished_time = 0;
};

/// One step's news for one request. new_text is complete UTF-8 (held back until a partial
/// character or a possible stop-string prefix resolves); the concatenation of all new_text
/// of a request is its final output text.
struct RequestOutput {
  int64_t request_id = 0;
  std::vector<int32_t> new_token_ids;
  /// One per new_token_ids entry when the request asked for logprobs (params.logprobs >= 0).
  std::vector<TokenLogprobs> logprobs;
  /// params.prompt_logprobs >= 0, first output only: one entry per prompt token from the
  /// second on (entry i-1 = prompt token i given the tokens before it; the first prompt token
  /// has none).
  std::vector<TokenLogprobs> prompt_logprobs;
  std::string new_text;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_prompt_tokens = 0;
  /// Prompt tokens whose K/V came from the prefix cache when the request was first scheduled
  /// (OpenAI's usage.prompt_tokens_details.cached_tokens).
  int32_t num_cached_tokens = 0;
  int32_t num_output_tokens = 0;  // total so far
  int32_t num_preemptions = 0;
  RequestTiming timing;
};

/// What one engine step did (for the bench timeline and per-step metrics).
struct StepRecord {
  struct Entry {
    int64_t request_id = 0;
    int32_t num_scheduled_tokens = 0;
    bool is_prefill = false;  // tokens of the known sequence being (re)computed, not a decode
  };
  int64_t step_idx = 0;
  double start_time = 0, end_time = 0;  // seconds (now_seconds clock)
  std::vector<Entry> scheduled;         // in schedule order
  std::vector<int64_t> preempted;       // requests preempted while planning this step
  std::vector<int64_t> waiting;         // requests left waiting after planning
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_used_blocks = 0;
  int32_t num_cached_blocks = 0;  // evictable blocks holding cached K/V after planning
  /// Prompt tokens found in the prefix cache by the requests admitted this step.
  int32_t num_prefix_hit_tokens = 0;
  /// Tokens stored / token slots in allocated blocks, after this step (1 = no waste).
  double kv_utilization = 0;
};

/// Engine-wide gauges for /metrics and logs.
struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_total_blocks = 0;
  int32_t num_free_blocks = 0;
  /// Hybrid KV (SchedulerConfig::hybrid_kv): the sliding-window layers' own pool; 0 otherwise.
  /// The fields above and below count the full-attention layers' pool.
  int32_t num_sliding_total_blocks = 0;
  int32_t num_sliding_free_blocks = 0;
  /// Fraction of KV blocks in use (vllm:kv_cache_usage_perc, 0..1).
  double kv_cache_usage = 0;
  /// Tokens stored / token slots in allocated blocks (internal fragmentation measure).
  double kv_utilization = 0;
  int64_t num_preemptions_total = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t num_requests_finished = 0;
  int64_t num_steps = 0;
  /// Tokens computed by engine steps, split into prompt (prefill / recompute) and decode.
  int64_t scheduled_prefill_tokens_total = 0;
  int64_t scheduled_decode_tokens_total = 0;
  /// Prefix caching (vllm:prefix_cache_queries / _hits, tokens): tokens of the sequences
  /// looked up at admission, and those found cached.
  int64_t prefix_cache_queries_total = 0;
  int64_t prefix_cache_hits_total = 0;
  /// Cached (evictable) blocks: counted in num_free_blocks, holding reusable K/V.
  int32_t num_cached_blocks = 0;
};

}  // namespace llmserve
