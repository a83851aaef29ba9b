// `--timeline FILE.svg`: the schedule of an in-process run as a picture. One row per request,
// one column per engine step; each cell says what the request did in that step:
//   prefill chunk (title gives the token count), decode, waiting (in the queue, not
//   scheduled), stalled (admitted but not scheduled this step, e.g. decodes held back by
//   prefill-first or a static batch), preempted (red), blank (not arrived yet / finished).
// Under the grid, two strips per step: seats used (scheduled sequences of max_num_seqs; grey =
// idle seats) and the token budget used (prefill + decode tokens of max_num_batched_tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/metrics.h"
#include "common/status.h"

namespace llmserve::bench {

/// What one request did in one step.
enum class CellState : uint8_t { kBlank, kWaiting, kStalled, kPrefill, kDecode, kPreempted };

/// The grid behind the picture: cells[request][step], tokens scheduled in the same layout.
struct TimelineGrid {
  int64_t num_requests = 0, num_steps = 0;
  std::vector<CellState> cells;   // row-major, num_requests x num_steps
  std::vector<int32_t> tokens;    // scheduled tokens per cell (0 when not scheduled)
  CellState at(int64_t r, int64_t s) const { return cells[static_cast<size_t>(r * num_steps + s)]; }
  int32_t tokens_at(int64_t r, int64_t s) const {
    return tokens[static_cast<size_t>(r * num_steps + s)];
  }
};

/// Classifies every (request, step) from the run's StepRecords and finish steps. A request is
/// present from the first step that mentions it (scheduled, waiting or preempted) to the step
/// that finished it; present but unmentioned cells are kStalled.
TimelineGrid build_timeline_grid(const RunResult& run);

/// The SVG document (UTF-8 text). `title` is shown at the top.
std::string render_timeline_svg(const RunResult& run, const std::string& title);

/// Renders and writes `path`. Errors: NotFound when the file cannot be written.
Status write_timeline_svg(const std::string& path, const RunResult& run, const std::string& title);

}  // namespace llmserve::bench
