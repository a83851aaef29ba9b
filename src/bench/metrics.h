// Benchmark results in the shape of vLLM's `bench serve`: throughputs and TTFT / TPOT / ITL /
// E2E distributions computed from per-request token timestamps, plus engine-side step facts
// (KV utilisation, running sequences, preemptions) when the engine ran in-process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/server_metrics.h"
#include "engine/request_output.h"

namespace llmserve::bench {

/// What happened to one request, times in seconds on one clock (now_seconds()).
struct RequestRecord {
  int64_t id = 0;
  int32_t prompt_len = 0;         // tokens
  int32_t target_output_len = 0;  // tokens asked for
  double arrival_time = 0;        // scheduled arrival (the client's send time for bench serve)
  /// In-process: the time of each generated token (tokens of one step share a time).
  /// bench serve: the arrival time of each streamed chunk that carried text.
  /// TTFT, ITL and E2E are measured on these.
  std::vector<double> token_times;
  int32_t output_tokens = 0;      // tokens generated
  int32_t num_preemptions = 0;
  double finished_time = 0;
  bool success = false;
  std::string error;              // why it failed (bench serve)
  int32_t conversation = -1;      // multi-turn: the BenchRequest's conversation and turn
  int32_t turn = -1;
  /// Prompt tokens served from the prefix cache: in-process RequestOutput::num_cached_tokens
  /// (the hit at first admission); bench serve usage.prompt_tokens_details.cached_tokens
  /// (-1: the server did not report it).
  int32_t cached_tokens = -1;
  /// In-process: the prompt sent and the ids generated (a multi-turn conversation's history;
  /// the block map replays them, block_map.h).
  std::vector<int32_t> prompt_token_ids, output_token_ids;
  /// bench serve: the prompt text sent (when sent as text) and the text streamed back.
  std::string prompt_text, output_text;
};

/// Everything a run produced.
struct RunResult {
  std::vector<RequestRecord> requests;  // indexed by request id
  /// One per engine step, in order (in-process only; empty for bench serve).
  std::vector<StepRecord> steps;
  /// For each request, the index into `steps` of the step that finished it (-1: none).
  std::vector<int64_t> finish_step;
  double start_time = 0, end_time = 0;  // seconds: benchmark start and last completion
  bool in_process = true;               // engine-side fields are meaningful
  /// bench serve: the engine rows from the server's /metrics (absent when it could not be
  /// read; `server_metrics_note` says why).
  std::optional<ServerEngineMetrics> server_engine;
  std::string server_metrics_note;
  int32_t max_num_seqs = 0;             // engine limit (for the timeline's seat strip)
  int32_t max_num_batched_tokens = 0;   // engine limit (token-budget strip)
  int32_t block_size = 0;               // KV block size (tokens)
  int32_t max_model_len = 0;            // tokens
  int32_t num_kv_blocks = 0;            // in-process: KV pool size (blocks)
  bool prefix_caching = false;          // in-process: --enable-prefix-caching
  /// In-process: the prefix cache over the run, tokens (EngineStats::prefix_cache_queries_total
  /// / _hits_total after the run minus before it). bench serve: see server_engine.
  std::optional<int64_t> prefix_cache_queries, prefix_cache_hits;
};

/// Which limit bound a class of steps: how often the token budget was used up, how often
/// every seat (max_num_seqs) was taken, and the mean scheduled tokens / sequences per step.
struct StepLimits {
  int64_t num_steps = 0;
  double budget_bound_frac = 0;  // steps with scheduled tokens == max_num_batched_tokens
  double seqs_bound_frac = 0;    // steps with running == max_num_seqs
  double mean_tokens = 0;        // scheduled tokens per step
  double mean_running = 0;       // running sequences per step
};

/// mean / median / p99 of a sample, in milliseconds.
struct Distribution {
  double mean = 0, median = 0, p99 = 0;
};

/// Multi-turn: the successful requests of one turn index across conversations.
struct TurnMetrics {
  int32_t turn = 1;                 // 1-based, as printed
  int64_t completed = 0;
  double mean_prompt_tokens = 0;
  /// Mean RequestRecord::cached_tokens over the requests that report it (nullopt: none).
  std::optional<double> mean_cached_tokens;
  Distribution ttft_ms;
};

/// vLLM bench-serve-style summary.
struct BenchMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double duration_s = 0;
  double request_throughput = 0;      // completed requests / s
  double output_throughput = 0;       // generated tokens / s
  double total_token_throughput = 0;  // (prompt + generated tokens) / s
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  // Engine-side (bench serve: from the server's /metrics where it exports them).
  std::optional<int64_t> num_preemptions;
  std::optional<double> kv_utilization_mean;  // mean over steps with allocated blocks, 0..1
  std::optional<double> kv_utilization_peak;  // 0..1
  std::optional<int32_t> peak_running;        // sequences
  std::optional<int64_t> num_steps;
  /// Steps that computed prompt tokens vs decode-only steps (experiment: which limit binds).
  std::optional<StepLimits> prefill_steps, decode_steps;
  /// Mean over steps of tokens stored / (running x max_model_len): the utilisation a
  /// contiguous per-request reservation of max_model_len would have had (vLLM paper, s.2.3).
  std::optional<double> contiguous_utilization_mean;
  /// Prefix cache, tokens (vllm:prefix_cache_queries / _hits): in-process from EngineStats,
  /// bench serve from /metrics deltas (nullopt: the server exports no such counters).
  std::optional<int64_t> prefix_cache_queries, prefix_cache_hits;
  /// hits / queries (0 when nothing was looked up, e.g. --no-enable-prefix-caching).
  std::optional<double> prefix_cache_hit_rate;
  /// Sum of RequestRecord::cached_tokens over successful requests that report it (nullopt:
  /// none did, e.g. a server without usage.prompt_tokens_details).
  std::optional<int64_t> cached_prompt_tokens;
  /// Most cached (evictable) KV blocks seen: per step in-process, per scrape of
  /// llmserve:kv_blocks_cached through bench serve.
  std::optional<int32_t> peak_cached_blocks;
  /// Multi-turn runs: one entry per turn index, in order (empty otherwise).
  std::vector<TurnMetrics> turns;
};

/// Mean of `xs` (0 for an empty sample).
double mean(const std::vector<double>& xs);
/// Percentile `q` in [0, 100] with linear interpolation between closest ranks (NumPy's
/// default): rank = q/100 * (n-1). 0 for an empty sample.
double percentile(std::vector<double> xs, double q);
/// mean, median (p50) and p99 of `xs` (any unit; the result has the same unit).
Distribution summarize(const std::vector<double>& xs);

/// Time to first token of a request (seconds), from arrival.
double ttft_s(const RequestRecord& r);
/// End-to-end latency (seconds), arrival to last token.
double e2e_s(const RequestRecord& r);
/// Gaps between consecutive token_times (seconds).
std::vector<double> inter_token_gaps_s(const RequestRecord& r);

/// The summary of a run. Only successful requests count toward latencies and throughputs.
/// TPOT = (e2e - ttft) / (output_tokens - 1) over requests with more than one token.
BenchMetrics compute_metrics(const RunResult& run);

/// The JSON object of `bench --json`: completed, duration_s, request_throughput,
/// output_throughput, total_token_throughput, ttft_ms / tpot_ms / itl_ms / e2e_ms ({mean,
/// median, p99}), num_preemptions, kv_utilization_mean, kv_utilization_peak (null when not
/// measured), plus failed, total_input_tokens, total_output_tokens, peak_running, num_steps,
/// prefix_cache_queries, prefix_cache_hits, prefix_cache_hit_rate, cached_prompt_tokens,
/// peak_cached_blocks (null when not measured) and turns (multi-turn: a list of {turn,
/// completed, mean_prompt_tokens, mean_cached_tokens, ttft_ms}; null otherwise).
nlohmann::json metrics_to_json(const BenchMetrics& m);

/// The human-readable table (vLLM `bench serve` layout), ending in a newline.
std::string format_metrics_table(const BenchMetrics& m, const std::string& title);

}  // namespace llmserve::bench
