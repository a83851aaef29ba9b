// The quantized GEMM (kernels/quant/qgemm.h) at bench-250m's shapes (qkv [1536, 1024], o
// [1024, 1024], gate_up [5632, 1024] through gemm_silu_mul, down [1024, 2816], lm_head
// [32000, 1024]) and TinyLlama-1.1B's (qkv [2560, 2048], gate_up [11264, 2048], down
// [2048, 5632]) for M = 1, 8, 32, 512 and the common types (Q4_K, Q6_K, Q8_0, Q5_K, Q4_0,
// Q5_0, IQ4_NL, IQ4_XS), on prepared weights as a model loads them (bench_gemm has the same
// shapes in bf16 / f32 for comparison). qgemm_moe/*: one MoE layer's grouped decode GEMMs
// (run_moe); qgemm_moe/*/token: one layer's single-token expert job (run_moe_token).
//
// Weights are random codes with sane fp16 scales (speed does not depend on the values) and
// rotate through copies totalling > 2x the last-level cache, so each call streams its
// weights from DRAM as a forward pass does. Counters: weight_GBps (the file's bytes of W /
// time: what the decode roofline counts), pct_bandwidth (of machine_limits()), GMACs.
// `LLMSERVE_ISA=avx2` forces the plain AVX2 kernels (`avxvnni`: AVX2 with AVX-VNNI);
// `LLMSERVE_BENCH_COPIES=N` sets the number of copies (1: cache-resident weights, the
// kernels' arithmetic alone).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/quant/qgemm.h"
#include "machine_limits.h"
#include "quant/block_formats.h"

namespace llmserve {
namespace {

int threads() {
  if (const char* t = std::getenv("LLMSERVE_BENCH_THREADS")) return std::atoi(t);
  return ThreadPool::physical_cores();
}

ThreadPool& pool() {
  static ThreadPool p(threads());
  return p;
}

/// Byte offsets of the fp16 scale fields of a block (d, and dmin / m when present).
std::vector<int> half_fields(DType t) {
  using namespace quant;
  switch (t) {
    case DType::kQ4_0: return {0};
    case DType::kQ4_1: return {0, 2};
    case DType::kQ5_0: return {0};
    case DType::kQ5_1: return {0, 2};
    case DType::kQ8_0: return {0};
    case DType::kIQ4_NL: return {0};
    case DType::kQ2_K: return {static_cast<int>(offsetof(BlockQ2_K, d)), static_cast<int>(offsetof(BlockQ2_K, dmin))};
    case DType::kQ3_K: return {static_cast<int>(offsetof(BlockQ3_K, d))};
    case DType::kQ4_K: return {0, 2};
    case DType::kQ5_K: return {0, 2};
    case DType::kQ6_K: return {static_cast<int>(offsetof(BlockQ6_K, d))};
    case DType::kIQ4_XS: return {0};
    default: return {};
  }
}

struct Weights {
  std::vector<std::shared_ptr<std::vector<uint8_t>>> bytes;
  std::vector<WeightMatrix> copies;
  int64_t file_bytes = 0;
};

Weights make(DType t, int64_t n, int64_t k, WeightUse use, int64_t total_bytes = int64_t{160} << 20) {
  Weights w;
  const int64_t row = dtype_row_bytes(t, k), bb = dtype_block_bytes(t);
  w.file_bytes = n * row;
  const int64_t copies = bench::bench_copies(std::max<int64_t>(2, total_bytes / w.file_bytes));
  std::mt19937 rng(1);
  for (int64_t c = 0; c < copies; ++c) {
    auto b = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(w.file_bytes));
    for (auto& v : *b) v = static_cast<uint8_t>(rng());
    const uint16_t d = f32_to_f16(0.01f);
    for (int64_t blk = 0; blk < w.file_bytes / bb; ++blk)
      for (int off : half_fields(t)) std::memcpy(b->data() + blk * bb + off, &d, 2);
    WeightMatrix m;
    m.data = b->data();
    m.dtype = t;
    m.rows = n;
    m.cols = k;
    m.storage = b;
    prepare_weight(m, use);
    w.bytes.push_back(std::move(b));
    w.copies.push_back(std::move(m));
  }
  return w;
}

void run(benchmark::State& state, DType t, int64_t n, int64_t k, bool silu) {
  const int64_t m = state.range(0);
  const Weights w = make(t, n, k, silu ? WeightUse::kSiluMul : WeightUse::kGemm);
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  size_t i = 0;
  for (auto _ : state) {
    const WeightMatrix& wm = w.copies[i++ % w.copies.size()];
    if (silu)
      gemm_silu_mul(x.data(), m, wm, y.data(), &pool());
    else
      gemm(x.data(), m, wm, y.data(), &pool());
    benchmark::ClobberMemory();
  }
  const auto& lim = bench::machine_limits(threads());
  const double calls = static_cast<double>(state.iterations());
  state.counters["weight_GBps"] =
      benchmark::Counter(calls * double(w.file_bytes) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GMACs"] =
      benchmark::Counter(calls * double(m) * n * k / 1e9, benchmark::Counter::kIsRate);
  state.counters["bw_GBps_limit"] = lim.read_bandwidth_gbs;
  state.SetLabel(std::string(dtype_ggml_name(t)) + " " + quant_gemm_isa());
}

/// 512 random choices of `used` of `experts` experts each, in rank order (as a router gives
/// them), made before timing.
std::vector<std::vector<int64_t>> expert_draws(std::mt19937& rng, int64_t experts, int64_t used) {
  std::vector<std::vector<int64_t>> draws(512);
  std::vector<int64_t> all(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) all[static_cast<size_t>(e)] = e;
  for (auto& d : draws) {
    std::shuffle(all.begin(), all.end(), rng);
    d.assign(all.begin(), all.begin() + used);
  }
  return draws;
}

/// One MoE layer's decode GEMMs (qwen3moe-1b: 64 experts, top-8, dim 1024, width 512): the
/// 8 chosen experts' gate/up [2 x 512, 1024] through gemm_silu_mul_grouped, or their down
/// [1024, 512] through gemm_grouped, M = 1 row each, experts drawn at random per call from
/// copies of the 64 totalling > 2x the last-level cache (as a forward pass streams them).
void run_moe(benchmark::State& state, DType t, bool up) {
  constexpr int64_t kExperts = 64, kUsed = 8, kDim = 1024, kWidth = 512;
  const int64_t n = up ? 2 * kWidth : kDim, k = up ? kDim : kWidth;
  // Each expert in copies of 160 MiB / 64 in all (LLMSERVE_BENCH_COPIES applies per expert).
  std::vector<Weights> experts;
  for (int64_t e = 0; e < kExperts; ++e)
    experts.push_back(make(t, n, k, up ? WeightUse::kSiluMul : WeightUse::kGemm, (int64_t{160} << 20) / kExperts));
  const int64_t out = up ? kWidth : kDim;
  std::vector<float> x(static_cast<size_t>(kUsed * k)), y(static_cast<size_t>(kUsed * out));
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  // 512 draws of 8 experts, made before timing; draw j uses copy j of each expert.
  const std::vector<std::vector<int64_t>> ids = expert_draws(rng, kExperts, kUsed);
  std::vector<std::vector<GemmProblem>> draws(ids.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    std::vector<int64_t> chosen = ids[j];
    std::sort(chosen.begin(), chosen.end());  // the grouped MoE layer's expert order
    for (int64_t i = 0; i < kUsed; ++i) {
      const Weights& w = experts[static_cast<size_t>(chosen[i])];
      // gate/up: every expert reads the token's row; down: its own hidden row.
      draws[j].push_back({&x[up ? 0 : i * k], 1, &w.copies[j % w.copies.size()], &y[i * out]});
    }
  }
  size_t j = 0;
  for (auto _ : state) {
    const std::vector<GemmProblem>& problems = draws[j++ % draws.size()];
    if (up)
      gemm_silu_mul_grouped(problems, &pool());
    else
      gemm_grouped(problems, &pool());
    benchmark::ClobberMemory();
  }
  const auto& lim = bench::machine_limits(threads());
  const double bytes = double(kUsed) * double(experts[0].file_bytes);
  state.counters["weight_GBps"] =
      benchmark::Counter(double(state.iterations()) * bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["bw_GBps_limit"] = lim.read_bandwidth_gbs;
  state.SetLabel(std::string(dtype_ggml_name(t)) + " " + quant_gemm_isa());
}

/// One MoE layer's single-token expert work as `MoeMlp::experts_one_token` runs it
/// (qwen3moe-1b's shapes, type t for every expert matrix): one pool job in which each of the
/// pool's threads runs its share of the 8 chosen experts whole, gate/up (SiLU-mul) then down,
/// every GEMM on that thread alone. weight_GBps counts the 8 experts' gate/up and down bytes.
void run_moe_token(benchmark::State& state, DType t) {
  constexpr int64_t kExperts = 64, kUsed = 8, kDim = 1024, kWidth = 512;
  std::vector<Weights> gate_up, down;
  for (int64_t e = 0; e < kExperts; ++e) {
    gate_up.push_back(make(t, 2 * kWidth, kDim, WeightUse::kSiluMul, (int64_t{107} << 20) / kExperts));
    down.push_back(make(t, kDim, kWidth, WeightUse::kGemm, (int64_t{53} << 20) / kExperts));
  }
  const int n = pool().num_threads();
  std::vector<float> x(static_cast<size_t>(kDim)), h(static_cast<size_t>(n * kWidth)),
      y(static_cast<size_t>(kUsed * kDim));
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  const std::vector<std::vector<int64_t>> draws = expert_draws(rng, kExperts, kUsed);
  size_t j = 0;
  for (auto _ : state) {
    const std::vector<int64_t>& ids = draws[j % draws.size()];
    const size_t copy = j++;
    pool().parallel_for(n, [&](int64_t th, int64_t) {
      for (int64_t k = th * kUsed / n; k < (th + 1) * kUsed / n; ++k) {
        const Weights& gu = gate_up[static_cast<size_t>(ids[k])];
        const Weights& dn = down[static_cast<size_t>(ids[k])];
        gemm_silu_mul(x.data(), 1, gu.copies[copy % gu.copies.size()], &h[th * kWidth], nullptr);
        gemm(&h[th * kWidth], 1, dn.copies[copy % dn.copies.size()], &y[k * kDim], nullptr);
      }
    });
    benchmark::ClobberMemory();
  }
  const auto& lim = bench::machine_limits(threads());
  const double bytes = double(kUsed) * double(gate_up[0].file_bytes + down[0].file_bytes);
  state.counters["weight_GBps"] =
      benchmark::Counter(double(state.iterations()) * bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["bw_GBps_limit"] = lim.read_bandwidth_gbs;
  state.SetLabel(std::string(dtype_ggml_name(t)) + " " + quant_gemm_isa());
}

struct Shape {
  const char* name;
  int64_t n, k;
  bool silu;
};

const Shape kShapes[] = {
    {"250m_qkv", 1536, 1024, false}, {"250m_o", 1024, 1024, false},
    {"250m_gate_up", 5632, 1024, true}, {"250m_down", 1024, 2816, false},
    {"250m_lm_head", 32000, 1024, false}, {"1b_qkv", 2560, 2048, false},
    {"1b_gate_up", 11264, 2048, true}, {"1b_down", 2048, 5632, false},
};
const DType kBenchTypes[] = {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ5_K,
                             DType::kQ4_0, DType::kQ5_0, DType::kIQ4_NL, DType::kIQ4_XS};

[[maybe_unused]] const int kRegistered = [] {
  for (DType t : kBenchTypes)
    for (const Shape& s : kShapes) {
      auto* b = benchmark::RegisterBenchmark(
          (std::string("qgemm/") + std::string(dtype_ggml_name(t)) + "/" + s.name).c_str(),
          [t, s](benchmark::State& st) { run(st, t, s.n, s.k, s.silu); });
      b->Arg(1)->Arg(8)->Arg(32)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  for (DType t : {DType::kQ4_K, DType::kQ6_K})
    benchmark::RegisterBenchmark((std::string("qgemm_moe/") + std::string(dtype_ggml_name(t)) + "/token").c_str(),
                                 [t](benchmark::State& st) { run_moe_token(st, t); })
        ->UseRealTime()->Unit(benchmark::kMicrosecond);
  for (DType t : {DType::kQ4_K, DType::kQ6_K})
    for (bool up : {true, false})
      benchmark::RegisterBenchmark(
          (std::string("qgemm_moe/") + std::string(dtype_ggml_name(t)) + (up ? "/up8" : "/down8")).c_str(),
          [t, up](benchmark::State& st) { run_moe(st, t, up); })
          ->UseRealTime()->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace
}  // namespace llmserve

BENCHMARK_MAIN();
