// In-process benchmark: drives a synchronous LLMEngine with a workload on the wall clock.
#pragma once

#include <functional>
#include <vector>

#include "bench/metrics.h"
#include "bench/workload.h"
#include "common/status.h"

namespace llmserve {

class LLMEngine;

namespace bench {

/// Called after each completed request with (done, total).
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

struct RunOptions {
  float temperature = 0.0f;  // sampling temperature of every request (0 = greedy)
  ProgressFn progress;       // may be empty
};

/// Runs `requests` through `engine` (which must be idle): at each iteration adds every request
/// whose arrival offset has passed (EngineRequest::arrival_time = its scheduled arrival on the
/// now_seconds() clock), then runs one step() if there is work, else sleeps until the next
/// arrival. Requests get ids 0..n-1, max_tokens = output_len and ignore_eos. Every request is
/// checked with check_request() before the clock starts: an invalid one fails the run with
/// its index and the engine's message (InvalidArgument).
Expected<RunResult> run_in_process(LLMEngine& engine, const std::vector<BenchRequest>& requests,
                                   const RunOptions& options);

}  // namespace bench
}  // namespace llmserve
