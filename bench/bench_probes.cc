// Prints this machine's limits (read bandwidth, fp32 FMA peak, bf16 dot peak) for the thread
// counts given (default: physical cores), as Google Benchmark counters.
#include <benchmark/benchmark.h>

#include "common/thread_pool.h"
#include "machine_limits.h"

namespace {

void BM_MachineLimits(benchmark::State& state) {
  const auto& m = llmserve::bench::machine_limits(llmserve::ThreadPool::physical_cores());
  for (auto _ : state) benchmark::DoNotOptimize(m.read_bandwidth_gbs);
  state.counters["read_GBps"] = m.read_bandwidth_gbs;
  state.counters["fp32_fma_GFLOPs"] = m.fp32_fma_peak_gflops;
  state.counters["bf16_dot_GFLOPs"] = m.bf16_dot_peak_gflops;
  state.counters["threads"] = m.threads;
}
BENCHMARK(BM_MachineLimits)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
