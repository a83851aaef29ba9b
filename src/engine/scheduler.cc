#include "engine/scheduler.h"

#include <algorithm>
#include <span>
#include <tuple>

#include "common/check.h"

namespace llmserve {
namespace {

/// Priority-policy order: lower priority value first, then earlier arrival, then lower id.
bool runs_before(const Request* a, const Request* b) {
  return std::tie(a->priority, a->timing.arrival_time, a->request_id) <
         std::tie(b->priority, b->timing.arrival_time, b->request_id);
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, int32_t max_model_len, KVCacheManager& kv,
                     KVCacheManager* sliding_kv)
    : config_(config), max_model_len_(max_model_len), kv_(kv), sliding_kv_(config.hybrid_kv ? sliding_kv : nullptr) {
  LLMS_CHECK(!config.hybrid_kv || (sliding_kv != nullptr && sliding_kv->block_size() == kv.block_size()),
             "hybrid KV needs a sliding-layer pool of the same block size");
}

bool Scheduler::allocate(Request* req, int64_t num_tokens, std::span<const int32_t> hits,
                         std::span<const int32_t> sliding_hits) {
  const size_t before = req->block_table.size();
  if (!kv_.allocate_slots(req->block_table, num_tokens, hits)) return false;
  if (sliding_kv_ == nullptr || sliding_kv_->allocate_slots(req->sliding_block_table, num_tokens, sliding_hits))
    return true;
  kv_.shrink(req->block_table, before);  // all or nothing
  return false;
}

void Scheduler::free_blocks(Request* req) {
  kv_.free(req->block_table);
  req->num_hashed_blocks = 0;
  if (sliding_kv_ != nullptr) sliding_kv_->free(req->sliding_block_table);
  req->num_hashed_sliding_blocks = 0;
}

void Scheduler::enqueue_waiting(Request* req, bool front) {
  req->status = RequestStatus::kWaiting;
  if (config_.policy == SchedulingPolicy::kPriority) {
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), req, runs_before), req);
  } else if (front) {
    waiting_.push_front(req);
  } else {
    waiting_.push_back(req);
  }
}

void Scheduler::add_request(Request* req) { enqueue_waiting(req, /*front=*/false); }

void Scheduler::add_scheduled(SchedulerOutput& out, Request* req, int32_t num_new) {
  ScheduledSequence s;
  s.request_id = req->request_id;
  s.token_ids = req->token_ids.data();
  s.num_computed_tokens = req->num_computed_tokens;
  s.num_scheduled_tokens = num_new;
  s.block_table = req->block_table.data();
  s.num_blocks = static_cast<int32_t>(req->block_table.size());
  if (sliding_kv_ != nullptr) {
    s.sliding_block_table = req->sliding_block_table.data();
    s.num_sliding_blocks = static_cast<int32_t>(req->sliding_block_table.size());
  }
  // Sample only once the whole known sequence has been computed. Prompt logprobs need the
  // logits of every prompt position, in every chunk, until the first token exists.
  if (req->params.prompt_logprobs >= 0 && req->num_output_tokens() == 0)
    s.logits_mode = LogitsMode::kAll;
  else
    s.logits_mode = req->num_computed_tokens + num_new == req->num_tokens() ? LogitsMode::kLast
                                                                            : LogitsMode::kNone;
  out.seqs.push_back(s);
  out.total_num_scheduled_tokens += num_new;
}

void Scheduler::preempt(Request* req) {
  free_blocks(req);  // its full blocks stay cached: recompute will hit them
  req->num_computed_tokens = 0;
  ++req->num_preemptions;
  ++num_preemptions_total_;
  last_preempted_.push_back(req->request_id);
  enqueue_waiting(req, /*front=*/true);
}

void Scheduler::free_outside_window(Request* req) {
  // Sliding window: this step's first query (position num_computed_tokens) and every later one
  // see nothing before num_computed_tokens - window + 1.
  if (config_.sliding_window > 0)
    window_kv().free_blocks_before(sliding_kv_ ? req->sliding_block_table : req->block_table,
                                   int64_t{req->num_computed_tokens} - config_.sliding_window + 1);
}

Request* Scheduler::pick_victim() const {
  if (config_.policy == SchedulingPolicy::kPriority)
    return *std::max_element(running_.begin(), running_.end(), runs_before);
  return running_.back();  // most recently admitted
}

void Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget, bool& preempted) {
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Request* req = running_[i];
    const int32_t num_new = std::min(req->num_tokens() - req->num_computed_tokens, budget);
    free_outside_window(req);
    bool scheduled = true;
    while (!allocate(req, req->num_computed_tokens + num_new, {}, {})) {
      Request* victim = pick_victim();
      const auto pos = std::find(running_.begin(), running_.end(), victim);
      // Requests before index i are already in this step's output: never take their blocks.
      if (pos - running_.begin() < static_cast<std::ptrdiff_t>(i)) victim = req;
      running_.erase(std::find(running_.begin(), running_.end(), victim));
      preempt(victim);
      preempted = true;
      if (victim == req) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) continue;  // running_[i] is now the next request
    add_scheduled(out, req, num_new);
    budget -= num_new;
    ++i;
  }
}

bool Scheduler::batch_active() const {
  if (!running_.empty()) return true;
  return std::any_of(waiting_.begin(), waiting_.end(),
                     [](const Request* r) { return r->batch_member; });
}

void Scheduler::maybe_form_batch(double now) {
  if (batch_active() || waiting_.empty()) return;
  if (config_.batching == BatchingMode::kDynamic) {
    double oldest = waiting_.front()->timing.arrival_time;
    for (const Request* r : waiting_) oldest = std::min(oldest, r->timing.arrival_time);
    const bool full = num_waiting() >= config_.max_num_seqs;
    const bool timed_out = now - oldest >= config_.max_delay_ms / 1000.0;
    if (!full && !timed_out) return;
  }
  int32_t n = 0;
  for (Request* r : waiting_) {
    if (n++ == config_.max_num_seqs) break;
    r->batch_member = true;
  }
}

int32_t Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget, double now) {
  const bool batched = config_.batching != BatchingMode::kContinuous;
  if (batched) maybe_form_batch(now);
  int32_t admitted = 0;
  auto it = waiting_.begin();
  while (it != waiting_.end() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* req = *it;
    if (batched && !req->batch_member) {
      ++it;  // not part of the current batch: waits for the next one
      continue;
    }
    // Prefix cache: a request starting from nothing (new, or preempted) begins after its
    // longest run of cached full blocks, always computing at least its last token (whose
    // logits it needs). Requests that want prompt logprobs compute every position.
    hits_.clear();
    sliding_hits_.clear();
    const bool lookup = req->num_computed_tokens == 0 && kv_.prefix_caching() &&
                        req->use_prefix_cache && req->params.prompt_logprobs < 0;
    if (lookup) {
      extend_block_hashes(req->token_ids, kv_.block_size(), req->cache_salt, req->block_hashes);
      const int32_t max_blocks = (req->num_tokens() - 1) / kv_.block_size();
      if (sliding_kv_ != nullptr) {
        // Hybrid: every block of the prefix in the full layers' pool, the last window's in the
        // sliding layers' (blocks before it are null entries there, as if freed).
        kv_.find_cached_prefix(req->block_hashes, max_blocks, hits_);
        sliding_kv_->find_cached_window_prefix(req->block_hashes, static_cast<int32_t>(hits_.size()),
                                               config_.sliding_window, sliding_hits_);
        hits_.resize(sliding_hits_.size());
      } else if (config_.sliding_window > 0) {  // every layer slides: only the last window's blocks
        kv_.find_cached_window_prefix(req->block_hashes, max_blocks, config_.sliding_window, hits_);
      } else {
        kv_.find_cached_prefix(req->block_hashes, max_blocks, hits_);
      }
    }
    const int32_t num_hit = static_cast<int32_t>(hits_.size()) * kv_.block_size();
    int32_t num_new = req->num_tokens() - req->num_computed_tokens - num_hit;
    if (num_new > budget) {
      if (!config_.enable_chunked_prefill) break;  // whole prefills only
      num_new = budget;
    }
    if (!allocate(req, req->num_computed_tokens + num_hit + num_new, hits_, sliding_hits_)) break;
    req->num_computed_tokens += num_hit;
    req->num_hashed_blocks = static_cast<int32_t>(hits_.size());
    req->num_hashed_sliding_blocks = static_cast<int32_t>(sliding_hits_.size());
    free_outside_window(req);  // prefix hits wholly before the window are not read
    if (lookup) {
      prefix_cache_queries_ += req->num_tokens();
      prefix_cache_hits_ += num_hit;
      last_prefix_hit_tokens_ += num_hit;
    }
    if (req->num_cached_tokens < 0) req->num_cached_tokens = num_hit;
    it = waiting_.erase(it);
    req->status = RequestStatus::kRunning;
    if (req->timing.first_scheduled_time == 0) req->timing.first_scheduled_time = now;
    running_.push_back(req);
    add_scheduled(out, req, num_new);
    budget -= num_new;
    ++admitted;
  }
  return admitted;
}

SchedulerOutput Scheduler::schedule(double now) {
  SchedulerOutput out;
  last_preempted_.clear();
  last_prefix_hit_tokens_ = 0;
  int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;
  const bool prefill_first = config_.batching == BatchingMode::kContinuous &&
                             !config_.enable_chunked_prefill &&
                             config_.prefill_policy == PrefillPolicy::kPrefillFirst;
  if (prefill_first) {
    // Whole prefills get the step to themselves; decodes run only when none can start.
    if (schedule_waiting(out, budget, now) == 0) schedule_running(out, budget, preempted);
  } else {
    schedule_running(out, budget, preempted);
    // After a preemption the pool is known to be short: admit nobody new this step.
    if (!preempted) schedule_waiting(out, budget, now);
  }
  if (config_.check_invariants) check_invariants(out);
  return out;
}

void Scheduler::cache_computed_blocks(Request* req) {
  if (!kv_.prefix_caching()) return;
  const int32_t bs = kv_.block_size();
  const int32_t full = req->num_computed_tokens / bs;
  extend_block_hashes(std::span<const int32_t>(req->token_ids).first(full * bs), bs,
                      req->cache_salt, req->block_hashes);
  kv_.cache_full_blocks(req->block_hashes, req->block_table, full, &req->num_hashed_blocks);
  if (sliding_kv_ != nullptr) {
    // Blocks freed before the window are null entries: index only the live ones past them.
    int32_t first_live = 0;
    while (first_live < full && req->sliding_block_table[first_live] == KVCacheManager::kNullBlock) ++first_live;
    req->num_hashed_sliding_blocks = std::max(req->num_hashed_sliding_blocks, first_live);
    sliding_kv_->cache_full_blocks(req->block_hashes, req->sliding_block_table, full, &req->num_hashed_sliding_blocks);
  }
}

void Scheduler::finish_request(Request* req, FinishReason reason) {
  if (req->status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), req));
  } else if (req->status == RequestStatus::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), req));
  }
  free_blocks(req);
  req->status = RequestStatus::kFinished;
  req->finish_reason = reason;
  req->batch_member = false;
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
    // Sliding window: a running sequence holds no block wholly before its window (so at most
    // ceil(window / block_size) + 1 blocks once decoding), and every block it will read is live.
    // Hybrid KV: the same for the sliding group's table, and the full group's holds every block.
    if (sliding_kv_ != nullptr) {
      LLMS_CHECK(int64_t{s.num_sliding_blocks} * kv_.block_size() >= need && s.num_sliding_blocks == s.num_blocks,
                 "request {}: sliding block table has {} blocks, the full one {}, needs {} tokens", s.request_id,
                 s.num_sliding_blocks, s.num_blocks, need);
      for (int32_t b = 0; b < s.num_blocks; ++b)
        LLMS_CHECK(s.block_table[b] != KVCacheManager::kNullBlock, "request {}: full-attention block {} freed",
                   s.request_id, b);
    }
    if (config_.sliding_window > 0) {
      const int64_t first = s.num_computed_tokens - config_.sliding_window + 1;
      const int32_t* table = sliding_kv_ ? s.sliding_block_table : s.block_table;
      const int32_t num = sliding_kv_ ? s.num_sliding_blocks : s.num_blocks;
      for (int32_t b = 0; b < num; ++b) {
        const bool before = int64_t{b + 1} * kv_.block_size() <= first;
        const bool freed = table[b] == KVCacheManager::kNullBlock;
        LLMS_CHECK(before == freed, "request {}: block {} of a window starting at {} is {}", s.request_id, b, first,
                   freed ? "freed" : "still held");
      }
    }
  }
  // Every block's reference count is the number of block tables holding it; free, cached and
  // used blocks partition the pool (kv_cache/block_pool.h).
  std::vector<const std::vector<int32_t>*> tables;
  for (const Request* r : running_) tables.push_back(&r->block_table);
  for (const Request* r : waiting_) tables.push_back(&r->block_table);
  kv_.check_invariants(tables);
  if (sliding_kv_ != nullptr) {
    std::vector<const std::vector<int32_t>*> sliding;
    for (const Request* r : running_) sliding.push_back(&r->sliding_block_table);
    for (const Request* r : waiting_) sliding.push_back(&r->sliding_block_table);
    sliding_kv_->check_invariants(sliding);
  }
  for (const Request* r : running_) {
    LLMS_CHECK(r->num_hashed_blocks <= static_cast<int32_t>(r->block_table.size()) &&
                   r->num_hashed_blocks * kv_.block_size() <= r->num_computed_tokens,
               "request {}: {} hashed blocks, {} computed tokens", r->request_id,
               r->num_hashed_blocks, r->num_computed_tokens);
    for (int32_t i = 0; i < r->num_hashed_blocks; ++i) {
      // An indexed block of a sequence holds exactly that sequence's tokens there.
      const int32_t id = r->block_table[i];
      if (id != KVCacheManager::kNullBlock && kv_.pool().has_hash(id))
        LLMS_CHECK(kv_.pool().hash(id) == r->block_hashes[i],
                   "request {}: block {} is indexed by another hash", r->request_id, id);
    }
  }
}

}  // namespace llmserve
