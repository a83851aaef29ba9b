// GEMM at bench-250m's shapes (dim 1024, 16 heads / 4 KV heads x 64, FFN 2816, vocab 32000):
// qkv [1536, 1024], o [1024, 1024], gate_up [5632, 1024] (gemm_silu_mul), down [1024, 2816],
// lm_head [32000, 1024], for M = 1, 8, 32, 512 and weight dtypes bf16, f32 (f16 on a subset).
//
// Variants: `ours` (kernels/gemm.h), `matmul` (the seed's row-at-a-time kernel, the old
// baseline) and `onednn` (oneDNN's matmul when built with it: f32 x f32 for f32 weights; for
// bf16 weights bf16 x bf16 -> f32, the closest it supports, x converted to bf16 inside the
// timed region). Every variant runs on ThreadPool::physical_cores() threads (oneDNN: its OpenMP
// runtime with OMP_NUM_THREADS set to the same count; our pool sleeps while oneDNN runs).
//
// The weights rotate through copies totalling > 2x the last-level cache (this machine reports
// a large L3), so every call streams its weights from DRAM as a model's forward pass does.
//
// Counters: GFLOPs (2 M N K / time), weight_GBps (weight bytes / time), pct_fma_peak and
// pct_bandwidth (fractions of machine_limits(), measured in the same process), and on `ours`:
// x_vs_matmul and x_vs_onednn (their time / ours, from the same run; > 1 means ours is faster).
// Run `ours` together with the baselines (the default) so the ratios are filled in.
#include <benchmark/benchmark.h>

#include <algorithm>
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
#include "machine_limits.h"

#ifdef LLMSERVE_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace llmserve {

// The seed's matmul (kernels/ops.h, until it is removed). ops.h declares its own
// WeightMatrix, which cannot share a translation unit with gemm.h's, so it is declared here
// with a layout-identical struct bound to the same symbol.
namespace old_ops {
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
};
void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool) __asm__(
    "_ZN8llmserve6matmulEPKflRKNS_12WeightMatrixEPfPNS_10ThreadPoolE");
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

int threads() { return ThreadPool::physical_cores(); }
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
                  size_t weight_bytes) {
  const double flops = 2.0 * static_cast<double>(m) * s.n * s.k;
  const auto& lim = limits();
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9 * iters, benchmark::Counter::kIsRate);
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(weight_bytes) * 1e-9 * iters, benchmark::Counter::kIsRate);
  // Fractions need the per-iteration time, known only after the run: kIsRate of a fraction.
  state.counters["pct_fma_peak"] = benchmark::Counter(
      100.0 * flops * 1e-9 / lim.fp32_fma_peak_gflops * iters, benchmark::Counter::kIsRate);
  state.counters["pct_bandwidth"] =
      benchmark::Counter(100.0 * static_cast<double>(weight_bytes) * 1e-9 /
                             lim.read_bandwidth_gbs * iters,
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = threads();
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

void BM_Ours(benchmark::State& state, ShapeDef s, DType dtype) {
  const int64_t m = state.range(0);
  const Weights w = weights(s, dtype);
  const auto x = random_x(m * s.k);
  std::vector<float> y(static_cast<size_t>(m * s.n));
  size_t c = 0;
  limits();
  Timer t;
  for (auto _ : state) {
    const WeightMatrix& wm = w.copies[c++ % w.copies.size()];
    if (s.silu) {
      gemm_silu_mul(x.data(), m, wm, y.data(), &pool());
    } else {
      gemm(x.data(), m, wm, y.data(), &pool());
    }
    benchmark::ClobberMemory();
  }
  const double per_iter = t.seconds() / static_cast<double>(state.iterations());
  set_counters(state, s, dtype, m, w.bytes);
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
    old_ops::WeightMatrix ow{wm.data, wm.dtype, wm.rows, wm.cols};
    old_ops::matmul(x.data(), m, ow, y.data(), &pool());
    benchmark::ClobberMemory();
  }
  baseline_seconds("matmul")[key(s, dtype, m)] = t.seconds() / static_cast<double>(state.iterations());
  set_counters(state, s, dtype, m, w.bytes);
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
  baseline_seconds("onednn")[key(s, dtype, m)] = t.seconds() / static_cast<double>(state.iterations());
  set_counters(state, s, dtype, m, w.bytes);
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
        benchmark::RegisterBenchmark(("ours/" + suffix).c_str(), BM_Ours, s, dtype)
            ->Arg(m)->UseRealTime()->MinTime(min_time)->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace llmserve

int main(int argc, char** argv) {
  // oneDNN (Debian's build) threads with OpenMP: same thread count as our pool.
  const std::string n = std::to_string(llmserve::ThreadPool::physical_cores());
  setenv("OMP_NUM_THREADS", n.c_str(), 0);
  benchmark::Initialize(&argc, argv);
  llmserve::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
