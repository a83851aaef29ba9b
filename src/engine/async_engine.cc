#include "engine/async_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace llmserve {

std::optional<RequestOutput> RequestStream::wait_next(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                    [this] { return !queue_.empty(); }))
    return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

void RequestStream::push(RequestOutput out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
}

AsyncEngine::AsyncEngine(std::unique_ptr<LLMEngine> engine, int32_t max_waiting)
    : engine_(std::move(engine)), max_waiting_(max_waiting) {
  stats_ = engine_->stats();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Expected<std::shared_ptr<RequestStream>> AsyncEngine::submit(EngineRequest request) {
  // check_request only reads immutable config, so it is safe off the engine thread.
  LLMS_RETURN_IF_ERROR(engine_->check_request(request));
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Unavailable("the engine is shutting down");
    if (max_waiting_ > 0) {
      // Requests that will have to wait: those not yet running, less the sequence slots the
      // scheduler still has free (so a burst to an idle server is not refused for the slots
      // it is about to fill).
      const int64_t free_slots = std::max<int64_t>(
          0, int64_t{engine_->config().scheduler.max_num_seqs} - stats_.num_running);
      // in_transit_: taken by the engine thread but not yet in the stats snapshot (a burst
      // within one step would otherwise pass the cap).
      const int64_t waiting = std::max<int64_t>(
          0, static_cast<int64_t>(pending_adds_.size()) + in_transit_ + stats_.num_waiting - free_slots);
      if (waiting >= max_waiting_)
        return Unavailable(
            "the server is busy: {} requests are already waiting (--max-waiting {}); retry later",
            waiting, max_waiting_);
    }
    const int64_t id = next_request_id_++;
    stream = std::make_shared<RequestStream>(id);
    streams_.emplace(id, stream);
    {
      std::lock_guard<std::mutex> olock(observer_mu_);
      if (observer_) observer_->on_submit(id, request);
    }
    pending_adds_.emplace_back(id, std::move(request));
  }
  cv_.notify_all();
  return stream;
}

void AsyncEngine::set_observer(EngineObserver* observer) {
  std::lock_guard<std::mutex> lock(observer_mu_);
  observer_ = observer;
}

void AsyncEngine::abort(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_aborts_.push_back(request_id);
  }
  cv_.notify_all();
}

void AsyncEngine::abort_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, stream] : streams_) pending_aborts_.push_back(id);
  }
  cv_.notify_all();
}

size_t AsyncEngine::num_unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void AsyncEngine::loop() {
  for (;;) {
    std::deque<std::pair<int64_t, EngineRequest>> adds;
    std::deque<int64_t> aborts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || !pending_adds_.empty() || !pending_aborts_.empty() ||
               engine_->has_unfinished_requests();
      });
      if (stop_) break;
      adds.swap(pending_adds_);
      aborts.swap(pending_aborts_);
      in_transit_ = static_cast<int64_t>(adds.size());
    }
    std::vector<RequestOutput> refused;  // for the observer
    for (auto& [id, req] : adds) {
      Status st = engine_->add_request(id, std::move(req));
      if (!st.ok()) {  // validated in submit(); only a race with config could land here
        RequestOutput out;
        out.request_id = id;
        out.finished = true;
        out.finish_reason = FinishReason::kAbort;
        refused.push_back(out);
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = streams_.find(id); it != streams_.end()) {
          it->second->push(std::move(out));
          streams_.erase(it);
        }
      }
    }
    for (int64_t id : aborts) engine_->abort_request(id);

    const int64_t steps_before = engine_->stats().num_steps;
    std::vector<RequestOutput> outputs = engine_->step();
    EngineStats stats = engine_->stats();
    if (stats.num_steps == steps_before && outputs.empty()) {
      // Work is queued but nothing could be scheduled (e.g. the dynamic batcher is waiting
      // for its delay): do not spin on the engine lock.
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    if (stats.num_steps != steps_before || !outputs.empty() || !refused.empty()) {
      std::lock_guard<std::mutex> olock(observer_mu_);
      if (observer_) {
        if (!refused.empty()) observer_->on_step(*engine_, refused);
        observer_->on_step(*engine_, outputs);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = stats;
    in_transit_ = 0;  // now counted in stats_ (running or waiting)
    for (auto& out : outputs) {
      auto it = streams_.find(out.request_id);
      if (it == streams_.end()) continue;
      const bool finished = out.finished;
      it->second->push(std::move(out));
      if (finished) streams_.erase(it);
    }
  }
  // Shutdown: abort everything still in flight so waiting clients see a final output.
  for (auto& [id, stream] : streams_) {
    engine_->abort_request(id);
    RequestOutput out;
    out.request_id = id;
    out.finished = true;
    out.finish_reason = FinishReason::kAbort;
    stream->push(std::move(out));
  }
  streams_.clear();
}

}  // namespace llmserve
