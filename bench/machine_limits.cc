#include "machine_limits.h"

#include <immintrin.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include "bench/roofline.h"
#include "common/thread_pool.h"
#include "kernels/cpu/cpu_features.h"

// ---- allocation counter ------------------------------------------------------------------
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void note_alloc(void* p) {
  if (p == nullptr) return;
  const int64_t now = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                      static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void note_free(void* p) {
  if (p != nullptr) g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
}
void* counted_alloc(size_t n, size_t align) {
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(n == 0 ? 1 : n)
                : std::aligned_alloc(align, (std::max<size_t>(n, 1) + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
void counted_free(void* p) {
  note_free(p);
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted_alloc(n, 0); }
void* operator new[](size_t n) { return counted_alloc(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return counted_alloc(n, size_t(a)); }
void* operator new[](size_t n, std::align_val_t a) { return counted_alloc(n, size_t(a)); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { counted_free(p); }

namespace llmserve::bench {

int64_t bench_copies(int64_t streamed) {
  const char* env = std::getenv("LLMSERVE_BENCH_COPIES");
  return env != nullptr ? std::max(1, std::atoi(env)) : streamed;
}

int64_t live_heap_bytes() { return g_live.load(); }
int64_t peak_heap_bytes() { return g_peak.load(); }
void reset_peak_heap_bytes() { g_peak.store(g_live.load()); }

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The read-bandwidth probe is bench --roofline's (src/bench/roofline.h), over 1 GiB.
double measure_bandwidth(ThreadPool& pool) { return probe_read_bandwidth(pool, int64_t{1} << 30, 4); }

constexpr int64_t kPeakIters = 20'000'000;

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.0001f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  float s = 0;
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) s += acc[i][0];
  return s;
}

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.0001f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  float s = 0;
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) s += _mm512_reduce_add_ps(acc[i]);
  return s;
}

__attribute__((target("avx512f,avx512bf16"))) float bf16_loop(int64_t iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3800);  // bf16 2^-15
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  float s = 0;
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) s += _mm512_reduce_add_ps(acc[i]);
  return s;
}

// Runs loop(iters) on every thread; returns GFLOP/s given flops per (iteration x thread).
template <typename Loop>
double measure_peak(ThreadPool& pool, Loop loop, double flops_per_iter) {
  std::atomic<float> sink{0};
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(pool.num_threads(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sink.store(sink.load() + loop(kPeakIters));
    }, 1);
    best = std::max(best, flops_per_iter * kPeakIters * pool.num_threads() /
                              seconds_since(t0) / 1e9);
  }
  return best;
}

}  // namespace

const MachineLimits& machine_limits(int threads) {
  static MachineLimits limits = [threads] {
    MachineLimits m;
    m.threads = std::max(1, threads);
    ThreadPool pool(m.threads);
    m.read_bandwidth_gbs = measure_bandwidth(pool);
    const llmserve::CpuIsa isa = llmserve::cpu_isa();
    if (isa >= llmserve::CpuIsa::kAvx512) {
      m.fp32_fma_peak_gflops = measure_peak(pool, fma_loop_avx512, 12 * 16 * 2);
    } else {
      m.fp32_fma_peak_gflops = measure_peak(pool, fma_loop_avx2, 12 * 8 * 2);
    }
    if (isa >= llmserve::CpuIsa::kAvx512Bf16)
      m.bf16_dot_peak_gflops = measure_peak(pool, bf16_loop, 12 * 16 * 4);
    std::fprintf(stderr,
                 "machine limits (%d threads): read bandwidth %.1f GB/s, fp32 FMA peak %.0f "
                 "GFLOP/s, bf16 dot peak %.0f GFLOP/s\n",
                 m.threads, m.read_bandwidth_gbs, m.fp32_fma_peak_gflops,
                 m.bf16_dot_peak_gflops);
    return m;
  }();
  return limits;
}

}  // namespace llmserve::bench
