// GET /metrics: Prometheus text exposition format 0.0.4, vLLM metric names.
//
// Engine gauges and counters (running/waiting requests, KV usage, token and preemption totals)
// are read from EngineStats when the page is rendered. Per-request latency histograms
// (time to first token, end-to-end latency) are recorded by the server from the
// RequestOutput.timing of each finished request.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/request_output.h"

namespace llmserve {

/// A Prometheus histogram over fixed bucket upper bounds (seconds). Not thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending, without +Inf

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

/// Bucket bounds (seconds) as vLLM uses them.
std::vector<double> ttft_buckets();
std::vector<double> e2e_latency_buckets();

/// Formats a sample value the way Prometheus clients do: "3.0", "0.25", "+Inf", "NaN".
std::string prometheus_number(double value);
/// Escapes a label value (backslash, double quote, newline).
std::string prometheus_label_value(const std::string& value);

/// Server-side request metrics plus the page renderer. Thread-safe.
class ServerMetrics {
 public:
  ServerMetrics();

  /// Records a request's last output (final.finished must be true). Time to first token =
  /// first_token_time - arrival_time (when a token came); e2e latency = finished_time -
  /// arrival_time. Aborted requests are counted in vllm:request_success_total{finished_reason=
  /// "abort"} but kept out of the latency histograms.
  void record_finished(const RequestOutput& final_output);
  /// Counts a request the server aborted (client gone, server stopping) as finished_reason
  /// "abort"; its final output is never read.
  void record_abort();

  /// The whole /metrics page for `stats` (engine snapshot), labelled model_name=<model_name>.
  std::string render(const EngineStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram e2e_;
  int64_t num_finished_stop_ = 0;
  int64_t num_finished_length_ = 0;
  int64_t num_finished_abort_ = 0;
};

}  // namespace llmserve
