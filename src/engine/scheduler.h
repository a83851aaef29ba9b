// Scheduler: decides, every step, which requests run and how many tokens each computes,
// within the token budget (max_num_batched_tokens), max_num_seqs and the KV block pool.
// Policy (vLLM V1, chunked prefill on): running requests first, in admission order (decodes
// take 1 token, unfinished prefills continue); when the pool runs dry the most recently
// admitted running request is preempted (blocks freed, requeued at the head of the waiting
// queue, recomputed later). Then waiting requests are admitted FCFS while budget, seats and
// blocks last; a prompt longer than the leftover budget is split into chunks.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "common/status.h"
#include "config/engine_config.h"
#include "engine/request.h"
#include "kv_cache/kv_cache_manager.h"
#include "runner/scheduler_output.h"

namespace llmserve {

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, int32_t max_model_len, KVCacheManager& kv);

  /// Queues a new request (status kWaiting) at the tail of the waiting queue.
  void add_request(Request* req);

  /// Plans one step. The output borrows the requests' token ids and block tables; it stays
  /// valid until the next call that changes a request. `now` stamps first_scheduled_time.
  SchedulerOutput schedule(double now);

  /// Removes a request from the queues, frees its blocks, marks it finished with `reason`.
  void finish_request(Request* req, FinishReason reason);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_preemptions_total() const { return num_preemptions_total_; }

  /// The per-step invariants (CHECK-fail on violation): scheduled tokens <= budget, running
  /// <= max_num_seqs, every scheduled block table covers computed + scheduled tokens, blocks
  /// held by requests + free blocks == total blocks.
  void check_invariants(const SchedulerOutput& out) const;

 private:
  /// Frees `req`'s blocks and puts it back at the head of the waiting queue.
  void preempt(Request* req);
  void schedule_running(SchedulerOutput& out, int32_t& budget, bool& preempted);
  void schedule_waiting(SchedulerOutput& out, int32_t& budget, double now);
  void add_scheduled(SchedulerOutput& out, Request* req, int32_t num_new);

  SchedulerConfig config_;
  int32_t max_model_len_;
  KVCacheManager& kv_;
  std::vector<Request*> running_;  // admission order
  std::deque<Request*> waiting_;
  int64_t num_preemptions_total_ = 0;
};

}  // namespace llmserve
