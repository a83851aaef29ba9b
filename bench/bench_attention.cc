// Attention benchmarks (Google Benchmark):
//  - Prefill: one sequence of N causal prompt tokens (N = 512, 2048, 8192), head_dim 64
//    (16 query heads) and 128 (32 query heads), GQA ratios 1/4/8, f32 KV, block size 16 with
//    a shuffled block table. naive (materialises S and P) vs flash, in the same run: time,
//    speedup, peak extra heap bytes per call, GFLOP/s and % of this machine's fp32 FMA peak.
//    FLOPs count the causal work only (4 * d * heads * N(N+1)/2), for both backends.
//    naive at N = 8192 would take minutes per call; it is skipped and the flash row reports
//    a speedup projected from naive at N = 2048 x 16 (naive is exactly O(N^2 d): it computes
//    the full S before masking).
//  - Paged decode: 32 sequences x context 4096, 16 query heads / 4 KV heads, head_dim 64
//    (bench-250m's shape), block size 16, KV f32 and bf16: achieved GB/s of K+V read and %
//    of the measured read bandwidth. The KV of several "layers" (>= 1 GiB in all, far more
//    than the last-level cache) is cycled so every call reads from DRAM, as in a real step.
// Threads = physical cores. Flash rows with /isa:1 force the AVX2 kernels for comparison.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "machine_limits.h"

namespace {

using namespace llmserve;
using Clock = std::chrono::steady_clock;

ThreadPool& pool() {
  static ThreadPool p(ThreadPool::physical_cores());
  return p;
}
const bench::MachineLimits& limits() { return bench::machine_limits(ThreadPool::physical_cores()); }

void fill_random(void* data, DType dt, int64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  std::vector<float> buf(4096);
  for (int64_t i = 0; i < n; i += 4096) {
    const int64_t m = std::min<int64_t>(4096, n - i);
    for (int64_t j = 0; j < m; ++j) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      buf[j] = static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) / (1 << 23);
    }
    store_kv_values(data, dt, i, buf.data(), m);
  }
}

// KV-cache storage: 2 MiB aligned (64-byte aligned rows; set LLMSERVE_BENCH_HUGEPAGES=1 to
// also ask for transparent huge pages).
struct AlignedBytes {
  uint8_t* p = nullptr;
  size_t n = 0;
  explicit AlignedBytes(size_t bytes) : n((bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20)) {
    p = static_cast<uint8_t*>(std::aligned_alloc(2u << 20, n));
    if (p == nullptr) std::abort();
    if (std::getenv("LLMSERVE_BENCH_HUGEPAGES") != nullptr) madvise(p, n, MADV_HUGEPAGE);
  }
  AlignedBytes(AlignedBytes&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  AlignedBytes(const AlignedBytes&) = delete;
  ~AlignedBytes() { std::free(p); }
  uint8_t* data() { return p; }
};

// A paged batch of `seqs` sequences (num_query, ctx) over `layers` KV caches.
struct Paged {
  AttentionShape shape;
  DType dtype = DType::kF32;
  int32_t block_size = 16;
  std::vector<int32_t> qsl, lens, tables;
  std::vector<int64_t> slots;
  int32_t max_blocks = 0;
  std::vector<AlignedBytes> k, v;  // per layer
  std::vector<float> q, out;
  AttentionMetadata meta;

  Paged(int32_t n_heads, int32_t n_kv, int32_t hd, DType dt, int32_t n_seqs, int32_t num_query,
        int32_t ctx, int layers)
      : dtype(dt) {
    shape = {n_heads, n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
    max_blocks = (ctx + block_size - 1) / block_size;
    const int32_t n_blocks = max_blocks * n_seqs;
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(42));
    tables = ids;
    qsl.push_back(0);
    for (int32_t s = 0; s < n_seqs; ++s) {
      qsl.push_back(qsl.back() + num_query);
      lens.push_back(ctx);
      for (int32_t p = ctx - num_query; p < ctx; ++p)
        slots.push_back(static_cast<int64_t>(tables[s * max_blocks + p / block_size]) * block_size +
                        p % block_size);
    }
    const int64_t elems = static_cast<int64_t>(n_blocks) * block_size * n_kv * hd;
    for (int l = 0; l < layers; ++l) {
      k.emplace_back(elems * dtype_size(dt));
      v.emplace_back(elems * dtype_size(dt));
      fill_random(k.back().data(), dt, elems, 2 * l + 1);
      fill_random(v.back().data(), dt, elems, 2 * l + 2);
    }
    q.resize(static_cast<size_t>(qsl.back()) * n_heads * hd);
    fill_random(q.data(), DType::kF32, static_cast<int64_t>(q.size()), 99);
    out.resize(q.size());
    meta.num_seqs = n_seqs;
    meta.num_tokens = qsl.back();
    meta.query_start_loc = qsl.data();
    meta.seq_lens = lens.data();
    meta.block_tables = tables.data();
    meta.max_blocks_per_seq = max_blocks;
    meta.slot_mapping = slots.data();
    meta.block_size = block_size;
  }
  KVCacheLayer cache(int layer) { return {k[layer].data(), v[layer].data(), dtype}; }
  // Bytes of K and V one forward reads (every context position of every KV head once).
  double kv_bytes() const {
    double b = 0;
    for (int32_t c : lens) b += 2.0 * c * shape.n_kv_heads * shape.head_dim * dtype_size(dtype);
    return b;
  }
};

std::unique_ptr<AttentionBackend> make(const char* name) {
  auto b = make_attention_backend(name);
  if (!b.ok()) std::abort();
  return std::move(b).value();
}

// Peak heap bytes one call allocates beyond what was live before it.
int64_t extra_heap_bytes(const std::function<void()>& call) {
  const int64_t live = bench::live_heap_bytes();
  bench::reset_peak_heap_bytes();
  call();
  return bench::peak_heap_bytes() - live;
}

// ---------------------------------------------------------------------------------------
// Prefill.

using PrefillKey = std::tuple<int, int, int>;  // N, head_dim, ratio
std::map<PrefillKey, double>& naive_seconds() {
  static std::map<PrefillKey, double> m;
  return m;
}

Paged& prefill_batch(int n, int hd, int ratio) {
  static std::unique_ptr<Paged> cached;
  static PrefillKey key{-1, -1, -1};
  if (!cached || key != PrefillKey{n, hd, ratio}) {
    cached.reset();
    const int heads = hd == 64 ? 16 : 32;
    cached = std::make_unique<Paged>(heads, heads / ratio, hd, DType::kF32, 1, n, n, 1);
    key = {n, hd, ratio};
  }
  return *cached;
}

// args: N, head_dim, ratio, backend (0 naive, 1 flash), isa (0 native, 1 avx2)
void BM_Prefill(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), hd = static_cast<int>(state.range(1));
  const int ratio = static_cast<int>(state.range(2));
  const bool flash = state.range(3) == 1, avx2 = state.range(4) == 1;
  const PrefillKey key{n, hd, ratio};
  if (!flash && n > 2048) {
    const auto it = naive_seconds().find({2048, hd, ratio});
    const std::string proj = it == naive_seconds().end()
                                 ? std::string("")
                                 : " (projected " + std::to_string(static_cast<int>(it->second * 16)) +
                                       " s per call = N=2048 time x 16)";
    state.SkipWithError(("naive skipped at N=8192: too slow" + proj).c_str());
    for (auto _ : state) {
    }
    return;
  }
  const CpuIsa native = cpu_isa();
  if (avx2) set_cpu_isa_for_testing(CpuIsa::kAvx2);
  const auto& lim = limits();
  Paged& b = prefill_batch(n, hd, ratio);
  auto backend = make(flash ? "flash" : "naive");
  auto call = [&] {
    backend->forward(b.meta, b.shape, b.q.data(), b.cache(0), b.out.data(), &pool());
  };
  const int64_t extra = extra_heap_bytes(call);  // also a warm-up
  double secs = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    call();
    secs += std::chrono::duration<double>(Clock::now() - t0).count();
    ++iters;
    benchmark::DoNotOptimize(b.out.data());
  }
  set_cpu_isa_for_testing(native);
  const double per_call = secs / std::max<int64_t>(1, iters);
  const double flops = 4.0 * hd * b.shape.n_heads * (static_cast<double>(n) * (n + 1) / 2);
  state.counters["GFLOPs"] = flops / per_call * 1e-9;
  state.counters["pct_fma_peak"] = 100.0 * flops / per_call * 1e-9 / lim.fp32_fma_peak_gflops;
  state.counters["extra_heap_MB"] = extra / 1e6;
  state.counters["extra_heap_per_Nd_B"] = static_cast<double>(extra) / (static_cast<double>(n) * hd);
  if (!flash) {
    naive_seconds()[key] = per_call;
  } else {
    const auto it = naive_seconds().find(key);
    if (it != naive_seconds().end()) {
      state.counters["x_naive"] = it->second / per_call;
    } else {
      const auto it2 = naive_seconds().find({2048, hd, ratio});
      if (it2 != naive_seconds().end() && n > 2048)
        state.counters["x_naive_projected"] = it2->second * (double(n) / 2048) * (double(n) / 2048) / per_call;
    }
  }
  state.SetLabel(std::string(flash ? "flash" : "naive") + (avx2 ? " avx2" : "") + " heads " +
                 std::to_string(b.shape.n_heads) + "/" + std::to_string(b.shape.n_kv_heads));
}

void PrefillArgs(benchmark::internal::Benchmark* bm) {
  bm->ArgNames({"N", "hd", "gqa", "flash", "isa"});
  for (int n : {512, 2048, 8192})
    for (int hd : {64, 128})
      for (int ratio : {1, 4, 8})
        for (int flash : {0, 1}) bm->Args({n, hd, ratio, flash, 0});
  // The AVX2 kernels at one size, to show what AVX-512 buys.
  for (int hd : {64, 128}) bm->Args({2048, hd, 4, 1, 1});
}
BENCHMARK(BM_Prefill)->Apply(PrefillArgs)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// ---------------------------------------------------------------------------------------
// Paged decode.

// args: dtype (0 f32, 1 bf16), isa (0 native, 1 avx2), backend (0 "flash": batch-invariant,
// decode tokens through the prefill kernel; 1 "flash-split": dedicated decode kernel with
// flash-decoding splits, not batch-invariant), sequences (32 or 1), context (4096 each; and
// 128 for one sequence: a short chat's decode, where waking the pool is weighed against the
// work; 160 for 32 sequences).
// Rows with the same dtype/isa/seqs are a flash vs flash-split pair: the ratio is the cost of
// batch invariance on decode attention.
void BM_DecodePaged(benchmark::State& state) {
  const DType dt = state.range(0) == 0 ? DType::kF32 : DType::kBF16;
  const bool avx2 = state.range(1) == 1;
  const bool split = state.range(2) == 1;
  const int32_t batch = static_cast<int32_t>(state.range(3));
  const int32_t kCtx = static_cast<int32_t>(state.range(4));
  const auto& lim = limits();
  static std::unique_ptr<Paged> cached;
  static DType cached_dt = DType::kF16;
  static int32_t cached_batch = 0, cached_ctx = 0;
  if (!cached || cached_dt != dt || cached_batch != batch || cached_ctx != kCtx) {
    cached.reset();
    const double layer_bytes = 2.0 * batch * kCtx * 4 * 64 * dtype_size(dt);
    const int layers = static_cast<int>(  // layers cycled (1: a cache-resident KV)
        bench::bench_copies(static_cast<int64_t>(std::ceil((1u << 30) / layer_bytes)) + 1));
    cached = std::make_unique<Paged>(16, 4, 64, dt, batch, 1, kCtx, layers);
    cached_dt = dt;
    cached_batch = batch;
    cached_ctx = kCtx;
  }
  Paged& b = *cached;
  const CpuIsa native = cpu_isa();
  if (avx2) set_cpu_isa_for_testing(CpuIsa::kAvx2);
  auto backend = make(split ? "flash-split" : "flash");
  const int layers = static_cast<int>(b.k.size());
  int layer = 0;
  auto call = [&] {
    backend->forward(b.meta, b.shape, b.q.data(), b.cache(layer), b.out.data(), &pool());
    layer = (layer + 1) % layers;
  };
  const int64_t extra = extra_heap_bytes(call);
  double secs = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    call();
    secs += std::chrono::duration<double>(Clock::now() - t0).count();
    ++iters;
    benchmark::DoNotOptimize(b.out.data());
  }
  set_cpu_isa_for_testing(native);
  const double gbs = b.kv_bytes() * iters / secs * 1e-9;
  state.counters["KV_GBps"] = gbs;
  state.counters["pct_read_bw"] = 100.0 * gbs / lim.read_bandwidth_gbs;
  state.counters["read_bw_GBps"] = lim.read_bandwidth_gbs;
  state.counters["extra_heap_KB"] = extra / 1e3;
  // flash vs flash-split (same dtype, isa, sequences), measured earlier in this run.
  static std::map<std::tuple<int, int, int, int>, double> split_seconds;
  const std::tuple<int, int, int, int> key{static_cast<int>(state.range(0)), avx2 ? 1 : 0, batch,
                                           kCtx};
  const double per_call = secs / static_cast<double>(iters);
  if (split) {
    split_seconds[key] = per_call;
  } else if (const auto it = split_seconds.find(key); it != split_seconds.end()) {
    state.counters["x_vs_split"] = per_call / it->second;
  }
  state.SetLabel(std::string(split ? "flash-split " : "flash ") + std::string(dtype_name(dt)) +
                 (avx2 ? " avx2" : "") + " KV, " + std::to_string(batch) +
                 " seqs x " + std::to_string(kCtx) + ", 16/4 heads, hd 64, " +
                 std::to_string(layers) +
                 " layers cycled");
}
void DecodeArgs(benchmark::internal::Benchmark* bm) {
  bm->ArgNames({"bf16", "isa", "split", "seqs", "ctx"});
  for (int seqs : {32, 1})
    for (int isa : {0, 1})
      for (int dt : {0, 1})
        for (int split : {1, 0}) bm->Args({dt, isa, split, seqs, 4096});
  for (int isa : {0, 1})
    for (int split : {1, 0}) bm->Args({0, isa, split, 1, 128});
  // 32 short chats decoding together (the serving benchmark's 130 + 64 tokens): per-item
  // set-up weighs as much as the context.
  for (int isa : {0, 1})
    for (int split : {1, 0}) bm->Args({0, isa, split, 32, 160});
}
BENCHMARK(BM_DecodePaged)->Apply(DecodeArgs)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
