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
/// measured), plus failed, total_input_tokens, total_output_tokens, peak_running, num_steps.
nlohmann::json metrics_to_json(const BenchMetrics& m);

/// The human-readable table (vLLM `bench serve` layout), ending in a newline.
std::string format_metrics_table(const BenchMetrics& m, const std::string& title);

}  // namespace llmserve::bench
