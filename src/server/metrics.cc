#include "server/metrics.h"

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

std::vector<double> e2e_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
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

ServerMetrics::ServerMetrics() : ttft_(ttft_buckets()), e2e_(e2e_latency_buckets()) {}

void ServerMetrics::record_finished(const RequestOutput& final_output) {
  LLMS_CHECK(final_output.finished);
  const RequestTiming& t = final_output.timing;
  std::lock_guard<std::mutex> lock(mu_);
  switch (final_output.finish_reason) {
    case FinishReason::kStop: ++num_finished_stop_; break;
    case FinishReason::kLength: ++num_finished_length_; break;
    default: ++num_finished_abort_; return;  // no latencies for requests nobody waited for
  }
  if (t.arrival_time <= 0) return;
  if (t.first_token_time > 0) ttft_.observe(std::max(0.0, t.first_token_time - t.arrival_time));
  if (t.finished_time > 0) e2e_.observe(std::max(0.0, t.finished_time - t.arrival_time));
}

void ServerMetrics::record_abort() {
  std::lock_guard<std::mutex> lock(mu_);
  ++num_finished_abort_;
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
  out.reserve(8192);

  add_header("vllm:num_requests_running", "gauge",
             "Number of requests in model execution batches.", &out);
  add_sample("vllm:num_requests_running", labels, stats.num_running, &out);
  add_header("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
             &out);
  add_sample("vllm:num_requests_waiting", labels, stats.num_waiting, &out);
  add_header("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
             &out);
  add_sample("vllm:kv_cache_usage_perc", labels, stats.kv_cache_usage, &out);

  add_header("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", &out);
  add_sample("vllm:prompt_tokens_total", labels, static_cast<double>(stats.prompt_tokens_total),
             &out);
  add_header("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
             &out);
  add_sample("vllm:generation_tokens_total", labels,
             static_cast<double>(stats.generation_tokens_total), &out);
  add_header("vllm:num_preemptions_total", "counter",
             "Cumulative number of preemptions from the engine.", &out);
  add_sample("vllm:num_preemptions_total", labels,
             static_cast<double>(stats.num_preemptions_total), &out);

  std::lock_guard<std::mutex> lock(mu_);
  add_header("vllm:request_success_total", "counter", "Count of finished requests by reason.",
             &out);
  const std::pair<const char*, int64_t> reasons[] = {
      {"stop", num_finished_stop_}, {"length", num_finished_length_},
      {"abort", num_finished_abort_}};
  for (const auto& [reason, n] : reasons)
    add_sample("vllm:request_success_total",
               fmt::format("{},finished_reason=\"{}\"", labels, reason), static_cast<double>(n),
               &out);

  add_header("vllm:time_to_first_token_seconds", "histogram",
             "Histogram of time to first token in seconds.", &out);
  ttft_.render("vllm:time_to_first_token_seconds", labels, &out);
  add_header("vllm:e2e_request_latency_seconds", "histogram",
             "Histogram of end to end request latency in seconds.", &out);
  e2e_.render("vllm:e2e_request_latency_seconds", labels, &out);
  return out;
}

}  // namespace llmserve
