// GET /metrics: Prometheus text exposition format 0.0.4, vLLM metric names, label model_name.
//
// Where the numbers come from:
//   - Gauges (vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc,
//     llmserve:kv_utilization) are read from the engine's EngineStats snapshot when the page is
//     rendered.
//   - Everything else is computed by the server from the RequestOutputs it reads, using the
//     engine-side timestamps and counts each output carries (RequestOutput::timing,
//     num_prompt_tokens, num_output_tokens, num_preemptions). Each HTTP request feeds its
//     outputs, in order, through one RequestMetricsState (see InflightRequest).
//
// Per request (histograms, observed once the request finished with stop or length):
//   vllm:time_to_first_token_seconds   first_token_time - arrival_time
//   vllm:e2e_request_latency_seconds   finished_time - arrival_time
//   vllm:request_queue_time_seconds    first_scheduled_time - arrival_time
//   vllm:request_prefill_time_seconds  first_token_time - first_scheduled_time
//   vllm:request_decode_time_seconds   finished_time - first_token_time
//   vllm:time_per_output_token_seconds (e2e - ttft) / (output tokens - 1), if output tokens > 1
//   vllm:inter_token_latency_seconds   every gap between the newest-token times
//                                      (timing.last_token_time) of consecutive outputs that
//                                      brought new tokens; an output with several tokens
//                                      contributes one gap
//   vllm:request_prompt_tokens, vllm:request_generation_tokens   token counts
// (vLLM v1 calls its per-request TPOT vllm:request_time_per_output_token_seconds; the name
// here is the one the project asked for, with vLLM's ITL/TPOT buckets.)
// arrival_time is taken by the HTTP handler before parsing and tokenizing, so TTFT, queue time
// and e2e include tokenization. Inter-token gaps are kept with the request and observed when
// it finishes, so that aborted requests stay out of every histogram.
//
// Counters (advanced as outputs are read, aborted requests included):
//   vllm:prompt_tokens_total       a request's prompt length, at its first token
//   vllm:generation_tokens_total   output tokens as they arrive
//   vllm:num_preemptions_total     growth of each request's preemption count
//   vllm:request_success_total{finished_reason="stop"|"length"|"abort"}
//
// Counted by the HTTP layer, once per HTTP request that did not end normally (see
// docs/operations.md; every reason is always rendered, from 0):
//   llmserve:request_failure_total{reason="bad_request"|"unauthorized"|"too_large"|
//       "queue_full"|"ui_limit"|"draining"|"client_disconnect"|"shutdown"|"internal"}
// Aborts are also in vllm:request_success_total{finished_reason="abort"} (vLLM's convention);
// this counter says why.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request_output.h"

namespace llmserve {

/// A Prometheus histogram over fixed bucket upper bounds. Not thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending, without +Inf

  /// A histogram already holding `bucket_counts` (per bucket, not cumulative, +Inf last).
  static Histogram from_counts(std::vector<double> upper_bounds,
                               const std::vector<uint64_t>& bucket_counts, double sum,
                               uint64_t count);

  void observe(double value);
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

  /// Appends `<name>_bucket{<labels>,le="..."}` lines (cumulative, ending with le="+Inf"),
  /// `<name>_sum{<labels>}` and `<name>_count{<labels>}`. `labels` is e.g. model_name="m".
  void render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> bucket_counts_;  // [upper_bounds_.size() + 1], last is +Inf; not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Bucket upper bounds as vLLM (v1 PrometheusStatLogger) uses them.
/// Appends the structured-output metrics (structured_output/stats.h):
/// llmserve:structured_output_compile_seconds and _mask_seconds histograms and
/// llmserve:structured_output_refused_total{keyword}.
void render_structured_output(const std::string& labels, std::string* out);

/// Appends the info gauge that names this replica behind a load balancer:
///   # HELP / # TYPE llmserve:replica_info gauge
///   llmserve:replica_info{model_name="<model_name>",replica_id="<replica_id>"} 1
/// (docs/deployment.md: join it on the scrape target to tell replicas apart).
void render_replica_info(const std::string& replica_id, const std::string& model_name,
                         std::string* out);

/// vllm:time_to_first_token_seconds.
std::vector<double> ttft_buckets();
/// vllm:inter_token_latency_seconds and vllm:time_per_output_token_seconds.
std::vector<double> itl_buckets();
/// e2e latency, queue, prefill and decode time.
std::vector<double> request_latency_buckets();
inline std::vector<double> e2e_latency_buckets() { return request_latency_buckets(); }
/// Token-count histograms: 1, 2, 5, 10, 20, 50, ... up to and including `max_value` (vLLM's
/// build_1_2_5_buckets(max_model_len)).
std::vector<double> token_count_buckets(int64_t max_value);

/// Formats a sample value the way Prometheus clients do: "3.0", "0.25", "+Inf", "NaN".
std::string prometheus_number(double value);
/// Escapes a label value (backslash, double quote, newline).
std::string prometheus_label_value(const std::string& value);

/// Why an HTTP request failed (llmserve:request_failure_total{reason}).
enum class FailureReason {
  kBadRequest,        // 4xx other than the ones below (400, 404, 405, ...)
  kUnauthorized,      // 401: missing or wrong API key
  kTooLarge,          // 413: body over --max-request-body-bytes
  kQueueFull,         // 429: --max-waiting requests already waiting
  kUiLimit,           // 429: every dashboard stream (GET /ui/events) already taken
  kDraining,          // 503: arrived while the server was shutting down
  kClientDisconnect,  // aborted: the client went away before the response was complete
  kShutdown,          // aborted: still running at the shutdown deadline
  kInternal,          // 5xx other than 503
  kCount
};
/// The label value: "bad_request", "unauthorized", ...
const char* failure_reason_name(FailureReason reason);

/// What the server has seen of one request so far. Owned by whoever reads the request's
/// outputs (one thread); passed to ServerMetrics with each output.
struct RequestMetricsState {
  int32_t seen_output_tokens = 0;  // num_output_tokens of the newest output seen
  int32_t seen_preemptions = 0;
  bool prompt_counted = false;
  bool done = false;            // finished or aborted: later calls are ignored
  double last_token_time = 0;   // timing.last_token_time of the newest output with tokens
  std::vector<double> inter_token_gaps;  // observed when the request finishes normally
};

/// Server-side request metrics plus the page renderer. Thread-safe.
class ServerMetrics {
 public:
  /// `max_model_len` sets the top of the token-count histogram buckets (0: 65536).
  explicit ServerMetrics(int64_t max_model_len = 0);

  /// Feeds one output of a request, in order. Advances the counters; a finished output also
  /// records the request: aborted ones (finish_reason abort or none) only in
  /// vllm:request_success_total{finished_reason="abort"}, the others in every histogram.
  void observe_output(RequestMetricsState* state, const RequestOutput& output);
  /// The server gave up on a request (client gone, server stopping) before its last output:
  /// counts it as finished_reason "abort" (no histograms). No-op if `state` is done.
  void record_abort(RequestMetricsState* state);

  /// One HTTP request failed for `reason`.
  void record_failure(FailureReason reason);
  /// The current count for `reason` (tests, logs).
  int64_t num_failures(FailureReason reason) const;

  /// Shorthands for a request whose only output the server saw is `final_output` / none.
  void record_finished(const RequestOutput& final_output);
  void record_abort();

  /// The whole /metrics page for `stats` (engine snapshot), labelled model_name=<model_name>.
  std::string render(const EngineStats& stats, const std::string& model_name) const;

 private:
  void record_finished_locked(RequestMetricsState* state, const RequestOutput& final_output);

  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  Histogram queue_;
  Histogram prefill_;
  Histogram decode_;
  Histogram tpot_;
  Histogram prompt_tokens_;
  Histogram generation_tokens_;
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
  int64_t num_preemptions_total_ = 0;
  int64_t num_finished_stop_ = 0;
  int64_t num_finished_length_ = 0;
  int64_t num_finished_abort_ = 0;
  std::array<int64_t, static_cast<size_t>(FailureReason::kCount)> num_failures_{};
};

}  // namespace llmserve
