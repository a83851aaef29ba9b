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

/// Checks that every BenchRequest::follows names an earlier request and no request is
/// followed twice (InvalidArgument otherwise).
Status check_follow_ups(const std::vector<BenchRequest>& requests);

/// Runs `requests` through `engine` (which must be idle): at each iteration adds every request
/// whose arrival offset has passed (EngineRequest::arrival_time = its scheduled arrival on the
/// now_seconds() clock) and every follow-up turn (BenchRequest::follows) whose previous turn
/// has finished (arrival = then; prompt = that turn's prompt + its generated ids + its own
/// ids), then runs one step() if there is work, else sleeps until the next arrival. Requests
/// get ids 0..n-1, max_tokens = output_len and ignore_eos. Every request is checked with
/// check_request() before the clock starts (a follow-up with its longest possible prompt: the
/// earlier turns' full output lengths): an invalid one fails the run with its index and the
/// engine's message (InvalidArgument). The result holds each request's prompt and generated
/// ids, the prefix-cache hit at admission, and the EngineStats prefix-cache deltas.
Expected<RunResult> run_in_process(LLMEngine& engine, const std::vector<BenchRequest>& requests,
                                   const RunOptions& options);

}  // namespace bench
}  // namespace llmserve
