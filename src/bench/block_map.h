// The KV block map of an in-process run: for every engine step, which physical blocks were
// held by how many sequences (prefix caching shares full blocks by reference count) and which
// were cached (held by no sequence, keeping their K/V until evicted).
//
// StepRecord carries only counts (num_used_blocks, num_cached_blocks, num_prefix_hit_tokens),
// so the map is reconstructed: the run's schedule (each step's scheduled entries in order, its
// preemptions, the step that finished each request) and every request's prompt and generated
// ids are replayed through a KVCacheManager of the engine's size and settings, called as the
// scheduler and engine call it (kv_cache/kv_cache_manager.h, engine/scheduler.cc): admissions
// look up their longest cached prefix and allocate, running requests allocate (freeing the
// step's preempted requests, in order, while an allocation fails), computed full blocks are
// indexed, finished requests are freed. The manager is deterministic, so the twin holds the
// engine's block ids. It is checked against the engine at every step: used and cached block
// counts and prefix-hit tokens must match the StepRecord, or the map is refused with the
// first difference (a replay that follows a scheduler it does not know is never drawn).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/metrics.h"

namespace llmserve::bench {

/// A prefix-cache hit at an admission (first or after a preemption).
struct AdmissionHit {
  int64_t request_id = 0;
  int64_t step = 0;
  int32_t tokens = 0;  // prompt tokens taken from cached blocks
};

struct BlockMap {
  bool available = false;  // false: no map (`note` says why)
  std::string note;        // why there is no map, or what was left out
  int64_t num_steps = 0;
  int32_t num_total_blocks = 0;
  int32_t num_touched_blocks = 0;  // highest block id ever used + 1
  /// Rows: block ids [row * blocks_per_row, (row + 1) * blocks_per_row), blocks_per_row = 1
  /// unless more than max_rows blocks were touched.
  int32_t num_rows = 0;
  int32_t blocks_per_row = 1;
  /// state[step * num_rows + row] after the step: n > 0 = held by n sequences (the most of
  /// the row's blocks), 0 = free, -1 = cached (no holder, K/V kept, evictable; for a row of
  /// several blocks: none held, some cached).
  std::vector<int16_t> state;
  std::vector<AdmissionHit> hits;  // every admission that found cached blocks, in order
  int32_t peak_sharing = 0;        // most sequences holding one block at once
  int16_t at(int64_t step, int32_t row) const {
    return state[static_cast<size_t>(step * num_rows + row)];
  }
};

/// Replays `run` (in-process: steps, finish_step, every request's prompt_token_ids and
/// output_token_ids, num_kv_blocks, block_size, prefix_caching) as described above, once to
/// check it against every step record and find the blocks it touches (the pool hands out low
/// ids first, cached blocks last: a long run with a large pool touches many), once more to
/// sample them into at most max_rows rows. Never fails: an unavailable map says why in `note`
/// (not in-process, no token ids, or the replay diverging from the step records, naming the
/// step and the figures).
BlockMap replay_block_map(const RunResult& run, int32_t max_rows = 256);

}  // namespace llmserve::bench
