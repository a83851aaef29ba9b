// Process-wide structured-output counters for /metrics: grammar compile time (cache misses),
// per-token mask time, and refused constraints counted by the JSON Schema keyword (or the
// construct) their error names. Thread-safe; the server renders a snapshot.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::structured_output {

/// One histogram's state: per-bucket counts (not cumulative) over `upper_bounds` plus +Inf.
struct HistogramCounts {
  std::vector<double> upper_bounds;     // seconds, ascending
  std::vector<uint64_t> bucket_counts;  // upper_bounds.size() + 1 entries
  double sum = 0;
  uint64_t count = 0;
};

struct StatsSnapshot {
  HistogramCounts compile_seconds;  // one observation per compiled (not cached) constraint
  HistogramCounts mask_seconds;     // one observation per masked token
  /// Refused constraints by the name their error gives: the keyword of "keyword 'X'"
  /// messages, else the kind of constraint ("regex", "grammar", "json_schema").
  std::map<std::string, uint64_t> refused;
};

void record_compile_seconds(double seconds);
void record_mask_seconds(double seconds);
/// Counts one refusal of a constraint of `kind` with error `message`.
void record_refusal(std::string_view kind, std::string_view message);
StatsSnapshot stats_snapshot();

/// The label record_refusal files `message` under: the JSON Schema keyword the message names
/// ("unsupported JSON Schema keyword 'not' at ..."), else `kind`.
std::string refusal_label(std::string_view kind, std::string_view message);

}  // namespace llmserve::structured_output
