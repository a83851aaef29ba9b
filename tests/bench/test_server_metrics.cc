// bench serve's reading of a Prometheus /metrics page and the engine rows it derives.
#include <gtest/gtest.h>

#include "bench/metrics.h"
#include "bench/server_metrics.h"

namespace llmserve::bench {
namespace {

TEST(ServerMetrics, SamplesByNameSummedOverTheModelsSeries) {
  const std::string page =
      "# HELP vllm:num_preemptions_total Cumulative number of preemptions.\n"
      "# TYPE vllm:num_preemptions_total counter\n"
      "vllm:num_preemptions_total{model_name=\"m\"} 7\n"
      "vllm:num_preemptions_total{model_name=\"other\"} 100\n"
      "vllm:request_success_total{model_name=\"m\",finished_reason=\"stop\"} 2\n"
      "vllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 3\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25 1700000000000\n"
      "process_open_fds 12\n"
      "weird{model_name=\"a \\\"quoted\\\" m\"} 5\n"
      "broken line without value\n"
      "vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n";
  const auto s = read_prometheus_samples(page, "m");
  EXPECT_EQ(s.at("vllm:num_preemptions_total"), 7);
  EXPECT_EQ(s.at("vllm:request_success_total"), 5);
  EXPECT_EQ(s.at("vllm:kv_cache_usage_perc"), 0.25);  // the timestamp is not the value
  EXPECT_EQ(s.at("process_open_fds"), 12);             // no model label: kept
  EXPECT_EQ(s.count("weird"), 0u);                     // another model (escaped quotes)
  EXPECT_EQ(s.count("broken"), 0u);
  EXPECT_EQ(s.at("vllm:e2e_request_latency_seconds_bucket"), 4);
  EXPECT_EQ(read_prometheus_samples(page, "").at("vllm:num_preemptions_total"), 107);
}

TEST(ServerMetrics, DeltasOfCountersAndSamplesOfGauges) {
  auto scrape = [](double t, double preempt, double steps, double running, double used,
                   double util) {
    return MetricsScrape{t,
                         {{"vllm:num_preemptions_total", preempt},
                          {"llmserve:engine_steps_total", steps},
                          {"vllm:num_requests_running", running},
                          {"llmserve:kv_blocks_used", used},
                          {"llmserve:kv_utilization", util}}};
  };
  const std::vector<MetricsScrape> scrapes = {
      scrape(0.0, 4, 100, 0, 0, 0.0),  // before: other traffic's counts
      scrape(0.1, 5, 130, 3, 9, 0.5),  scrape(0.2, 7, 170, 5, 12, 0.9),
      scrape(0.3, 7, 180, 0, 0, 0.0)};  // after
  const ServerEngineMetrics m = summarize_scrapes(scrapes);
  EXPECT_EQ(m.num_scrapes, 4);
  EXPECT_EQ(m.num_preemptions, 3);
  EXPECT_EQ(m.num_steps, 80);
  EXPECT_EQ(m.peak_running, 5);
  EXPECT_DOUBLE_EQ(*m.kv_utilization_mean, 0.7);  // scrapes with blocks in use only
  EXPECT_DOUBLE_EQ(*m.kv_utilization_peak, 0.9);

  // A vLLM server: no llmserve:* series, so no steps and no utilisation; one scrape, no delta.
  const std::vector<MetricsScrape> vllm = {{0.0, {{"vllm:num_requests_running", 2}}}};
  const ServerEngineMetrics v = summarize_scrapes(vllm);
  EXPECT_FALSE(v.num_preemptions.has_value());
  EXPECT_FALSE(v.num_steps.has_value());
  EXPECT_EQ(v.peak_running, 2);
  EXPECT_FALSE(v.kv_utilization_mean.has_value());

  // compute_metrics puts them in the engine rows of a bench serve run.
  RunResult run;
  run.in_process = false;
  run.server_engine = m;
  const BenchMetrics bm = compute_metrics(run);
  EXPECT_EQ(bm.num_preemptions, 3);
  EXPECT_EQ(bm.num_steps, 80);
  EXPECT_EQ(bm.peak_running, 5);
  EXPECT_EQ(metrics_to_json(bm)["kv_utilization_peak"], 0.9);
}

}  // namespace
}  // namespace llmserve::bench
