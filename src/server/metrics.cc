#include "server/metrics.h"

#include "structured_output/stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "common/check.h"

namespace llmserve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < upper_bounds_.size() && value > upper_bounds_[i]) ++i;  // le: value <= bound
  ++bucket_counts_[i];
  sum_ += value;
  ++count_;
}

Histogram Histogram::from_counts(std::vector<double> upper_bounds,
                               const std::vector<uint64_t>& bucket_counts, double sum,
                               uint64_t count) {
  Histogram h(std::move(upper_bounds));
  for (size_t i = 0; i < h.bucket_counts_.size() && i < bucket_counts.size(); ++i)
    h.bucket_counts_[i] = bucket_counts[i];
  h.sum_ = sum;
  h.count_ = count;
  return h;
}

void Histogram::render(const std::string& name, const std::string& labels,
                       std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    cumulative += bucket_counts_[i];
    const std::string le =
        i < upper_bounds_.size() ? prometheus_number(upper_bounds_[i]) : std::string("+Inf");
    *out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  *out += fmt::format("{}_sum{{{}}} {}\n", name, labels, prometheus_number(sum_));
  *out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> itl_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
}

std::vector<double> request_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> token_count_buckets(int64_t max_value) {
  std::vector<double> bounds;
  for (int64_t scale = 1;; scale *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > max_value) return bounds;
      bounds.push_back(static_cast<double>(m * scale));
    }
  }
}

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{:.1f}", value);
  return fmt::format("{}", value);
}

std::string prometheus_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void render_replica_info(const std::string& replica_id, const std::string& model_name,
                         std::string* out) {
  *out += "# HELP llmserve:replica_info This replica's id (--replica-id); always 1.\n"
          "# TYPE llmserve:replica_info gauge\n";
  *out += "llmserve:replica_info{model_name=\"" + prometheus_label_value(model_name) +
          "\",replica_id=\"" + prometheus_label_value(replica_id) + "\"} 1.0\n";
}

ServerMetrics::ServerMetrics(int64_t max_model_len)
    : ttft_(ttft_buckets()),
      itl_(itl_buckets()),
      e2e_(request_latency_buckets()),
      queue_(request_latency_buckets()),
      prefill_(request_latency_buckets()),
      decode_(request_latency_buckets()),
      tpot_(itl_buckets()),
      prompt_tokens_(token_count_buckets(max_model_len > 0 ? max_model_len : 65536)),
      generation_tokens_(token_count_buckets(max_model_len > 0 ? max_model_len : 65536)) {}

void ServerMetrics::observe_output(RequestMetricsState* state, const RequestOutput& output) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state->done) return;
  if (output.num_output_tokens > state->seen_output_tokens) {  // new tokens
    generation_tokens_total_ += output.num_output_tokens - state->seen_output_tokens;
    if (!state->prompt_counted) {  // the prompt was processed: it produced a token
      state->prompt_counted = true;
      prompt_tokens_total_ += output.num_prompt_tokens;
    }
    const double t = output.timing.last_token_time;
    if (state->seen_output_tokens > 0 && state->last_token_time > 0 && t > 0)
      state->inter_token_gaps.push_back(std::max(0.0, t - state->last_token_time));
    if (t > 0) state->last_token_time = t;
    state->seen_output_tokens = output.num_output_tokens;
  }
  if (output.num_preemptions > state->seen_preemptions) {
    num_preemptions_total_ += output.num_preemptions - state->seen_preemptions;
    state->seen_preemptions = output.num_preemptions;
  }
  if (output.finished) record_finished_locked(state, output);
}

void ServerMetrics::record_finished_locked(RequestMetricsState* state,
                                           const RequestOutput& final_output) {
  state->done = true;
  std::vector<double> gaps = std::move(state->inter_token_gaps);
  state->inter_token_gaps.clear();
  switch (final_output.finish_reason) {
    case FinishReason::kStop: ++num_finished_stop_; break;
    case FinishReason::kLength: ++num_finished_length_; break;
    default: ++num_finished_abort_; return;  // no latencies for requests nobody waited for
  }
  for (double gap : gaps) itl_.observe(gap);
  prompt_tokens_.observe(final_output.num_prompt_tokens);
  generation_tokens_.observe(final_output.num_output_tokens);

  const RequestTiming& t = final_output.timing;
  auto interval = [](double from, double to) { return std::max(0.0, to - from); };
  const bool arrived = t.arrival_time > 0, scheduled = t.first_scheduled_time > 0,
             first_token = t.first_token_time > 0, finished = t.finished_time > 0;
  if (arrived && scheduled) queue_.observe(interval(t.arrival_time, t.first_scheduled_time));
  if (scheduled && first_token)
    prefill_.observe(interval(t.first_scheduled_time, t.first_token_time));
  if (first_token && finished) decode_.observe(interval(t.first_token_time, t.finished_time));
  if (arrived && first_token) ttft_.observe(interval(t.arrival_time, t.first_token_time));
  if (arrived && finished) e2e_.observe(interval(t.arrival_time, t.finished_time));
  if (arrived && first_token && finished && final_output.num_output_tokens > 1) {
    const double e2e = t.finished_time - t.arrival_time;
    const double ttft = t.first_token_time - t.arrival_time;
    tpot_.observe(std::max(0.0, e2e - ttft) / (final_output.num_output_tokens - 1));
  }
}

void ServerMetrics::record_abort(RequestMetricsState* state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state->done) return;
  state->done = true;
  state->inter_token_gaps.clear();
  ++num_finished_abort_;
}

const char* failure_reason_name(FailureReason reason) {
  switch (reason) {
    case FailureReason::kBadRequest: return "bad_request";
    case FailureReason::kUnauthorized: return "unauthorized";
    case FailureReason::kTooLarge: return "too_large";
    case FailureReason::kQueueFull: return "queue_full";
    case FailureReason::kUiLimit: return "ui_limit";
    case FailureReason::kDraining: return "draining";
    case FailureReason::kClientDisconnect: return "client_disconnect";
    case FailureReason::kShutdown: return "shutdown";
    case FailureReason::kInternal: return "internal";
    case FailureReason::kCount: break;
  }
  return "unknown";
}

void ServerMetrics::record_failure(FailureReason reason) {
  LLMS_CHECK(reason != FailureReason::kCount);
  std::lock_guard<std::mutex> lock(mu_);
  ++num_failures_[static_cast<size_t>(reason)];
}

int64_t ServerMetrics::num_failures(FailureReason reason) const {
  LLMS_CHECK(reason != FailureReason::kCount);
  std::lock_guard<std::mutex> lock(mu_);
  return num_failures_[static_cast<size_t>(reason)];
}

void ServerMetrics::record_finished(const RequestOutput& final_output) {
  LLMS_CHECK(final_output.finished);
  RequestMetricsState state;
  observe_output(&state, final_output);
}

void ServerMetrics::record_abort() {
  RequestMetricsState state;
  record_abort(&state);
}

namespace {

void add_header(const char* name, const char* type, const char* help, std::string* out) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void add_sample(const char* name, const std::string& labels, double value, std::string* out) {
  *out += fmt::format("{}{{{}}} {}\n", name, labels, prometheus_number(value));
}

}  // namespace

std::string ServerMetrics::render(const EngineStats& stats, const std::string& model_name) const {
  const std::string labels =
      fmt::format("model_name=\"{}\"", prometheus_label_value(model_name));
  std::string out;
  out.reserve(32768);

  // Engine gauges, from the snapshot.
  add_header("vllm:num_requests_running", "gauge",
             "Number of requests in model execution batches.", &out);
  add_sample("vllm:num_requests_running", labels, stats.num_running, &out);
  add_header("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
             &out);
  add_sample("vllm:num_requests_waiting", labels, stats.num_waiting, &out);
  add_header("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
             &out);
  add_sample("vllm:kv_cache_usage_perc", labels, stats.kv_cache_usage, &out);
  add_header("llmserve:kv_utilization", "gauge",
             "Tokens stored in the KV cache / token slots in allocated KV blocks (1 = no waste).",
             &out);
  add_sample("llmserve:kv_utilization", labels, stats.kv_utilization, &out);
  add_header("llmserve:kv_blocks_used", "gauge", "KV cache blocks in use.", &out);
  add_sample("llmserve:kv_blocks_used", labels,
             static_cast<double>(stats.num_total_blocks - stats.num_free_blocks), &out);
  add_header("llmserve:kv_blocks_cached", "gauge",
             "KV cache blocks held by no request but keeping their prefix-cached K/V (counted "
             "free in vllm:kv_cache_usage_perc; evicted least recently used first).",
             &out);
  add_sample("llmserve:kv_blocks_cached", labels, static_cast<double>(stats.num_cached_blocks),
             &out);
  add_header("vllm:prefix_cache_queries_total", "counter",
             "Prefix cache queries, in terms of number of queried tokens.", &out);
  add_sample("vllm:prefix_cache_queries_total", labels,
             static_cast<double>(stats.prefix_cache_queries_total), &out);
  add_header("vllm:prefix_cache_hits_total", "counter",
             "Prefix cache hits, in terms of number of cached tokens.", &out);
  add_sample("vllm:prefix_cache_hits_total", labels,
             static_cast<double>(stats.prefix_cache_hits_total), &out);
  add_header("llmserve:engine_steps_total", "counter", "Engine steps (forward passes) run.",
             &out);
  add_sample("llmserve:engine_steps_total", labels, static_cast<double>(stats.num_steps), &out);
  add_header("llmserve:scheduled_prefill_tokens_total", "counter",
             "Prompt tokens computed by engine steps (prefill chunks and recomputation).", &out);
  add_sample("llmserve:scheduled_prefill_tokens_total", labels,
             static_cast<double>(stats.scheduled_prefill_tokens_total), &out);
  add_header("llmserve:scheduled_decode_tokens_total", "counter",
             "Decode tokens computed by engine steps.", &out);
  add_sample("llmserve:scheduled_decode_tokens_total", labels,
             static_cast<double>(stats.scheduled_decode_tokens_total), &out);

  std::lock_guard<std::mutex> lock(mu_);
  add_header("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", &out);
  add_sample("vllm:prompt_tokens_total", labels, static_cast<double>(prompt_tokens_total_),
             &out);
  add_header("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
             &out);
  add_sample("vllm:generation_tokens_total", labels,
             static_cast<double>(generation_tokens_total_), &out);
  add_header("vllm:num_preemptions_total", "counter",
             "Cumulative number of preemptions from the engine.", &out);
  add_sample("vllm:num_preemptions_total", labels, static_cast<double>(num_preemptions_total_),
             &out);
  add_header("vllm:request_success_total", "counter", "Count of finished requests by reason.",
             &out);
  const std::pair<const char*, int64_t> reasons[] = {
      {"stop", num_finished_stop_}, {"length", num_finished_length_},
      {"abort", num_finished_abort_}};
  for (const auto& [reason, n] : reasons)
    add_sample("vllm:request_success_total",
               fmt::format("{},finished_reason=\"{}\"", labels, reason), static_cast<double>(n),
               &out);

  add_header("llmserve:request_failure_total", "counter",
             "HTTP requests that did not end normally, by reason (rejections and aborts).",
             &out);
  for (size_t i = 0; i < num_failures_.size(); ++i)
    add_sample("llmserve:request_failure_total",
               fmt::format("{},reason=\"{}\"", labels,
                           failure_reason_name(static_cast<FailureReason>(i))),
               static_cast<double>(num_failures_[i]), &out);

  const struct {
    const char* name;
    const char* help;
    const Histogram* histogram;
  } histograms[] = {
      {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
       &ttft_},
      {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &itl_},
      {"vllm:time_per_output_token_seconds",
       "Histogram of time per output token in seconds: (e2e - TTFT) / (output tokens - 1).",
       &tpot_},
      {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &e2e_},
      {"vllm:request_queue_time_seconds",
       "Histogram of time from arrival to first scheduling in seconds.", &queue_},
      {"vllm:request_prefill_time_seconds",
       "Histogram of time from first scheduling to first token in seconds.", &prefill_},
      {"vllm:request_decode_time_seconds",
       "Histogram of time from first token to finish in seconds.", &decode_},
      {"vllm:request_prompt_tokens", "Number of prefill tokens processed.", &prompt_tokens_},
      {"vllm:request_generation_tokens", "Number of generation tokens processed.",
       &generation_tokens_},
  };
  for (const auto& h : histograms) {
    add_header(h.name, "histogram", h.help, &out);
    h.histogram->render(h.name, labels, &out);
  }
  render_structured_output(labels, &out);
  return out;
}

void render_structured_output(const std::string& labels, std::string* out) {
  const structured_output::StatsSnapshot so = structured_output::stats_snapshot();
  const struct {
    const char* name;
    const char* help;
    const structured_output::HistogramCounts* h;
  } histograms[] = {
      {"llmserve:structured_output_compile_seconds",
       "Histogram of grammar compile time in seconds (constraints not found in the cache, "
       "refused ones included).",
       &so.compile_seconds},
      {"llmserve:structured_output_mask_seconds",
       "Histogram of the time to compute one token mask of a constrained sequence, in seconds.",
       &so.mask_seconds},
  };
  for (const auto& h : histograms) {
    add_header(h.name, "histogram", h.help, out);
    Histogram::from_counts(h.h->upper_bounds, h.h->bucket_counts, h.h->sum, h.h->count)
        .render(h.name, labels, out);
  }
  add_header("llmserve:structured_output_refused_total", "counter",
             "Constraints refused with a 400, by the JSON Schema keyword (or the constraint "
             "kind: regex, grammar, ...) the error names.",
             out);
  for (const auto& [keyword, count] : so.refused)
    add_sample("llmserve:structured_output_refused_total",
               fmt::format("{},keyword=\"{}\"", labels, prometheus_label_value(keyword)),
               static_cast<double>(count), out);
}

}  // namespace llmserve
