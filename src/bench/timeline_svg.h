// `--timeline FILE.svg`: the schedule of an in-process run as a picture. One row per request,
// one column per engine step; each cell says what the request did in that step:
//   prefill chunk (title gives the token count), decode, waiting (in the queue, not
//   scheduled), stalled (admitted but not scheduled this step, e.g. decodes held back by
//   prefill-first or a static batch), preempted (red), blank (not arrived yet / finished).
// A request's admission cell is teal instead of orange when its prompt started from
// prefix-cached blocks (title: how many tokens).
// Under the grid, three strips per step: seats used (scheduled sequences of max_num_seqs; grey
// = idle seats), the token budget used (prefill + decode tokens of max_num_batched_tokens) and
// the KV blocks (held by sequences, and cached: held by none, K/V kept, evictable). Below them
// the block map (block_map.h): one row per physical block, coloured by how many sequences
// held it at each step (one, or shared by 2, 3, 4+) or cached.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/block_map.h"
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
  std::vector<int32_t> hit_tokens;  // prompt tokens found prefix-cached at an admission cell
  CellState at(int64_t r, int64_t s) const { return cells[static_cast<size_t>(r * num_steps + s)]; }
  int32_t tokens_at(int64_t r, int64_t s) const {
    return tokens[static_cast<size_t>(r * num_steps + s)];
  }
  int32_t hit_tokens_at(int64_t r, int64_t s) const {
    return hit_tokens[static_cast<size_t>(r * num_steps + s)];
  }
};

/// Classifies every (request, step) from the run's StepRecords and finish steps. A request is
/// present from the first step that mentions it (scheduled, waiting or preempted) to the step
/// that finished it; present but unmentioned cells are kStalled. Prefix-cache hits: from
/// `hits` (every admission, block_map.h) when given, else each request's first scheduled
/// cell gets RequestRecord::cached_tokens (the hit at first admission).
TimelineGrid build_timeline_grid(const RunResult& run,
                                 const std::vector<AdmissionHit>* hits = nullptr);

/// The SVG document (UTF-8 text). `title` is shown at the top.
std::string render_timeline_svg(const RunResult& run, const std::string& title);

/// Renders and writes `path`. Errors: NotFound when the file cannot be written.
Status write_timeline_svg(const std::string& path, const RunResult& run, const std::string& title);

}  // namespace llmserve::bench
