// The decode roofline beside a benchmark run (bench --roofline): one stream's decode reads every
// weight matrix once per token (cli/weight_cost.h decode_bytes_per_token; a MoE model's active
// experts only), so its speed limit is the machine's read bandwidth over those bytes. The
// bandwidth is probed in the same process just before and just after the timed run: on a shared
// machine it moves between phases (40-65 GB/s within one session on the 2-core Zen 5 VMs of
// docs/performance.md), and a probe a minute away can measure another phase.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"

namespace llmserve {

class ThreadPool;

namespace bench {

/// Streaming read bandwidth, GB/s (1e9 bytes/s): the pool's threads sum disjoint contiguous
/// parts of a `bytes` buffer (make it far larger than the last-level cache), best of `passes`
/// passes after a first touch that is not timed. bytes >= 1 MiB; throws std::bad_alloc when the
/// buffer cannot be allocated.
double probe_read_bandwidth(ThreadPool& pool, int64_t bytes, int passes);

/// One stream's decode against the bytes roofline.
struct DecodeRoofline {
  int64_t bytes_per_token = 0;      // weights read per decoded token (file bytes)
  double bandwidth_before_gbs = 0;  // probe_read_bandwidth just before the timed run
  double bandwidth_after_gbs = 0;   // ... and just after it

  /// Tokens per second at the mean of the two probes' bandwidth (0 without bytes).
  double roofline_tok_s() const;
};

/// Decode speed = 1000 / median TPOT (ms), and its fraction of the roofline (nullopt without
/// a TPOT sample, e.g. one-token outputs).
std::optional<double> decode_tok_s(const BenchMetrics& m);

/// {"bytes_per_token", "read_bandwidth_before_gbs", "read_bandwidth_after_gbs",
/// "roofline_tok_s", "decode_tok_s", "fraction_of_roofline"} (the last two null without TPOT).
nlohmann::json roofline_to_json(const DecodeRoofline& r, const BenchMetrics& m);

/// The "Decode Roofline" section in format_metrics_table's style.
std::string format_roofline_table(const DecodeRoofline& r, const BenchMetrics& m);

}  // namespace bench
}  // namespace llmserve
