// `bench serve`'s engine figures from the server's GET /metrics (Prometheus text format 0.0.4,
// vLLM metric names): the rows the in-process bench reads from the engine's step records
// (preemptions, steps, running sequences, KV utilisation, prefix cache), as before/after deltas
// of counters and samples of gauges taken while the run goes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::bench {

/// The samples of a Prometheus text page by metric name (labels dropped), summed over the
/// series whose model_name label is `model` or that have none (all series when `model` is
/// empty). Comment lines (# HELP / # TYPE) are skipped; a line that does not parse is skipped
/// too (a reader for figures, not a validator). Histogram series keep their suffixed names
/// (x_bucket, x_sum, x_count).
std::map<std::string, double> read_prometheus_samples(std::string_view text,
                                                      const std::string& model);

/// One scrape of /metrics: seconds since the run started and the samples.
struct MetricsScrape {
  double time_s = 0;
  std::map<std::string, double> samples;
};

/// What the scrapes say (absent: the server does not export the metric):
///  - num_preemptions: delta of vllm:num_preemptions_total between the first and last scrape;
///  - num_steps: delta of llmserve:engine_steps_total (llmserve servers only);
///  - peak_running: the largest vllm:num_requests_running seen;
///  - kv_utilization_mean / _peak: llmserve:kv_utilization (tokens stored / slots of allocated
///    blocks) over the scrapes that saw llmserve:kv_blocks_used > 0, as the in-process bench
///    averages it over steps with allocated blocks; here a time sample, not every step;
///  - prefix_cache_queries / _hits: deltas of vllm:prefix_cache_queries_total and
///    vllm:prefix_cache_hits_total (tokens; vLLM and llmserve export them, llama-server not);
///  - peak_cached_blocks: the largest llmserve:kv_blocks_cached seen (llmserve only).
struct ServerEngineMetrics {
  std::optional<int64_t> num_preemptions;
  std::optional<int64_t> num_steps;
  std::optional<int32_t> peak_running;
  std::optional<double> kv_utilization_mean, kv_utilization_peak;
  std::optional<int64_t> prefix_cache_queries, prefix_cache_hits;
  std::optional<int32_t> peak_cached_blocks;
  int64_t num_scrapes = 0;
};

/// The figures above from scrapes in time order (the first before the first request, the last
/// after the last reply). Fewer than two scrapes give no deltas.
ServerEngineMetrics summarize_scrapes(const std::vector<MetricsScrape>& scrapes);

}  // namespace llmserve::bench
