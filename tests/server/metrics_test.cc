// GET /metrics: per-request latency histograms from engine timestamps (exact values from the
// fake engine's scripted clock), counters, gauges, aborted requests, and the page's validity
// as Prometheus text exposition format.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "prometheus_text.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

const std::string kModel = "{model_name=\"fake-model\"}";

/// `name_bucket{model_name="fake-model",le="<le>"}`
std::string bucket(const std::string& name, const std::string& le) {
  return name + "_bucket{model_name=\"fake-model\",le=\"" + le + "\"}";
}

PrometheusPage get_metrics(const TestServer& ts) {
  auto r = ts.get("/metrics");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200);
  PrometheusPage page = parse_prometheus_text(r->body);
  EXPECT_TRUE(page.errors.empty()) << page.error_text() << r->body;
  return page;
}

/// Histogram expectations: count, sum and some (le, cumulative count) pairs.
void expect_histogram(const PrometheusPage& page, const std::string& name, double count, double sum,
                      const std::vector<std::pair<std::string, double>>& buckets) {
  EXPECT_EQ(page.value(name + "_count" + kModel), count) << name;
  EXPECT_DOUBLE_EQ(page.value(name + "_sum" + kModel), sum) << name;
  EXPECT_EQ(page.value(bucket(name, "+Inf")), count) << name;
  for (const auto& [le, n] : buckets)
    EXPECT_EQ(page.value(bucket(name, le)), n) << name << " le=" << le;
}

// ---- the Prometheus reader itself ---------------------------------------------------------

TEST(PrometheusText, AcceptsAValidPage) {
  const PrometheusPage page = parse_prometheus_text(
      "# HELP a_total A counter.\n# TYPE a_total counter\na_total{x=\"q\\\"\\\\\"} 3.0\n"
      "# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.25\n"
      "h_count 2\n");
  EXPECT_TRUE(page.errors.empty()) << page.error_text();
  EXPECT_EQ(page.value("a_total{x=\"q\\\"\\\\\"}"), 3.0);
  EXPECT_EQ(page.value("h_sum"), 1.25);
  EXPECT_EQ(page.types.at("h"), "histogram");
}

TEST(PrometheusText, RejectsBrokenPages) {
  const std::vector<std::string> broken = {
      "a 1\n",                                                     // no TYPE
      "# TYPE a gauge\n# TYPE a gauge\na 1\n",                     // TYPE twice
      "# HELP a x\n# HELP a y\n# TYPE a gauge\na 1\n",             // HELP twice
      "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na{x=\"1\"} 1\n",  // not contiguous
      "# TYPE a gauge\na 1\na 2\n",                                // series twice
      "# TYPE a gauge\na one\n",                                   // bad value
      "# TYPE a gauge\na{x=1} 1\n",                                // unquoted label
      "# TYPE a gauge\na 1",                                       // no final newline
      "# TYPE c counter\nc -1\n",                                  // negative counter
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n",
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 3\n",
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 0\nh_count 1\n",  // no +Inf
      "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\n"
      "h_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n",             // le order
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",  // no _sum
      "# TYPE a gauge\na 1\n# HELP a late\n",                      // HELP after
  };
  for (const std::string& text : broken)
    EXPECT_FALSE(parse_prometheus_text(text).errors.empty()) << text;
}

// ---- ServerMetrics fed outputs directly ---------------------------------------------------

RequestOutput output(int32_t num_output_tokens, double last_token_time) {
  RequestOutput o;
  o.num_prompt_tokens = 7;
  o.num_output_tokens = num_output_tokens;
  o.timing.arrival_time = 10.0;
  o.timing.first_scheduled_time = 10.5;
  o.timing.first_token_time = 11.0;
  o.timing.last_token_time = last_token_time;
  return o;
}

TEST(ServerMetrics, InterTokenGapsOnePerOutputAndOnlyForFinishedRequests) {
  ServerMetrics m(/*max_model_len=*/100);
  RequestMetricsState a;
  m.observe_output(&a, output(1, 11.0));
  m.observe_output(&a, output(2, 11.25));  // gap 0.25
  m.observe_output(&a, output(2, 11.25));  // no new token: no gap
  m.observe_output(&a, output(5, 12.25));  // three tokens at once: one gap of 1.0
  RequestOutput last = output(6, 12.5);    // gap 0.25
  last.finished = true;
  last.finish_reason = FinishReason::kLength;
  last.timing.finished_time = 12.5;
  last.num_preemptions = 2;
  m.observe_output(&a, last);
  m.observe_output(&a, last);  // after the end: ignored

  RequestMetricsState b;  // streams two tokens, then the client leaves
  m.observe_output(&b, output(1, 11.0));
  m.observe_output(&b, output(2, 20.0));
  m.record_abort(&b);
  m.record_abort(&b);  // idempotent

  RequestMetricsState c;  // aborted by the engine: a final output with finish_reason abort
  m.observe_output(&c, output(1, 11.0));
  RequestOutput aborted = output(1, 11.0);
  aborted.finished = true;
  aborted.finish_reason = FinishReason::kAbort;
  aborted.timing.finished_time = 50.0;
  m.observe_output(&c, aborted);

  EngineStats stats;
  stats.kv_utilization = 0.75;
  const PrometheusPage page = parse_prometheus_text(m.render(stats, "fake-model"));
  ASSERT_TRUE(page.errors.empty()) << page.error_text();
  expect_histogram(page, "vllm:inter_token_latency_seconds", 3, 1.5,
                   {{"0.2", 0}, {"0.3", 2}, {"0.75", 2}, {"1.0", 3}});
  // TPOT = (e2e 2.5 - ttft 1.0) / 5
  expect_histogram(page, "vllm:time_per_output_token_seconds", 1, 0.3, {{"0.3", 1}});
  expect_histogram(page, "vllm:request_queue_time_seconds", 1, 0.5, {{"0.3", 0}, {"0.5", 1}});
  expect_histogram(page, "vllm:request_prefill_time_seconds", 1, 0.5, {{"0.5", 1}});
  expect_histogram(page, "vllm:request_decode_time_seconds", 1, 1.5, {{"1.5", 1}});
  expect_histogram(page, "vllm:time_to_first_token_seconds", 1, 1.0, {{"1.0", 1}});
  expect_histogram(page, "vllm:e2e_request_latency_seconds", 1, 2.5, {{"2.5", 1}});
  expect_histogram(page, "vllm:request_prompt_tokens", 1, 7, {{"5.0", 0}, {"10.0", 1}});
  expect_histogram(page, "vllm:request_generation_tokens", 1, 6, {{"10.0", 1}});
  // Counters include what the aborted requests produced.
  EXPECT_EQ(page.value("vllm:generation_tokens_total" + kModel), 6 + 2 + 1);
  EXPECT_EQ(page.value("vllm:prompt_tokens_total" + kModel), 3 * 7);
  EXPECT_EQ(page.value("vllm:num_preemptions_total" + kModel), 2);
  const std::string success = "vllm:request_success_total{model_name=\"fake-model\",";
  EXPECT_EQ(page.value(success + "finished_reason=\"length\"}"), 1);
  EXPECT_EQ(page.value(success + "finished_reason=\"stop\"}"), 0);
  EXPECT_EQ(page.value(success + "finished_reason=\"abort\"}"), 2);
  EXPECT_EQ(page.value("llmserve:kv_utilization" + kModel), 0.75);
  EXPECT_EQ(page.types.at("llmserve:kv_utilization"), "gauge");
  // 1-2-5 token buckets up to max_model_len.
  EXPECT_EQ(page.value(bucket("vllm:request_prompt_tokens", "100.0")), 1);
  EXPECT_TRUE(std::isnan(page.value(bucket("vllm:request_prompt_tokens", "200.0"))));
}

TEST(ServerMetrics, FailureCountersRenderEveryReasonFromZero) {
  ServerMetrics m;
  m.record_failure(FailureReason::kQueueFull);
  m.record_failure(FailureReason::kQueueFull);
  m.record_failure(FailureReason::kClientDisconnect);
  const PrometheusPage page = parse_prometheus_text(m.render(EngineStats{}, "m"));
  EXPECT_TRUE(page.errors.empty()) << page.error_text();
  EXPECT_EQ(page.types.at("llmserve:request_failure_total"), "counter");
  const std::string prefix = "llmserve:request_failure_total{model_name=\"m\",reason=\"";
  const std::map<std::string, double> want = {
      {"bad_request", 0}, {"unauthorized", 0}, {"too_large", 0}, {"queue_full", 2},
      {"ui_limit", 0}, {"draining", 0}, {"client_disconnect", 1}, {"shutdown", 0}, {"internal", 0}};
  for (const auto& [reason, n] : want) EXPECT_EQ(page.value(prefix + reason + "\"}"), n) << reason;
  EXPECT_EQ(m.num_failures(FailureReason::kQueueFull), 2);
}

TEST(ServerMetrics, OneTokenRequestsHaveNoTpotOrInterTokenLatency) {
  ServerMetrics m;
  RequestOutput o = output(1, 11.0);
  o.finished = true;
  o.finish_reason = FinishReason::kStop;
  o.timing.finished_time = 11.0;
  m.record_finished(o);
  const PrometheusPage page = parse_prometheus_text(m.render(EngineStats{}, "fake-model"));
  ASSERT_TRUE(page.errors.empty()) << page.error_text();
  EXPECT_EQ(page.value("vllm:time_per_output_token_seconds_count" + kModel), 0);
  EXPECT_EQ(page.value("vllm:inter_token_latency_seconds_count" + kModel), 0);
  EXPECT_EQ(page.value("vllm:request_decode_time_seconds_count" + kModel), 1);
  EXPECT_EQ(page.value("vllm:request_decode_time_seconds_sum" + kModel), 0);
}

TEST(ServerMetrics, BucketsAreVllms) {
  EXPECT_EQ(token_count_buckets(512), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
  EXPECT_EQ(token_count_buckets(1000).back(), 1000);
  EXPECT_EQ(itl_buckets().front(), 0.01);
  EXPECT_EQ(itl_buckets().back(), 80.0);
  EXPECT_EQ(request_latency_buckets().size(), 21u);
  EXPECT_EQ(ttft_buckets().back(), 2560.0);
}

// ---- through HTTP, with the fake engine's scripted clock ----------------------------------

FakeEngineOptions scripted_engine() {
  FakeEngineOptions opts;
  opts.eos_after = 5;  // a prompt ending in '.' stops with its 5th token
  FakeTimingScript t;
  t.arrival_time = 1024;
  t.queue_s = {0.25, 2.0, 0.25, 0.25};
  t.prefill_s = {0.5};
  t.itl_s = {0.0078125, 0.125, 1.0};
  t.finish_s = 0;
  t.num_preemptions = 1;
  opts.timing = t;
  return opts;
}

TEST(MetricsHttp, ScriptedClockGivesExactHistograms) {
  TestServer ts(scripted_engine());
  // One at a time, so that the fake numbers them 0..3.
  StreamReply r0 =
      post_stream(ts, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 5}, {"stream", true}});
  ASSERT_EQ(r0.status, 200);
  ASSERT_EQ(ts.post("/v1/completions", {{"prompt", "Hey"}, {"max_tokens", 1}})->status, 200);
  ASSERT_EQ(ts.post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}})->status, 200);
  auto r3 = ts.post("/v1/completions", {{"prompt", "End."}, {"max_tokens", 10}});
  ASSERT_EQ(r3->status, 200);
  ASSERT_EQ(json::parse(r3->body)["choices"][0]["finish_reason"], "stop");
  // Requests: output tokens 5, 1, 3, 5 (the last stops on EOS); queue 0.25, 2.0, 0.25, 0.25;
  // prefill 0.5; token gaps cycle 1/128, 0.125, 1.0.
  const PrometheusPage page = get_metrics(ts);

  // ITL: r0 and r3: 1/128, 0.125, 1.0, 1/128; r2: 1/128, 0.125; r1 none.
  expect_histogram(page, "vllm:inter_token_latency_seconds", 10, 2 * 1.140625 + 0.1328125,
                   {{"0.01", 5}, {"0.1", 5}, {"0.15", 8}, {"0.75", 8}, {"1.0", 10}, {"80.0", 10}});
  // TPOT: r0, r3 1.140625 / 4 = 0.28515625; r2 0.1328125 / 2 = 0.06640625; r1 has one token.
  expect_histogram(page, "vllm:time_per_output_token_seconds", 3, 2 * 0.28515625 + 0.06640625,
                   {{"0.05", 0}, {"0.075", 1}, {"0.2", 1}, {"0.3", 3}});
  // Queue: 0.25 three times, 2.0 once (le is inclusive).
  expect_histogram(page, "vllm:request_queue_time_seconds", 4, 2.75,
                   {{"0.3", 3}, {"1.5", 3}, {"2.0", 4}});
  expect_histogram(page, "vllm:request_prefill_time_seconds", 4, 2.0, {{"0.3", 0}, {"0.5", 4}});
  expect_histogram(page, "vllm:time_to_first_token_seconds", 4, 3 * 0.75 + 2.5,
                   {{"0.5", 0}, {"0.75", 3}, {"1.0", 3}, {"2.5", 4}});
  expect_histogram(page, "vllm:request_decode_time_seconds", 4, 2 * 1.140625 + 0.1328125,
                   {{"0.3", 2}, {"1.0", 2}, {"1.5", 4}});
  expect_histogram(page, "vllm:e2e_request_latency_seconds", 4, 2 * 1.890625 + 2.5 + 0.8828125,
                   {{"0.8", 0}, {"1.0", 1}, {"2.0", 3}, {"2.5", 4}});
  // Prompts with BOS: 3, 4, 6, 5 tokens; outputs 5, 1, 3, 5.
  expect_histogram(page, "vllm:request_prompt_tokens", 4, 18,
                   {{"2.0", 0}, {"5.0", 3}, {"10.0", 4}});
  expect_histogram(page, "vllm:request_generation_tokens", 4, 14,
                   {{"1.0", 1}, {"2.0", 1}, {"5.0", 4}, {"200.0", 4}});
  EXPECT_EQ(page.value("vllm:prompt_tokens_total" + kModel), 18);
  EXPECT_EQ(page.value("vllm:generation_tokens_total" + kModel), 14);
  EXPECT_EQ(page.value("vllm:num_preemptions_total" + kModel), 4);
  const std::string success = "vllm:request_success_total{model_name=\"fake-model\",";
  EXPECT_EQ(page.value(success + "finished_reason=\"stop\"}"), 1);
  EXPECT_EQ(page.value(success + "finished_reason=\"length\"}"), 3);
  EXPECT_EQ(page.value(success + "finished_reason=\"abort\"}"), 0);
  for (const char* gauge : {"vllm:num_requests_running", "vllm:num_requests_waiting",
                            "vllm:kv_cache_usage_perc", "llmserve:kv_utilization"})
    EXPECT_EQ(page.value(gauge + kModel), 0.0) << gauge;  // idle now
}

TEST(MetricsHttp, EveryFamilyHasHelpTypeAndIsListedOnce) {
  TestServer ts;
  ASSERT_EQ(ts.post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 3}})->status, 200);
  auto r = ts.get("/metrics");
  ASSERT_TRUE(r);
  const PrometheusPage page = parse_prometheus_text(r->body);
  EXPECT_TRUE(page.errors.empty()) << page.error_text();
  const std::map<std::string, std::string> expected = {
      {"vllm:num_requests_running", "gauge"},
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},
      {"llmserve:kv_utilization", "gauge"},
      {"llmserve:kv_blocks_used", "gauge"},
      {"llmserve:engine_steps_total", "counter"},
      {"llmserve:scheduled_prefill_tokens_total", "counter"},
      {"llmserve:scheduled_decode_tokens_total", "counter"},
      {"vllm:prompt_tokens_total", "counter"},
      {"vllm:generation_tokens_total", "counter"},
      {"vllm:num_preemptions_total", "counter"},
      {"llmserve:kv_blocks_cached", "gauge"},
      {"vllm:prefix_cache_queries_total", "counter"},
      {"vllm:prefix_cache_hits_total", "counter"},
      {"vllm:request_success_total", "counter"},
      {"llmserve:request_failure_total", "counter"},
      {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"},
      {"vllm:time_per_output_token_seconds", "histogram"},
      {"vllm:e2e_request_latency_seconds", "histogram"},
      {"vllm:request_queue_time_seconds", "histogram"},
      {"vllm:request_prefill_time_seconds", "histogram"},
      {"vllm:request_decode_time_seconds", "histogram"},
      {"vllm:request_prompt_tokens", "histogram"},
      {"vllm:request_generation_tokens", "histogram"},
      {"llmserve:structured_output_compile_seconds", "histogram"},
      {"llmserve:structured_output_mask_seconds", "histogram"},
      {"llmserve:structured_output_refused_total", "counter"},
      {"llmserve:replica_info", "gauge"},  // replica_identity_test.cc
      {"llmserve:ui_subscribers", "gauge"},  // ui_routes_test.cc
      {"llmserve:ui_events_dropped_total", "counter"},
  };
  EXPECT_EQ(page.types, expected);
  for (const auto& [family, type] : expected)
    EXPECT_NE(r->body.find("# HELP " + family + " "), std::string::npos) << family;
  // Wall-clock timings are real (non-negative) numbers.
  EXPECT_EQ(page.value("vllm:inter_token_latency_seconds_count" + kModel), 2);
  EXPECT_GE(page.value("vllm:inter_token_latency_seconds_sum" + kModel), 0);
}

TEST(MetricsHttp, AbortedRequestIsCountedButStaysOutOfHistograms) {
  FakeEngineOptions opts = scripted_engine();
  opts.max_model_len = 1 << 20;
  opts.step_delay = std::chrono::milliseconds(2);
  TestServer ts(opts);
  auto client = ts.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", "Hi"}, {"max_tokens", 100000}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  double kv_utilization_while_streaming = -1;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    if (received.find("data: ", received.find("data: ") + 1) == std::string::npos) return true;
    kv_utilization_while_streaming = get_metrics(ts).value("llmserve:kv_utilization" + kModel);
    return false;  // hang up after two chunks
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  client->send(req, res, error);
  client.reset();
  EXPECT_GT(kv_utilization_while_streaming, 0.0);
  EXPECT_LE(kv_utilization_while_streaming, 1.0);
  const std::string abort_series =
      "vllm:request_success_total{model_name=\"fake-model\",finished_reason=\"abort\"}";
  EXPECT_TRUE(wait_for([&] { return get_metrics(ts).value(abort_series) == 1; }));
  EXPECT_TRUE(wait_for([&] { return ts.fake().num_aborted() == 1; }));
  const PrometheusPage page = get_metrics(ts);
  for (const char* h : {"vllm:inter_token_latency_seconds", "vllm:time_to_first_token_seconds",
                        "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                        "vllm:time_per_output_token_seconds", "vllm:request_generation_tokens"})
    EXPECT_EQ(page.value(std::string(h) + "_count" + kModel), 0) << h;
  EXPECT_GE(page.value("vllm:generation_tokens_total" + kModel), 2);
  EXPECT_EQ(page.value("vllm:prompt_tokens_total" + kModel), 3);
}

}  // namespace
}  // namespace llmserve::testing
