// This machine's limits, measured once per process so that every benchmark figure can also be
// printed as a fraction of what the hardware can do (the machines are shared and noisy, so
// limits are measured in the same run, never hard-coded).
#pragma once

#include <cstdint>

namespace llmserve::bench {

struct MachineLimits {
  int threads = 0;
  /// Streaming read bandwidth, GB/s (1e9 bytes/s): `threads` threads summing disjoint
  /// parts of a 1 GiB buffer (far larger than the caches), best of a few passes.
  double read_bandwidth_gbs = 0;
  /// float32 FMA peak, GFLOP/s (2 flops per lane per FMA): independent vfmadd chains on
  /// every thread (512-bit when AVX-512 is present, else 256-bit).
  double fp32_fma_peak_gflops = 0;
  /// AVX512-BF16 dot-product peak, GFLOP/s (vdpbf16ps: 2 multiply-adds per f32 lane);
  /// 0 when the CPU lacks AVX512-BF16.
  double bf16_dot_peak_gflops = 0;
};

/// Measures (first call, ~1-2 s) and caches the limits for `threads` threads.
/// Prints one line to stderr describing them.
const MachineLimits& machine_limits(int threads);

/// Allocation counter for "peak bytes allocated" figures: counts operator new/delete in the
/// program that links machine_limits.cc. reset_peak() sets the peak to the current live bytes.
int64_t live_heap_bytes();
int64_t peak_heap_bytes();
void reset_peak_heap_bytes();

/// How many copies of its data a benchmark cycles through: LLMSERVE_BENCH_COPIES when set (at
/// least 1; 1 keeps the data cache-resident, measuring the kernel's arithmetic alone), else
/// `streamed` (enough copies that every call reads from DRAM, as in a real step).
int64_t bench_copies(int64_t streamed);

}  // namespace llmserve::bench
