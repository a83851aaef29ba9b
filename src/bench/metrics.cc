#include "bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace llmserve::bench {

double mean(const std::vector<double>& xs) {
  if (xs.empty()) return 0.0;
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

double percentile(std::vector<double> xs, double q) {
  if (xs.empty()) return 0.0;
  std::sort(xs.begin(), xs.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(xs.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, xs.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return xs[lo] + (xs[hi] - xs[lo]) * frac;
}

Distribution summarize(const std::vector<double>& xs) {
  return {mean(xs), percentile(xs, 50.0), percentile(xs, 99.0)};
}

double ttft_s(const RequestRecord& r) {
  return r.token_times.empty() ? 0.0 : r.token_times.front() - r.arrival_time;
}

double e2e_s(const RequestRecord& r) {
  const double end = r.token_times.empty() ? r.finished_time : r.token_times.back();
  return end - r.arrival_time;
}

std::vector<double> inter_token_gaps_s(const RequestRecord& r) {
  const std::vector<double>& t = r.token_times;
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  return gaps;
}

namespace {

/// Latency samples of the successful requests, in milliseconds.
struct LatencySamples {
  std::vector<double> ttft, tpot, itl, e2e;
};

LatencySamples collect_latencies(const RunResult& run) {
  LatencySamples s;
  for (const RequestRecord& r : run.requests) {
    if (!r.success) continue;
    const double ttft = ttft_s(r), e2e = e2e_s(r);
    s.ttft.push_back(ttft * 1e3);
    s.e2e.push_back(e2e * 1e3);
    if (r.output_tokens > 1) s.tpot.push_back((e2e - ttft) / (r.output_tokens - 1) * 1e3);
    for (double g : inter_token_gaps_s(r)) s.itl.push_back(g * 1e3);
  }
  return s;
}

void add_step_limits(const RunResult& run, BenchMetrics& m) {
  StepLimits prefill, decode;
  std::vector<double> contiguous;
  for (const StepRecord& s : run.steps) {
    StepLimits& l = s.num_prefill_tokens > 0 ? prefill : decode;
    const int32_t tokens = s.num_prefill_tokens + s.num_decode_tokens;
    ++l.num_steps;
    l.budget_bound_frac += tokens >= run.max_num_batched_tokens ? 1 : 0;
    l.seqs_bound_frac += s.num_running >= run.max_num_seqs ? 1 : 0;
    l.mean_tokens += tokens;
    l.mean_running += s.num_running;
    if (s.num_running > 0 && run.max_model_len > 0) {
      const double stored = s.kv_utilization * s.num_used_blocks * run.block_size;
      contiguous.push_back(stored / (double(s.num_running) * run.max_model_len));
    }
  }
  for (StepLimits* l : {&prefill, &decode}) {
    if (l->num_steps == 0) continue;
    const double n = static_cast<double>(l->num_steps);
    l->budget_bound_frac /= n;
    l->seqs_bound_frac /= n;
    l->mean_tokens /= n;
    l->mean_running /= n;
  }
  m.prefill_steps = prefill;
  m.decode_steps = decode;
  m.contiguous_utilization_mean = mean(contiguous);
}

void add_engine_metrics(const RunResult& run, BenchMetrics& m) {
  int64_t preemptions = 0;
  for (const RequestRecord& r : run.requests) preemptions += r.num_preemptions;
  m.num_preemptions = preemptions;
  std::vector<double> util;
  int32_t peak_running = 0;
  for (const StepRecord& s : run.steps) {
    if (s.num_used_blocks > 0) util.push_back(s.kv_utilization);
    peak_running = std::max(peak_running, s.num_running);
  }
  m.kv_utilization_mean = mean(util);
  m.kv_utilization_peak = util.empty() ? 0.0 : *std::max_element(util.begin(), util.end());
  m.peak_running = peak_running;
  m.num_steps = static_cast<int64_t>(run.steps.size());
  int32_t peak_cached = 0;
  for (const StepRecord& s : run.steps) peak_cached = std::max(peak_cached, s.num_cached_blocks);
  m.peak_cached_blocks = peak_cached;
  m.prefix_cache_queries = run.prefix_cache_queries;
  m.prefix_cache_hits = run.prefix_cache_hits;
  add_step_limits(run, m);
}

/// Hit rate and the usage-reported cached tokens (after the counters are filled in).
void add_prefix_cache(const RunResult& run, BenchMetrics& m) {
  if (m.prefix_cache_queries && m.prefix_cache_hits)
    m.prefix_cache_hit_rate =
        *m.prefix_cache_queries > 0
            ? static_cast<double>(*m.prefix_cache_hits) / static_cast<double>(*m.prefix_cache_queries)
            : 0.0;
  for (const RequestRecord& r : run.requests) {
    if (!r.success || r.cached_tokens < 0) continue;
    m.cached_prompt_tokens = m.cached_prompt_tokens.value_or(0) + r.cached_tokens;
  }
}

/// Per-turn figures of a multi-turn run (requests with turn >= 0).
std::vector<TurnMetrics> turn_metrics(const RunResult& run) {
  int32_t num_turns = 0;
  for (const RequestRecord& r : run.requests) num_turns = std::max(num_turns, r.turn + 1);
  std::vector<TurnMetrics> turns(static_cast<size_t>(num_turns));
  std::vector<std::vector<double>> ttft(turns.size());
  std::vector<int64_t> num_cached(turns.size(), 0);
  std::vector<double> sum_cached(turns.size(), 0.0);
  for (const RequestRecord& r : run.requests) {
    if (r.turn < 0 || !r.success) continue;
    const size_t t = static_cast<size_t>(r.turn);
    ++turns[t].completed;
    turns[t].mean_prompt_tokens += r.prompt_len;
    ttft[t].push_back(ttft_s(r) * 1e3);
    if (r.cached_tokens >= 0) {
      ++num_cached[t];
      sum_cached[t] += r.cached_tokens;
    }
  }
  for (size_t t = 0; t < turns.size(); ++t) {
    TurnMetrics& tm = turns[t];
    tm.turn = static_cast<int32_t>(t) + 1;
    if (tm.completed > 0) tm.mean_prompt_tokens /= static_cast<double>(tm.completed);
    if (num_cached[t] > 0) tm.mean_cached_tokens = sum_cached[t] / static_cast<double>(num_cached[t]);
    tm.ttft_ms = summarize(ttft[t]);
  }
  return turns;
}

}  // namespace

BenchMetrics compute_metrics(const RunResult& run) {
  BenchMetrics m;
  for (const RequestRecord& r : run.requests) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_len;
    m.total_output_tokens += r.output_tokens;
  }
  m.duration_s = std::max(0.0, run.end_time - run.start_time);
  if (m.duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / m.duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / m.duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / m.duration_s;
  }
  const LatencySamples s = collect_latencies(run);
  m.ttft_ms = summarize(s.ttft);
  m.tpot_ms = summarize(s.tpot);
  m.itl_ms = summarize(s.itl);
  m.e2e_ms = summarize(s.e2e);
  if (run.in_process) {
    add_engine_metrics(run, m);
  } else if (run.server_engine) {
    const ServerEngineMetrics& s = *run.server_engine;
    m.num_preemptions = s.num_preemptions;
    m.num_steps = s.num_steps;
    m.peak_running = s.peak_running;
    m.kv_utilization_mean = s.kv_utilization_mean;
    m.kv_utilization_peak = s.kv_utilization_peak;
    m.prefix_cache_queries = s.prefix_cache_queries;
    m.prefix_cache_hits = s.prefix_cache_hits;
    m.peak_cached_blocks = s.peak_cached_blocks;
  }
  add_prefix_cache(run, m);
  m.turns = turn_metrics(run);
  return m;
}

namespace {

nlohmann::json dist_json(const Distribution& d) {
  return {{"mean", d.mean}, {"median", d.median}, {"p99", d.p99}};
}

template <typename T>
nlohmann::json opt_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json turns_json(const std::vector<TurnMetrics>& turns) {
  if (turns.empty()) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  for (const TurnMetrics& t : turns)
    list.push_back({{"turn", t.turn},
                    {"completed", t.completed},
                    {"mean_prompt_tokens", t.mean_prompt_tokens},
                    {"mean_cached_tokens", opt_json(t.mean_cached_tokens)},
                    {"ttft_ms", dist_json(t.ttft_ms)}});
  return list;
}

nlohmann::json limits_json(const std::optional<StepLimits>& l) {
  if (!l) return nullptr;
  return {{"num_steps", l->num_steps},
          {"budget_bound_frac", l->budget_bound_frac},
          {"seqs_bound_frac", l->seqs_bound_frac},
          {"mean_tokens", l->mean_tokens},
          {"mean_running", l->mean_running}};
}

}  // namespace

nlohmann::json metrics_to_json(const BenchMetrics& m) {
  return {{"completed", m.completed},
          {"failed", m.failed},
          {"total_input_tokens", m.total_input_tokens},
          {"total_output_tokens", m.total_output_tokens},
          {"duration_s", m.duration_s},
          {"request_throughput", m.request_throughput},
          {"output_throughput", m.output_throughput},
          {"total_token_throughput", m.total_token_throughput},
          {"ttft_ms", dist_json(m.ttft_ms)},
          {"tpot_ms", dist_json(m.tpot_ms)},
          {"itl_ms", dist_json(m.itl_ms)},
          {"e2e_ms", dist_json(m.e2e_ms)},
          {"num_preemptions", opt_json(m.num_preemptions)},
          {"kv_utilization_mean", opt_json(m.kv_utilization_mean)},
          {"kv_utilization_peak", opt_json(m.kv_utilization_peak)},
          {"peak_running", opt_json(m.peak_running)},
          {"contiguous_utilization_mean", opt_json(m.contiguous_utilization_mean)},
          {"prefill_steps", limits_json(m.prefill_steps)},
          {"decode_steps", limits_json(m.decode_steps)},
          {"num_steps", opt_json(m.num_steps)},
          {"prefix_cache_queries", opt_json(m.prefix_cache_queries)},
          {"prefix_cache_hits", opt_json(m.prefix_cache_hits)},
          {"prefix_cache_hit_rate", opt_json(m.prefix_cache_hit_rate)},
          {"cached_prompt_tokens", opt_json(m.cached_prompt_tokens)},
          {"peak_cached_blocks", opt_json(m.peak_cached_blocks)},
          {"turns", turns_json(m.turns)}};
}

namespace {

void row(std::string& out, const std::string& label, const std::string& value) {
  out += fmt::format("{:<40} {:<10}\n", label, value);
}
std::string f2(double v) { return fmt::format("{:.2f}", v); }
std::string pct(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}%", *v * 100.0) : "n/a";
}
template <typename T>
std::string opt_str(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : "n/a";
}

void section(std::string& out, const std::string& name) {
  out += fmt::format("{:-^50}\n", name);
}

void dist_rows(std::string& out, const std::string& abbr, const Distribution& d) {
  row(out, fmt::format("Mean {} (ms):", abbr), f2(d.mean));
  row(out, fmt::format("Median {} (ms):", abbr), f2(d.median));
  row(out, fmt::format("P99 {} (ms):", abbr), f2(d.p99));
}

}  // namespace

std::string format_metrics_table(const BenchMetrics& m, const std::string& title) {
  std::string out = fmt::format("{:=^50}\n", " " + title + " ");
  row(out, "Successful requests:", fmt::format("{}", m.completed));
  if (m.failed > 0) row(out, "Failed requests:", fmt::format("{}", m.failed));
  row(out, "Benchmark duration (s):", f2(m.duration_s));
  row(out, "Total input tokens:", fmt::format("{}", m.total_input_tokens));
  row(out, "Total generated tokens:", fmt::format("{}", m.total_output_tokens));
  row(out, "Request throughput (req/s):", f2(m.request_throughput));
  row(out, "Output token throughput (tok/s):", f2(m.output_throughput));
  row(out, "Total Token throughput (tok/s):", f2(m.total_token_throughput));
  section(out, "Time to First Token");
  dist_rows(out, "TTFT", m.ttft_ms);
  section(out, "Time per Output Token (excl. 1st token)");
  dist_rows(out, "TPOT", m.tpot_ms);
  section(out, "Inter-token Latency");
  dist_rows(out, "ITL", m.itl_ms);
  section(out, "End-to-end Latency");
  dist_rows(out, "E2EL", m.e2e_ms);
  section(out, "Engine");
  row(out, "Engine steps:", opt_str(m.num_steps));
  row(out, "Peak running sequences:", opt_str(m.peak_running));
  row(out, "Preemptions:", opt_str(m.num_preemptions));
  row(out, "Mean KV utilization:", pct(m.kv_utilization_mean));
  row(out, "Peak KV utilization:", pct(m.kv_utilization_peak));
  row(out, "Contiguous-reservation util.:", pct(m.contiguous_utilization_mean));
  section(out, "Prefix Cache");
  row(out, "Prefix cache hit rate:", pct(m.prefix_cache_hit_rate));
  row(out, "Prefix cache hits (tokens):", opt_str(m.prefix_cache_hits));
  row(out, "Prefix cache queries (tokens):", opt_str(m.prefix_cache_queries));
  row(out, "Cached prompt tokens (usage):", opt_str(m.cached_prompt_tokens));
  row(out, "Peak cached KV blocks:", opt_str(m.peak_cached_blocks));
  if (!m.turns.empty()) {
    section(out, "Multi-turn (per turn)");
    for (const TurnMetrics& t : m.turns) {
      row(out, fmt::format("Turn {} requests:", t.turn), fmt::format("{}", t.completed));
      row(out, fmt::format("Turn {} mean prompt / cached tokens:", t.turn),
          fmt::format("{:.1f} / {}", t.mean_prompt_tokens,
                      t.mean_cached_tokens ? fmt::format("{:.1f}", *t.mean_cached_tokens) : "n/a"));
      row(out, fmt::format("Turn {} TTFT mean / median / P99 (ms):", t.turn),
          fmt::format("{:.2f} / {:.2f} / {:.2f}", t.ttft_ms.mean, t.ttft_ms.median, t.ttft_ms.p99));
    }
  }
  out += std::string(50, '=') + "\n";
  return out;
}

}  // namespace llmserve::bench
