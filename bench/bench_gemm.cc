// GEMM at bench-250m's shapes (dim 1024, 16 heads / 4 KV heads x 64, FFN 2816, vocab 32000):
// qkv [1536, 1024], o [1024, 1024], gate_up [5632, 1024] (gemm_silu_mul), down [1024, 2816],
// lm_head [32000, 1024], for M = 1, 8, 32, 512 and weight dtypes bf16, f32 (f16 on a subset).
//
// Variants: `ours` (kernels/gemm.h on prepare_weight'ed weights, as the model loads them),
// `ours_raw` (row-major weights straight from the file, no prepare_weight), `matmul` (the seed's row-at-a-time kernel, the old
// baseline) and `onednn` (oneDNN's matmul when built with it: f32 x f32 for f32 weights; for
// bf16 weights bf16 x bf16 -> f32, the closest it supports, x converted to bf16 inside the
// timed region). Every variant runs on ThreadPool::physical_cores() threads, or
// LLMSERVE_BENCH_THREADS (oneDNN: its OpenMP runtime with OMP_NUM_THREADS set to the same
// count; our pool's workers sleep while oneDNN runs and OpenMP's while ours runs).
//
// The weights rotate through copies totalling > 2x the last-level cache (this machine reports
// a large L3), so every call streams its weights from DRAM as a model's forward pass does.
//
// Counters: GFLOPs (2 M N K / time), weight_GBps (weight bytes / time), pct_fma_peak and
// pct_bandwidth (fractions of machine_limits(), measured in the same process), and on `ours`:
// x_vs_matmul and x_vs_onednn (their time / ours, from the same run; > 1 means ours is faster).
// Run `ours` together with the baselines (the default) so the ratios are filled in.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "machine_limits.h"

#ifdef LLMSERVE_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace llmserve {

// The seed's matmul (the old baseline; removed from kernels/ops.h by issue 4), kept here so
// the comparison survives its removal. Row at a time: convert one W row to f32 (to_f32), then
// an AVX2 dot product (dot_f32, both still in kernels/ops.h) with each of the M activation rows.
namespace old_ops {
void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool) {
  const int64_t n = w.rows, k = w.cols;
  const size_t elem = dtype_size(w.dtype);
  auto body = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row_buf;
    for (int64_t r = begin; r < end; ++r) {
      const float* row;
      if (w.dtype == DType::kF32) {
        row = static_cast<const float*>(w.data) + r * k;
      } else {
        row_buf.resize(k);
        to_f32(static_cast<const uint8_t*>(w.data) + r * k * elem, w.dtype, k, row_buf.data());
        row = row_buf.data();
      }
      for (int64_t i = 0; i < m; ++i) y[i * n + r] = dot_f32(x + i * k, row, k);
    }
  };
  // Below ~64K multiply-adds the fork/join costs more than it saves.
  if (pool == nullptr || n * k * m < (1 << 16)) {
    body(0, n);
  } else {
    pool->parallel_for(n, body, 16);
  }
}
}  // namespace old_ops

namespace {

struct ShapeDef {
  const char* name;
  int64_t n, k;
  bool silu;
};
constexpr ShapeDef kShapes[] = {
    {"qkv", 1536, 1024, false},    {"o", 1024, 1024, false},       {"gate_up", 5632, 1024, true},
    {"down", 1024, 2816, false},   {"lm_head", 32000, 1024, false},
};
constexpr int64_t kMs[] = {1, 8, 32, 512};

/// ThreadPool::physical_cores(), or LLMSERVE_BENCH_THREADS (e.g. 1 for a single-thread
/// comparison that a busy shared machine disturbs less).
int threads() {
  static const int n = [] {
    const char* e = std::getenv("LLMSERVE_BENCH_THREADS");
    return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : ThreadPool::physical_cores();
  }();
  return n;
}
ThreadPool& pool() {
  static ThreadPool p(threads());
  return p;
}
const bench::MachineLimits& limits() { return bench::machine_limits(threads()); }

/// 640 MiB of valid 16-bit values (bf16 in +-[2^-6, 1); read as f16 they are in +-[1, 2); as
/// f32 pairs they are bf16-range floats): all dtypes' weight copies are views into it.
const uint16_t* arena(size_t* bytes) {
  static constexpr size_t kBytes = size_t{640} << 20;
  static const uint16_t* data = [] {
    auto* p = static_cast<uint16_t*>(std::aligned_alloc(4096, kBytes));
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < kBytes / 2; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      const uint16_t exp = 0x79 + static_cast<uint16_t>((s >> 8) % 6);
      p[i] = static_cast<uint16_t>(((s >> 20) & 0x8000) | (exp << 7) | (s & 0x7f));
    }
    return p;
  }();
  *bytes = kBytes;
  return data;
}

/// Rotating weight copies for one shape: copy c starts at c * stride bytes into the arena.
struct Weights {
  std::vector<WeightMatrix> copies;
  size_t bytes = 0;
};
Weights weights(const ShapeDef& s, DType dtype) {
  Weights w;
  const int64_t rows = s.silu ? s.n : s.n;  // gate_up's n already counts both halves
  w.bytes = static_cast<size_t>(rows * s.k) * dtype_size(dtype);
  const size_t stride = (w.bytes + 4095) / 4096 * 4096;
  size_t total;
  const auto* base = reinterpret_cast<const uint8_t*>(arena(&total));
  const size_t copies = std::max<size_t>(1, total / stride);
  for (size_t c = 0; c < copies; ++c) {
    WeightMatrix m;
    m.data = base + c * stride;
    m.dtype = dtype;
    m.rows = rows;
    m.cols = s.k;
    w.copies.push_back(m);
  }
  return w;
}

std::vector<float> random_x(int64_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

std::string key(const ShapeDef& s, DType dtype, int64_t m) {
  return std::string(s.name) + "/" + std::string(dtype_name(dtype)) + "/" + std::to_string(m);
}
std::map<std::string, double>& baseline_seconds(const char* variant) {
  static std::map<std::string, std::map<std::string, double>> t;
  return t[variant];
}

void set_counters(benchmark::State& state, const ShapeDef& s, DType dtype, int64_t m,
                  size_t weight_bytes, double seconds_per_iter) {
  const double gflops = 2.0 * static_cast<double>(m) * s.n * s.k / seconds_per_iter * 1e-9;
  const double gbps = static_cast<double>(weight_bytes) / seconds_per_iter * 1e-9;
  const auto& lim = limits();
  state.counters["GFLOPs"] = gflops;
  state.counters["weight_GBps"] = gbps;
  state.counters["pct_fma_peak"] = 100.0 * gflops / lim.fp32_fma_peak_gflops;
  state.counters["pct_bandwidth"] = 100.0 * gbps / lim.read_bandwidth_gbs;
  state.SetLabel(std::string(s.name) + " " + std::string(dtype_name(dtype)) + " " + gemm_isa());
}

/// Wall time per iteration measured around the loop (Google Benchmark's own figure is only
/// available after the function returns).
struct Timer {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

/// prepare_weight'ed copies (heap) of one shape's weights, > 2x the LLC in total; kept while
/// consecutive benchmarks use the same shape and dtype.
const std::vector<WeightMatrix>& prepared(const ShapeDef& s, DType dtype) {
  static std::string cached_key;
  static std::vector<WeightMatrix> cached;
  const std::string k = std::string(s.name) + "/" + std::string(dtype_name(dtype));
  if (k != cached_key) {
    cached.clear();
    const Weights w = weights(s, dtype);
    const size_t copies =
        std::min(w.copies.size(), std::max<size_t>(2, (size_t{560} << 20) / w.bytes));
    for (size_t c = 0; c < copies; ++c) {
      cached.push_back(w.copies[c]);
      prepare_weight(cached.back());
    }
    cached_key = k;
  }
  return cached;
}

/// `ours`: the model's path (weights prepared at load time); `ours_raw`: row-major weights
/// straight from the file (no prepare_weight).
void BM_Ours(benchmark::State& state, ShapeDef s, DType dtype, bool prepare) {
  const int64_t m = state.range(0);
  const Weights raw = weights(s, dtype);
  const std::vector<WeightMatrix>& copies = prepare ? prepared(s, dtype) : raw.copies;
  const auto x = random_x(m * s.k);
  std::vector<float> y(static_cast<size_t>(m * s.n));
  size_t c = 0;
  limits();
  Timer t;
  for (auto _ : state) {
    const WeightMatrix& wm = copies[c++ % copies.size()];
    if (s.silu) {
      gemm_silu_mul(x.data(), m, wm, y.data(), &pool());
    } else {
      gemm(x.data(), m, wm, y.data(), &pool());
    }
    benchmark::ClobberMemory();
  }
  const double per_iter = t.seconds() / static_cast<double>(state.iterations());
  set_counters(state, s, dtype, m, raw.bytes, per_iter);
  for (const char* v : {"matmul", "onednn"}) {
    auto& b = baseline_seconds(v);
    auto it = b.find(key(s, dtype, m));
    if (it != b.end()) state.counters[std::string("x_vs_") + v] = it->second / per_iter;
  }
}

void BM_OldMatmul(benchmark::State& state, ShapeDef s, DType dtype) {
  const int64_t m = state.range(0);
  const Weights w = weights(s, dtype);
  const auto x = random_x(m * s.k);
  std::vector<float> y(static_cast<size_t>(m * s.n));
  size_t c = 0;
  limits();
  Timer t;
  for (auto _ : state) {
    const WeightMatrix& wm = w.copies[c++ % w.copies.size()];
    old_ops::matmul(x.data(), m, wm, y.data(), &pool());
    benchmark::ClobberMemory();
  }
  const double per_iter = t.seconds() / static_cast<double>(state.iterations());
  baseline_seconds("matmul")[key(s, dtype, m)] = per_iter;
  set_counters(state, s, dtype, m, w.bytes, per_iter);
}

#ifdef LLMSERVE_HAVE_DNNL
void BM_OneDnn(benchmark::State& state, ShapeDef s, DType dtype) {
  using dnnl::memory;
  const int64_t m = state.range(0);
  const Weights w = weights(s, dtype);
  const auto x = random_x(m * s.k);
  std::vector<float> y(static_cast<size_t>(m * s.n));
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const bool bf16 = dtype == DType::kBF16;
  const bool f16 = dtype == DType::kF16;
  const auto wdt = bf16 ? memory::data_type::bf16 : f16 ? memory::data_type::f16 : memory::data_type::f32;
  const memory::desc src_md({m, s.k}, wdt, memory::format_tag::ab);
  // W[N, K] row-major is the [K, N] weights tensor in "ba" (column-major) layout.
  const memory::desc wei_md({s.k, s.n}, wdt, memory::format_tag::ba);
  const memory::desc dst_md({m, s.n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), eng);
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: no matmul for this dtype: ") + e.what()).c_str());
    return;
  }
  dnnl::matmul prim(pd);
  // Activations in the weights' type (f32 stays f32; bf16/f16 converted each call).
  const memory::desc xf32_md({m, s.k}, memory::data_type::f32, memory::format_tag::ab);
  memory xf32(xf32_md, eng, const_cast<float*>(x.data()));
  memory src(src_md, eng);
  dnnl::reorder to_src(xf32, src);
  memory dst(dst_md, eng, y.data());
  memory wei(wei_md, eng, const_cast<void*>(w.copies[0].data));
  size_t c = 0;
  limits();
  Timer t;
  for (auto _ : state) {
    const WeightMatrix& wm = w.copies[c++ % w.copies.size()];
    wei.set_data_handle(const_cast<void*>(wm.data));
    if (wdt == memory::data_type::f32) {
      src.set_data_handle(const_cast<float*>(x.data()));
    } else {
      to_src.execute(strm, xf32, src);
    }
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    strm.wait();
    benchmark::ClobberMemory();
  }
  const double per_iter = t.seconds() / static_cast<double>(state.iterations());
  baseline_seconds("onednn")[key(s, dtype, m)] = per_iter;
  set_counters(state, s, dtype, m, w.bytes, per_iter);
  state.SetLabel(std::string(s.name) + " " + std::string(dtype_name(dtype)) + " " +
                 pd.impl_info_str());
}
#endif

void register_all() {
  for (const ShapeDef& s : kShapes) {
    for (DType dtype : {DType::kBF16, DType::kF32, DType::kF16}) {
      // f16 on a subset (the kernels differ from bf16 only in the conversion).
      if (dtype == DType::kF16 && std::string(s.name) != "qkv" && std::string(s.name) != "down")
        continue;
      for (int64_t m : kMs) {
        const std::string suffix = std::string(s.name) + "/" + std::string(dtype_name(dtype));
        const double min_time = m >= 512 ? 0.3 : 0.2;
        benchmark::RegisterBenchmark(("matmul/" + suffix).c_str(), BM_OldMatmul, s, dtype)
            ->Arg(m)->UseRealTime()->MinTime(min_time)->Unit(benchmark::kMicrosecond);
#ifdef LLMSERVE_HAVE_DNNL
        benchmark::RegisterBenchmark(("onednn/" + suffix).c_str(), BM_OneDnn, s, dtype)
            ->Arg(m)->UseRealTime()->MinTime(min_time)->Unit(benchmark::kMicrosecond);
#endif
        benchmark::RegisterBenchmark(("ours_raw/" + suffix).c_str(), BM_Ours, s, dtype, false)
            ->Arg(m)->UseRealTime()->MinTime(min_time)->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("ours/" + suffix).c_str(), BM_Ours, s, dtype, true)
            ->Arg(m)->UseRealTime()->MinTime(min_time)->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace llmserve

int main(int argc, char** argv) {
  // oneDNN (Debian's build) threads with OpenMP: same thread count as our pool.
  const std::string n = std::to_string(llmserve::threads());
  setenv("OMP_NUM_THREADS", n.c_str(), 0);
  benchmark::Initialize(&argc, argv);
  llmserve::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
