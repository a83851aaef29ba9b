#include "bench/block_map.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "kv_cache/block_hash.h"
#include "kv_cache/kv_cache_manager.h"

namespace llmserve::bench {

namespace {

/// A request as the scheduler sees it.
struct Seq {
  std::vector<int32_t> tokens;  // prompt + every generated id (as recorded)
  int32_t known = 0;            // tokens that exist at this point (prompt + sampled so far)
  int32_t computed = 0;         // num_computed_tokens
  int32_t scheduled = 0;        // tokens scheduled in the current step
  std::vector<int32_t> table;   // block table
  std::vector<BlockHash> hashes;
  int32_t num_hashed = 0;
};

class Replay {
 public:
  explicit Replay(const RunResult& run)
      : run_(run), kv_(run.num_kv_blocks, run.block_size, run.prefix_caching) {}

  /// Replays every step, checking it against its StepRecord, and calls `snapshot` (may be
  /// empty) after each with the pool's state. False at the first difference (why()).
  bool replay(const std::function<void(int64_t, const BlockPool&)>& snapshot);
  const std::string& why() const { return why_; }
  int32_t touched() const { return touched_; }
  const std::vector<AdmissionHit>& hits() const { return hits_; }

 private:
  /// Plans step `s` (allocations, preemptions); false with `why_` on a difference.
  bool plan(int64_t s, int32_t* hit_tokens);
  /// Computes step `s` (indexing full blocks, sampling, finishing); false on a difference.
  bool compute(int64_t s);
  void free_seq(Seq& q) {
    kv_.free(q.table);
    q.computed = 0;
    q.num_hashed = 0;
  }
  void note_blocks(const Seq& q) {
    for (int32_t id : q.table) touched_ = std::max(touched_, id + 1);
  }
  bool fail(std::string why) {
    why_ = std::move(why);
    return false;
  }

  const RunResult& run_;
  KVCacheManager kv_;
  std::vector<Seq> seqs_;
  int32_t touched_ = 0;
  std::vector<AdmissionHit> hits_;
  std::string why_;
};

bool Replay::plan(int64_t s, int32_t* hit_tokens) {
  const StepRecord& rec = run_.steps[static_cast<size_t>(s)];
  const int32_t bs = kv_.block_size();
  size_t victim = 0;
  auto preempt_next = [&]() {
    if (victim >= rec.preempted.size()) return false;
    const int64_t id = rec.preempted[victim++];
    if (id < 0 || static_cast<size_t>(id) >= seqs_.size()) return false;
    free_seq(seqs_[static_cast<size_t>(id)]);
    return true;
  };
  std::vector<int32_t> hits;
  for (const StepRecord::Entry& e : rec.scheduled) {
    if (e.request_id < 0 || static_cast<size_t>(e.request_id) >= seqs_.size())
      return fail(fmt::format("step {} schedules unknown request {}", s, e.request_id));
    Seq& q = seqs_[static_cast<size_t>(e.request_id)];
    if (q.tokens.empty()) return fail(fmt::format("request {} has no token ids", e.request_id));
    q.scheduled = e.num_scheduled_tokens;
    if (q.table.empty()) {  // admission: new, or back after a preemption
      while (preempt_next()) {
      }
      hits.clear();
      if (kv_.prefix_caching()) {
        extend_block_hashes(std::span<const int32_t>(q.tokens).first(static_cast<size_t>(q.known)),
                            bs, "", q.hashes);
        kv_.find_cached_prefix(q.hashes, (q.known - 1) / bs, hits);
      }
      const int32_t num_hit = static_cast<int32_t>(hits.size()) * bs;
      if (!kv_.allocate_slots(q.table, int64_t{num_hit} + e.num_scheduled_tokens, hits))
        return fail(fmt::format("step {}: request {} is admitted but its blocks do not fit", s,
                                e.request_id));
      q.computed = num_hit;
      q.num_hashed = static_cast<int32_t>(hits.size());
      *hit_tokens += num_hit;
      if (num_hit > 0) hits_.push_back({e.request_id, s, num_hit});
    } else {
      while (!kv_.allocate_slots(q.table, int64_t{q.computed} + e.num_scheduled_tokens))
        if (!preempt_next())
          return fail(fmt::format("step {}: request {} finds no block and no preemption frees "
                                  "one", s, e.request_id));
    }
    note_blocks(q);
  }
  while (preempt_next()) {  // the last running request preempting itself
  }
  return true;
}

bool Replay::compute(int64_t s) {
  const StepRecord& rec = run_.steps[static_cast<size_t>(s)];
  const int32_t bs = kv_.block_size();
  for (const StepRecord::Entry& e : rec.scheduled) {
    const size_t r = static_cast<size_t>(e.request_id);
    Seq& q = seqs_[r];
    q.computed += q.scheduled;
    if (kv_.prefix_caching()) {
      const int32_t full = q.computed / bs;
      extend_block_hashes(
          std::span<const int32_t>(q.tokens).first(static_cast<size_t>(full) * bs), bs, "",
          q.hashes);
      kv_.cache_full_blocks(q.hashes, q.table, full, &q.num_hashed);
    }
    if (q.computed != q.known) continue;  // a prefill chunk: nothing sampled
    if (q.known >= static_cast<int32_t>(q.tokens.size()))
      return fail(fmt::format("step {}: request {} samples more tokens than it generated", s, r));
    ++q.known;
    if (r < run_.finish_step.size() && run_.finish_step[r] == s) {
      if (q.known != static_cast<int32_t>(q.tokens.size()))
        return fail(fmt::format("step {}: request {} finishes with {} of {} tokens", s, r,
                                q.known, q.tokens.size()));
      free_seq(q);
    }
  }
  return true;
}

bool Replay::replay(const std::function<void(int64_t, const BlockPool&)>& snapshot) {
  seqs_.assign(run_.requests.size(), Seq{});
  for (size_t i = 0; i < run_.requests.size(); ++i) {
    const RequestRecord& r = run_.requests[i];
    Seq& q = seqs_[i];
    q.tokens = r.prompt_token_ids;
    q.tokens.insert(q.tokens.end(), r.output_token_ids.begin(), r.output_token_ids.end());
    q.known = static_cast<int32_t>(r.prompt_token_ids.size());
  }
  for (int64_t s = 0; s < static_cast<int64_t>(run_.steps.size()); ++s) {
    const StepRecord& rec = run_.steps[static_cast<size_t>(s)];
    int32_t hit_tokens = 0;
    if (!plan(s, &hit_tokens) || !compute(s)) return false;
    if (kv_.num_used_blocks() != rec.num_used_blocks ||
        kv_.num_cached_blocks() != rec.num_cached_blocks ||
        hit_tokens != rec.num_prefix_hit_tokens)
      return fail(fmt::format("at step {}: {} used / {} cached blocks and {} prefix-hit tokens, "
                              "the engine recorded {} / {} and {}",
                              s, kv_.num_used_blocks(), kv_.num_cached_blocks(), hit_tokens,
                              rec.num_used_blocks, rec.num_cached_blocks,
                              rec.num_prefix_hit_tokens));
    if (snapshot) snapshot(s, kv_.pool());
  }
  return true;
}

}  // namespace

BlockMap replay_block_map(const RunResult& run, int32_t max_rows) {
  BlockMap map;
  map.num_steps = static_cast<int64_t>(run.steps.size());
  map.num_total_blocks = run.num_kv_blocks;
  if (!run.in_process || run.num_kv_blocks <= 0 || run.block_size <= 0) {
    map.note = "block map not drawn: the run has no KV pool figures (in-process runs only)";
    return map;
  }
  // Pass 1 checks the replay against the step records and finds the blocks it touches; pass
  // 2 (the same deterministic replay) samples them into rows.
  Replay first(run);
  if (!first.replay(nullptr)) {
    map.note = "block map not drawn: the replay of the schedule diverged: " + first.why();
    return map;
  }
  map.available = true;
  map.hits = first.hits();
  map.num_touched_blocks = first.touched();
  if (map.num_touched_blocks == 0) return map;
  const int32_t rows = std::max(1, max_rows);
  map.blocks_per_row = (map.num_touched_blocks + rows - 1) / rows;
  map.num_rows = (map.num_touched_blocks + map.blocks_per_row - 1) / map.blocks_per_row;
  map.state.assign(static_cast<size_t>(map.num_steps) * map.num_rows, 0);
  Replay second(run);
  second.replay([&](int64_t s, const BlockPool& pool) {
    int16_t* row = map.state.data() + static_cast<size_t>(s) * map.num_rows;
    for (int32_t b = 0; b < map.num_touched_blocks; ++b) {
      const int32_t rc = pool.ref_count(b);
      map.peak_sharing = std::max(map.peak_sharing, rc);
      int16_t& cell = row[b / map.blocks_per_row];
      if (rc > 0) cell = std::max<int16_t>(cell, static_cast<int16_t>(std::min(rc, 32767)));
      else if (pool.has_hash(b) && cell == 0) cell = -1;
    }
  });
  return map;
}

}  // namespace llmserve::bench
