// A strict reader of the Prometheus text exposition format 0.0.4 for tests of GET /metrics:
// it parses every sample and lists every rule of the format the page breaks.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace llmserve::testing {

struct PrometheusPage {
  /// Every sample by its series as written, e.g. `a_total{model_name="m"}` -> 3.
  std::map<std::string, double> samples;
  /// Family name -> type ("counter", "gauge", "histogram", ...), from the # TYPE lines.
  std::map<std::string, std::string> types;
  /// Broken rules, one line each; empty when the page is valid. Checked: lines end in \n;
  /// HELP and TYPE at most once per family and TYPE before its samples; every sample belongs
  /// to a family with a TYPE and each family's samples are contiguous; metric and label names
  /// are valid, label values quoted and escaped, values parse; no series twice; counters
  /// are >= 0; per histogram series: le ascending, bucket counts cumulative (non-decreasing),
  /// a last bucket le="+Inf" equal to _count, and a _sum.
  std::vector<std::string> errors;

  /// The value of `series` (exactly as written), NaN when absent.
  double value(const std::string& series) const;
  std::string error_text() const;
};

PrometheusPage parse_prometheus_text(const std::string& text);

}  // namespace llmserve::testing
