#include "bench/roofline.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>

#include <fmt/format.h>

#include "common/check.h"
#include "common/thread_pool.h"

namespace llmserve::bench {
namespace {

/// Sum of n floats (n a multiple of 32) with four 256-bit accumulators: loads, no stores.
float sum_range(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

}  // namespace

double probe_read_bandwidth(ThreadPool& pool, int64_t bytes, int passes) {
  LLMS_CHECK(bytes >= (int64_t{1} << 20) && passes >= 1, "probe_read_bandwidth: {} bytes, {} passes",
             bytes, passes);
  constexpr int64_t kPiece = 1024;  // floats per parallel item (4 KiB)
  const int64_t n = bytes / sizeof(float) / kPiece * kPiece;
  std::unique_ptr<float, decltype(&std::free)> buf(
      static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float))), &std::free);
  if (!buf) throw std::bad_alloc();
  float* p = buf.get();
  pool.parallel_for(n, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, 1.0f); }, 1 << 20);
  std::atomic<float> sink{0};
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n / kPiece, [&](int64_t b, int64_t e) {
      const float s = sum_range(p + b * kPiece, (e - b) * kPiece);
      sink.store(sink.load(std::memory_order_relaxed) + s, std::memory_order_relaxed);
    }, 1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n) * sizeof(float) / s / 1e9);
  }
  return best;
}

double DecodeRoofline::roofline_tok_s() const {
  if (bytes_per_token <= 0) return 0;
  return (bandwidth_before_gbs + bandwidth_after_gbs) / 2 * 1e9 / static_cast<double>(bytes_per_token);
}

std::optional<double> decode_tok_s(const BenchMetrics& m) {
  if (!(m.tpot_ms.median > 0)) return std::nullopt;
  return 1000.0 / m.tpot_ms.median;
}

nlohmann::json roofline_to_json(const DecodeRoofline& r, const BenchMetrics& m) {
  const std::optional<double> d = decode_tok_s(m);
  const double roof = r.roofline_tok_s();
  nlohmann::json j = {{"bytes_per_token", r.bytes_per_token},
                      {"read_bandwidth_before_gbs", r.bandwidth_before_gbs},
                      {"read_bandwidth_after_gbs", r.bandwidth_after_gbs},
                      {"roofline_tok_s", roof},
                      {"decode_tok_s", nullptr},
                      {"fraction_of_roofline", nullptr}};
  if (d) {
    j["decode_tok_s"] = *d;
    if (roof > 0) j["fraction_of_roofline"] = *d / roof;
  }
  return j;
}

std::string format_roofline_table(const DecodeRoofline& r, const BenchMetrics& m) {
  auto row = [](std::string& out, const std::string& label, const std::string& value) {
    out += fmt::format("{:<40} {:<10}\n", label, value);
  };
  std::string out = fmt::format("{:-^50}\n", "Decode Roofline");
  const std::optional<double> d = decode_tok_s(m);
  const double roof = r.roofline_tok_s();
  row(out, "Weight bytes read per token (MB):", fmt::format("{:.1f}", r.bytes_per_token / 1e6));
  row(out, "Read bandwidth before / after (GB/s):",
      fmt::format("{:.1f} / {:.1f}", r.bandwidth_before_gbs, r.bandwidth_after_gbs));
  row(out, "Roofline (tok/s):", fmt::format("{:.1f}", roof));
  row(out, "Decode, 1 / median TPOT (tok/s):", d ? fmt::format("{:.1f}", *d) : "n/a");
  std::string frac = "n/a";
  if (d && roof > 0) {
    frac = fmt::format("{:.1f}%", *d / roof * 100);
    if (*d > roof) frac += " (above: the weights fit in the cache)";
  }
  row(out, "Decode / roofline:", frac);
  out += fmt::format("{:=^50}\n", "");
  return out;
}

}  // namespace llmserve::bench
