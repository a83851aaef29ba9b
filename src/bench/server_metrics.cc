#include "bench/server_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "bench/metrics.h"

namespace llmserve::bench {
namespace {

/// The value of label `key` in a `{a="x",b="y"}` label set (escapes \" \\ \n kept simple:
/// a backslash takes the next character), or nullopt when absent or malformed.
std::optional<std::string> label_value(std::string_view labels, std::string_view key) {
  size_t i = 0;
  while (i < labels.size()) {
    const size_t eq = labels.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() || labels[eq + 1] != '"')
      return std::nullopt;
    std::string_view name = labels.substr(i, eq - i);
    while (!name.empty() && (name.front() == ',' || name.front() == ' ')) name.remove_prefix(1);
    std::string value;
    size_t j = eq + 2;
    for (; j < labels.size() && labels[j] != '"'; ++j) {
      if (labels[j] == '\\' && j + 1 < labels.size()) ++j;
      value += labels[j];
    }
    if (j >= labels.size()) return std::nullopt;
    if (name == key) return value;
    i = j + 1;
  }
  return std::nullopt;
}

std::optional<double> get(const std::map<std::string, double>& s, const std::string& name) {
  auto it = s.find(name);
  if (it == s.end()) return std::nullopt;
  return it->second;
}

/// last - first of a counter present in both scrapes.
std::optional<int64_t> delta(const std::vector<MetricsScrape>& scrapes, const std::string& name) {
  if (scrapes.size() < 2) return std::nullopt;
  const auto first = get(scrapes.front().samples, name), last = get(scrapes.back().samples, name);
  if (!first || !last) return std::nullopt;
  return std::llround(*last - *first);
}

}  // namespace

std::map<std::string, double> read_prometheus_samples(std::string_view text,
                                                      const std::string& model) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos || name_end == 0) continue;
    const std::string name(line.substr(0, name_end));
    size_t value_start = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.rfind('}');
      if (close == std::string_view::npos || close < name_end) continue;
      const std::string_view labels = line.substr(name_end + 1, close - name_end - 1);
      if (!model.empty()) {
        const std::optional<std::string> m = label_value(labels, "model_name");
        if (m && *m != model) continue;
      }
      value_start = close + 1;
    }
    // "<value>" or "<value> <timestamp>".
    const std::string rest(line.substr(value_start));
    char* parse_end = nullptr;
    const double v = std::strtod(rest.c_str(), &parse_end);
    if (parse_end == rest.c_str()) continue;
    out[name] += v;
  }
  return out;
}

ServerEngineMetrics summarize_scrapes(const std::vector<MetricsScrape>& scrapes) {
  ServerEngineMetrics m;
  m.num_scrapes = static_cast<int64_t>(scrapes.size());
  m.num_preemptions = delta(scrapes, "vllm:num_preemptions_total");
  m.num_steps = delta(scrapes, "llmserve:engine_steps_total");
  m.prefix_cache_queries = delta(scrapes, "vllm:prefix_cache_queries_total");
  m.prefix_cache_hits = delta(scrapes, "vllm:prefix_cache_hits_total");
  std::vector<double> util;
  for (const MetricsScrape& s : scrapes) {
    if (auto running = get(s.samples, "vllm:num_requests_running"))
      m.peak_running = std::max(m.peak_running.value_or(0), static_cast<int32_t>(*running));
    if (auto cached = get(s.samples, "llmserve:kv_blocks_cached"))
      m.peak_cached_blocks = std::max(m.peak_cached_blocks.value_or(0), static_cast<int32_t>(*cached));
    const auto used = get(s.samples, "llmserve:kv_blocks_used");
    const auto u = get(s.samples, "llmserve:kv_utilization");
    if (used && u && *used > 0) util.push_back(*u);
  }
  if (!util.empty()) {
    m.kv_utilization_mean = mean(util);
    m.kv_utilization_peak = *std::max_element(util.begin(), util.end());
  }
  return m;
}

}  // namespace llmserve::bench
