#include "engine/scheduler.h"

#include <algorithm>

#include "common/check.h"

namespace llmserve {

Scheduler::Scheduler(const SchedulerConfig& config, int32_t max_model_len, KVCacheManager& kv)
    : config_(config), max_model_len_(max_model_len), kv_(kv) {}

void Scheduler::add_request(Request* req) {
  req->status = RequestStatus::kWaiting;
  waiting_.push_back(req);
}

void Scheduler::add_scheduled(SchedulerOutput& out, Request* req, int32_t num_new) {
  ScheduledSequence s;
  s.request_id = req->request_id;
  s.token_ids = req->token_ids.data();
  s.num_computed_tokens = req->num_computed_tokens;
  s.num_scheduled_tokens = num_new;
  s.block_table = req->block_table.data();
  s.num_blocks = static_cast<int32_t>(req->block_table.size());
  // Sample only once the whole known sequence has been computed.
  s.logits_mode = req->num_computed_tokens + num_new == req->num_tokens() ? LogitsMode::kLast
                                                                          : LogitsMode::kNone;
  out.seqs.push_back(s);
  out.total_num_scheduled_tokens += num_new;
}

void Scheduler::preempt(Request* req) {
  kv_.free(req->block_table);
  req->num_computed_tokens = 0;
  req->status = RequestStatus::kWaiting;
  ++req->num_preemptions;
  ++num_preemptions_total_;
  waiting_.push_front(req);
}

void Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget, bool& preempted) {
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Request* req = running_[i];
    const int32_t num_new = std::min(req->num_tokens() - req->num_computed_tokens, budget);
    bool scheduled = true;
    while (!kv_.allocate_slots(req->block_table, req->num_computed_tokens + num_new)) {
      Request* victim = running_.back();  // most recently admitted
      running_.pop_back();
      preempt(victim);
      preempted = true;
      if (victim == req) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;
    add_scheduled(out, req, num_new);
    budget -= num_new;
    ++i;
  }
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget, double now) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* req = waiting_.front();
    int32_t num_new = req->num_tokens() - req->num_computed_tokens;
    if (num_new > budget) {
      if (!config_.enable_chunked_prefill) break;  // whole prefills only
      num_new = budget;
    }
    if (!kv_.allocate_slots(req->block_table, req->num_computed_tokens + num_new)) break;
    waiting_.pop_front();
    req->status = RequestStatus::kRunning;
    if (req->timing.first_scheduled_time == 0) req->timing.first_scheduled_time = now;
    running_.push_back(req);
    add_scheduled(out, req, num_new);
    budget -= num_new;
  }
}

SchedulerOutput Scheduler::schedule(double now) {
  SchedulerOutput out;
  int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;
  schedule_running(out, budget, preempted);
  // After a preemption the pool is known to be short: admit nobody new this step.
  if (!preempted) schedule_waiting(out, budget, now);
  if (config_.check_invariants) check_invariants(out);
  return out;
}

void Scheduler::finish_request(Request* req, FinishReason reason) {
  if (req->status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), req));
  } else if (req->status == RequestStatus::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), req));
  }
  kv_.free(req->block_table);
  req->status = RequestStatus::kFinished;
  req->finish_reason = reason;
}

void Scheduler::check_invariants(const SchedulerOutput& out) const {
  LLMS_CHECK(out.total_num_scheduled_tokens <= config_.max_num_batched_tokens,
             "scheduled {} tokens > max_num_batched_tokens {}", out.total_num_scheduled_tokens,
             config_.max_num_batched_tokens);
  LLMS_CHECK(num_running() <= config_.max_num_seqs, "running {} > max_num_seqs {}",
             num_running(), config_.max_num_seqs);
  for (const ScheduledSequence& s : out.seqs) {
    const int64_t need = s.num_computed_tokens + s.num_scheduled_tokens;
    LLMS_CHECK(int64_t{s.num_blocks} * kv_.block_size() >= need,
               "request {}: block table covers {} tokens, needs {}", s.request_id,
               int64_t{s.num_blocks} * kv_.block_size(), need);
    LLMS_CHECK(need <= max_model_len_, "request {}: {} tokens > max_model_len {}", s.request_id,
               need, max_model_len_);
  }
  int64_t held = 0;
  for (const Request* r : running_) held += static_cast<int64_t>(r->block_table.size());
  for (const Request* r : waiting_) held += static_cast<int64_t>(r->block_table.size());
  LLMS_CHECK(held + kv_.num_free_blocks() == kv_.num_total_blocks(),
             "blocks held by requests {} + free {} != total {}", held, kv_.num_free_blocks(),
             kv_.num_total_blocks());
}

}  // namespace llmserve
