// Scheduler: decides, every step, which requests run and how many tokens each computes,
// within the token budget (max_num_batched_tokens), max_num_seqs and the KV block pool.
//
// One accounting rule for every policy: a request's num_computed_tokens catches up with its
// num_tokens() by the num_scheduled_tokens a step grants.
//
// Batching modes (SchedulerConfig::batching):
//  - continuous (Orca, vLLM): requests join and leave at every step.
//  - static: a batch of up to max_num_seqs waiting requests runs until all its members
//    finish; only then is the next batch formed.
//  - dynamic (Triton): like static, but a batch is launched only when max_num_seqs requests
//    wait or the oldest has waited max_delay_ms.
// Prefill/decode policies:
//  - chunked prefill (default, vLLM V1): running requests first (decodes take 1 token,
//    unfinished prefills continue), the leftover budget goes to waiting prompts, a prompt
//    longer than what is left is split into chunks.
//  - chunking off + prefill-first: a step that can admit waiting prompts runs only whole
//    prefills; running decodes wait for the next step.
//  - chunking off + mixed: whole prefills join the running decodes in one step.
// Preemption (recompute): when a running request finds no free block, the victim (the most
// recently admitted; under the priority policy the lowest-priority, latest-arrived) frees
// its blocks and returns to the head of the waiting queue with num_computed_tokens = 0.
// Prefix caching: a request admitted with num_computed_tokens = 0 (new or preempted) first
// takes its longest run of cached full blocks (kv_cache/kv_cache_manager.h) and starts
// computing after them, at the latest at its last token.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "common/status.h"
#include "config/engine_config.h"
#include "engine/request.h"
#include "kv_cache/kv_cache_manager.h"
#include "runner/scheduler_output.h"

namespace llmserve {

class Scheduler {
 public:
  /// `sliding_kv` (config.hybrid_kv only): the sliding-window layers' pool.
  Scheduler(const SchedulerConfig& config, int32_t max_model_len, KVCacheManager& kv,
            KVCacheManager* sliding_kv = nullptr);

  /// Queues a new request (status kWaiting): at the tail (FCFS) or by (priority, arrival).
  void add_request(Request* req);

  /// Plans one step at time `now` (seconds; stamps first_scheduled_time and drives the
  /// dynamic batcher's delay). The output borrows the requests' token ids and block tables;
  /// it stays valid until the next call that changes a request.
  SchedulerOutput schedule(double now);

  /// After a step advanced req->num_computed_tokens: indexes the blocks it filled for later
  /// requests (prefix caching; never a half-written block: only blocks wholly computed).
  void cache_computed_blocks(Request* req);

  /// Removes a request from the queues, frees its blocks, marks it finished with `reason`.
  void finish_request(Request* req, FinishReason reason);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_preemptions_total() const { return num_preemptions_total_; }
  /// Requests preempted during the latest schedule() call.
  const std::vector<int64_t>& last_preempted() const { return last_preempted_; }
  /// Prefix caching: tokens of the sequences admitted so far that were looked up (queries)
  /// and found cached (hits), as vllm:prefix_cache_queries / _hits count them; and the hits
  /// of the latest schedule() call.
  int64_t prefix_cache_queries_total() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits_total() const { return prefix_cache_hits_; }
  int32_t last_prefix_hit_tokens() const { return last_prefix_hit_tokens_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  const std::vector<Request*>& running() const { return running_; }

  /// The per-step invariants (CHECK-fail on violation): scheduled tokens <= budget, running
  /// <= max_num_seqs, every scheduled block table covers computed + scheduled tokens, each
  /// block's ref_count equals the block tables holding it, used + cached + free blocks ==
  /// total, indexed blocks hold the hash they are indexed by.
  void check_invariants(const SchedulerOutput& out) const;

 private:
  /// Frees `req`'s blocks and puts it back at the head of the waiting queue.
  void preempt(Request* req);
  /// The running request to preempt next (policy-dependent).
  Request* pick_victim() const;
  /// With a sliding window in every layer (or in the sliding group under hybrid KV), returns
  /// req's blocks wholly before its next query's window to the pool
  /// (KVCacheManager::free_blocks_before).
  void free_outside_window(Request* req);
  void enqueue_waiting(Request* req, bool front);
  void schedule_running(SchedulerOutput& out, int32_t& budget, bool& preempted);
  /// Admits waiting requests (only batch members in static/dynamic mode). Returns how many.
  int32_t schedule_waiting(SchedulerOutput& out, int32_t& budget, double now);
  /// Static/dynamic: forms a new batch from the waiting queue when the previous one is done
  /// (and, for dynamic, when it is full or the oldest request waited max_delay_ms).
  void maybe_form_batch(double now);
  bool batch_active() const;
  void add_scheduled(SchedulerOutput& out, Request* req, int32_t num_new);
  /// Grows req's block tables (both groups under hybrid KV) to cover num_tokens, taking
  /// `hits` / `sliding_hits` first (only for empty tables); all or nothing.
  bool allocate(Request* req, int64_t num_tokens, std::span<const int32_t> hits,
                std::span<const int32_t> sliding_hits);
  /// Releases every block req holds (both groups).
  void free_blocks(Request* req);
  /// The pool and table the window frees in: the sliding group's under hybrid KV, else the only one.
  KVCacheManager& window_kv() const { return sliding_kv_ ? *sliding_kv_ : kv_; }

  SchedulerConfig config_;
  int32_t max_model_len_;
  KVCacheManager& kv_;
  KVCacheManager* sliding_kv_;  // hybrid KV: the sliding layers' pool, else null
  std::vector<Request*> running_;  // admission order
  std::deque<Request*> waiting_;
  std::vector<int64_t> last_preempted_;
  int64_t num_preemptions_total_ = 0;
  std::vector<int32_t> hits_, sliding_hits_;  // scratch: a waiting request's prefix hit
  int64_t prefix_cache_queries_ = 0, prefix_cache_hits_ = 0;
  int32_t last_prefix_hit_tokens_ = 0;
};

}  // namespace llmserve
