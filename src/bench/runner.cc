#include "bench/runner.h"

#include <chrono>
#include <deque>
#include <thread>

#include "common/timing.h"
#include "engine/llm_engine.h"

namespace llmserve::bench {

namespace {

EngineRequest to_engine_request(const BenchRequest& b, std::vector<int32_t> prompt,
                                float temperature) {
  EngineRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.params.max_tokens = b.output_len;
  r.params.ignore_eos = true;
  r.params.temperature = temperature;
  return r;
}

/// The prompt request `i` will have when each earlier turn generated its full output_len
/// (ignore_eos makes that exact unless max_model_len stops it, which check_request refuses):
/// the earlier turns' ids with their outputs stood in for by a valid id. Every `follows`
/// names an earlier request (check_follow_ups), so the chain ends.
std::vector<int32_t> longest_prompt(const std::vector<BenchRequest>& requests, size_t i) {
  std::vector<size_t> chain;
  for (int64_t k = static_cast<int64_t>(i); k >= 0; k = requests[static_cast<size_t>(k)].follows)
    chain.push_back(static_cast<size_t>(k));
  std::vector<int32_t> prompt;
  for (size_t c = chain.size(); c-- > 0;) {
    const BenchRequest& b = requests[chain[c]];
    prompt.insert(prompt.end(), b.prompt_token_ids.begin(), b.prompt_token_ids.end());
    if (c > 0 && !prompt.empty())
      prompt.insert(prompt.end(), static_cast<size_t>(b.output_len), prompt.back());
  }
  return prompt;
}

}  // namespace

Status check_follow_ups(const std::vector<BenchRequest>& requests) {
  std::vector<uint8_t> followed(requests.size(), 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t f = requests[i].follows;
    if (f < 0) continue;
    if (f >= static_cast<int64_t>(i))
      return InvalidArgument("request {} follows request {}, which is not an earlier one", i, f);
    if (followed[static_cast<size_t>(f)]++)
      return InvalidArgument("request {} is followed by two requests", f);
  }
  return Status::Ok();
}

namespace {

Status check_all(const LLMEngine& engine, const std::vector<BenchRequest>& requests,
                 float temperature) {
  LLMS_RETURN_IF_ERROR(check_follow_ups(requests));
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t f = requests[i].follows;
    std::vector<int32_t> prompt =
        f < 0 ? requests[i].prompt_token_ids : longest_prompt(requests, i);
    const size_t len = prompt.size();
    Status st = engine.check_request(to_engine_request(requests[i], std::move(prompt), temperature));
    if (!st.ok())
      return InvalidArgument("request {} (prompt {} tokens{}, output {} tokens): {}", i, len,
                             f < 0 ? "" : fmt::format(" at turn {}", requests[i].turn + 1),
                             requests[i].output_len, st.message());
  }
  return Status::Ok();
}

/// The state of a run in progress.
class InProcessRun {
 public:
  InProcessRun(LLMEngine& engine, const std::vector<BenchRequest>& requests,
               const RunOptions& options)
      : engine_(engine), requests_(requests), options_(options) {}

  Expected<RunResult> run();

 private:
  Status admit_arrived(double now);
  Status add(size_t i, double arrival);
  void step_once();
  void record(const RequestOutput& out);
  void done(size_t i);
  void sleep_until_next_arrival() const;
  bool roots_left() const { return next_root_ < roots_.size(); }

  LLMEngine& engine_;
  const std::vector<BenchRequest>& requests_;
  const RunOptions& options_;
  RunResult result_;
  std::vector<size_t> roots_;        // requests sent at their arrival offset, in order
  std::vector<int64_t> follow_up_;   // per request: the request that follows it (-1: none)
  std::deque<size_t> ready_;         // follow-ups whose previous turn has finished
  size_t next_root_ = 0;             // first root not yet added
  int64_t num_done_ = 0;             // finished requests
};

Expected<RunResult> InProcessRun::run() {
  const size_t n = requests_.size();
  result_.requests.resize(n);
  result_.finish_step.assign(n, -1);
  follow_up_.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (requests_[i].follows < 0) roots_.push_back(i);
    else follow_up_[static_cast<size_t>(requests_[i].follows)] = static_cast<int64_t>(i);
  }
  const EngineConfig& config = engine_.config();
  result_.max_num_seqs = config.scheduler.max_num_seqs;
  result_.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  result_.block_size = config.cache.block_size;
  result_.num_kv_blocks = config.cache.num_kv_blocks;
  result_.prefix_caching = config.cache.enable_prefix_caching;
  result_.max_model_len = engine_.max_model_len();
  const EngineStats before = engine_.stats();
  result_.start_time = now_seconds();
  while (roots_left() || !ready_.empty() || engine_.has_unfinished_requests()) {
    LLMS_RETURN_IF_ERROR(admit_arrived(now_seconds()));
    if (engine_.has_unfinished_requests()) step_once();
    else if (roots_left() && ready_.empty()) sleep_until_next_arrival();
  }
  result_.end_time = now_seconds();
  const EngineStats after = engine_.stats();
  result_.prefix_cache_queries = after.prefix_cache_queries_total - before.prefix_cache_queries_total;
  result_.prefix_cache_hits = after.prefix_cache_hits_total - before.prefix_cache_hits_total;
  return std::move(result_);
}

Status InProcessRun::admit_arrived(double now) {
  for (; roots_left(); ++next_root_) {
    const size_t i = roots_[next_root_];
    const double arrival = result_.start_time + requests_[i].arrival_offset_s;
    if (arrival > now) break;
    LLMS_RETURN_IF_ERROR(add(i, arrival));
  }
  while (!ready_.empty()) {
    const size_t i = ready_.front();
    ready_.pop_front();
    LLMS_RETURN_IF_ERROR(add(i, now));
  }
  return Status::Ok();
}

Status InProcessRun::add(size_t i, double arrival) {
  const BenchRequest& b = requests_[i];
  RequestRecord& rec = result_.requests[i];
  rec.id = static_cast<int64_t>(i);
  rec.conversation = b.conversation;
  rec.turn = b.turn;
  if (b.follows >= 0) {  // the conversation so far, then the new user turn
    const RequestRecord& prev = result_.requests[static_cast<size_t>(b.follows)];
    rec.prompt_token_ids = prev.prompt_token_ids;
    rec.prompt_token_ids.insert(rec.prompt_token_ids.end(), prev.output_token_ids.begin(),
                                prev.output_token_ids.end());
  }
  rec.prompt_token_ids.insert(rec.prompt_token_ids.end(), b.prompt_token_ids.begin(),
                              b.prompt_token_ids.end());
  rec.prompt_len = static_cast<int32_t>(rec.prompt_token_ids.size());
  rec.target_output_len = b.output_len;
  rec.arrival_time = arrival;
  EngineRequest r = to_engine_request(b, rec.prompt_token_ids, options_.temperature);
  r.arrival_time = arrival;
  return engine_.add_request(rec.id, std::move(r));
}

void InProcessRun::step_once() {
  const int64_t steps_before = engine_.stats().num_steps;
  std::vector<RequestOutput> outputs = engine_.step();
  if (engine_.stats().num_steps != steps_before) {
    result_.steps.push_back(engine_.last_step());
  } else if (outputs.empty()) {
    // Work is queued but nothing was schedulable (the dynamic batcher is waiting out its
    // delay): yield briefly instead of spinning.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (const RequestOutput& o : outputs) record(o);
}

void InProcessRun::record(const RequestOutput& o) {
  if (o.request_id < 0 || static_cast<size_t>(o.request_id) >= result_.requests.size()) return;
  const size_t i = static_cast<size_t>(o.request_id);
  RequestRecord& rec = result_.requests[i];
  const double t = o.timing.last_token_time > 0 ? o.timing.last_token_time : now_seconds();
  for (size_t k = 0; k < o.new_token_ids.size(); ++k) rec.token_times.push_back(t);
  rec.output_token_ids.insert(rec.output_token_ids.end(), o.new_token_ids.begin(),
                              o.new_token_ids.end());
  rec.output_tokens = o.num_output_tokens;
  rec.num_preemptions = o.num_preemptions;
  rec.cached_tokens = o.num_cached_tokens;
  if (!o.finished) return;
  rec.finished_time = o.timing.finished_time > 0 ? o.timing.finished_time : now_seconds();
  rec.success = o.finish_reason != FinishReason::kAbort;
  result_.finish_step[i] = static_cast<int64_t>(result_.steps.size()) - 1;
  done(i);
}

/// Counts request i as done and releases its follow-up (or, when it failed, fails the rest of
/// its conversation).
void InProcessRun::done(size_t i) {
  ++num_done_;
  if (options_.progress) options_.progress(num_done_, static_cast<int64_t>(requests_.size()));
  const int64_t next = follow_up_[i];
  if (next < 0) return;
  if (result_.requests[i].success) {
    ready_.push_back(static_cast<size_t>(next));
    return;
  }
  RequestRecord& rec = result_.requests[static_cast<size_t>(next)];
  rec.id = next;
  rec.conversation = requests_[static_cast<size_t>(next)].conversation;
  rec.turn = requests_[static_cast<size_t>(next)].turn;
  rec.error = "not sent: the previous turn of its conversation failed";
  done(static_cast<size_t>(next));
}

void InProcessRun::sleep_until_next_arrival() const {
  const double wake = result_.start_time + requests_[roots_[next_root_]].arrival_offset_s;
  const double wait = wake - now_seconds();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
}

}  // namespace

Expected<RunResult> run_in_process(LLMEngine& engine, const std::vector<BenchRequest>& requests,
                                   const RunOptions& options) {
  LLMS_RETURN_IF_ERROR(check_all(engine, requests, options.temperature));
  InProcessRun run(engine, requests, options);
  return run.run();
}

}  // namespace llmserve::bench
