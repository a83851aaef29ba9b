#include "bench/runner.h"

#include <chrono>
#include <thread>

#include "common/timing.h"
#include "engine/llm_engine.h"

namespace llmserve::bench {

namespace {

EngineRequest to_engine_request(const BenchRequest& b, float temperature) {
  EngineRequest r;
  r.prompt_token_ids = b.prompt_token_ids;
  r.params.max_tokens = b.output_len;
  r.params.ignore_eos = true;
  r.params.temperature = temperature;
  return r;
}

Status check_all(const LLMEngine& engine, const std::vector<BenchRequest>& requests,
                 float temperature) {
  for (size_t i = 0; i < requests.size(); ++i) {
    Status st = engine.check_request(to_engine_request(requests[i], temperature));
    if (!st.ok())
      return InvalidArgument("request {} (prompt {} tokens, output {} tokens): {}", i,
                             requests[i].prompt_token_ids.size(), requests[i].output_len,
                             st.message());
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
  void step_once();
  void record(const RequestOutput& out);
  void sleep_until_next_arrival() const;

  LLMEngine& engine_;
  const std::vector<BenchRequest>& requests_;
  const RunOptions& options_;
  RunResult result_;
  size_t next_ = 0;        // first request not yet added
  int64_t num_done_ = 0;   // finished requests
};

Expected<RunResult> InProcessRun::run() {
  const size_t n = requests_.size();
  result_.requests.resize(n);
  result_.finish_step.assign(n, -1);
  result_.max_num_seqs = engine_.config().scheduler.max_num_seqs;
  result_.max_num_batched_tokens = engine_.config().scheduler.max_num_batched_tokens;
  result_.block_size = engine_.config().cache.block_size;
  result_.max_model_len = engine_.max_model_len();
  result_.start_time = now_seconds();
  while (next_ < n || engine_.has_unfinished_requests()) {
    LLMS_RETURN_IF_ERROR(admit_arrived(now_seconds()));
    if (engine_.has_unfinished_requests()) step_once();
    else if (next_ < n) sleep_until_next_arrival();
  }
  result_.end_time = now_seconds();
  return std::move(result_);
}

Status InProcessRun::admit_arrived(double now) {
  for (; next_ < requests_.size(); ++next_) {
    const BenchRequest& b = requests_[next_];
    const double arrival = result_.start_time + b.arrival_offset_s;
    if (arrival > now) break;
    RequestRecord& rec = result_.requests[next_];
    rec.id = static_cast<int64_t>(next_);
    rec.prompt_len = static_cast<int32_t>(b.prompt_token_ids.size());
    rec.target_output_len = b.output_len;
    rec.arrival_time = arrival;
    EngineRequest r = to_engine_request(b, options_.temperature);
    r.arrival_time = arrival;
    LLMS_RETURN_IF_ERROR(engine_.add_request(rec.id, std::move(r)));
  }
  return Status::Ok();
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
  RequestRecord& rec = result_.requests[static_cast<size_t>(o.request_id)];
  const double t = o.timing.last_token_time > 0 ? o.timing.last_token_time : now_seconds();
  for (size_t i = 0; i < o.new_token_ids.size(); ++i) rec.token_times.push_back(t);
  rec.output_tokens = o.num_output_tokens;
  rec.num_preemptions = o.num_preemptions;
  if (!o.finished) return;
  rec.finished_time = o.timing.finished_time > 0 ? o.timing.finished_time : now_seconds();
  rec.success = o.finish_reason != FinishReason::kAbort;
  result_.finish_step[static_cast<size_t>(o.request_id)] =
      static_cast<int64_t>(result_.steps.size()) - 1;
  ++num_done_;
  if (options_.progress) options_.progress(num_done_, static_cast<int64_t>(requests_.size()));
}

void InProcessRun::sleep_until_next_arrival() const {
  const double wake = result_.start_time + requests_[next_].arrival_offset_s;
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
