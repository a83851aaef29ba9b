// AsyncEngine: runs LLMEngine's step loop on one dedicated engine thread. Other threads (HTTP
// handlers) submit tokenized requests and read each request's outputs from its RequestStream;
// they never run model code.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/status.h"
#include "engine/llm_engine.h"
#include "engine/request_output.h"

namespace llmserve {

/// Thread-safe queue of one request's outputs, filled by the engine thread.
class RequestStream {
 public:
  explicit RequestStream(int64_t request_id) : request_id_(request_id) {}
  int64_t request_id() const { return request_id_; }

  /// Waits up to timeout_s seconds for the next output; nullopt on timeout.
  std::optional<RequestOutput> wait_next(double timeout_s);
  /// Called by the engine thread.
  void push(RequestOutput out);

 private:
  int64_t request_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
};

/// Watches the engine from inside (the live dashboard, server/ui_routes.h). Callbacks must
/// return quickly and never wait on a client.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  /// The submitting thread, after `request` was accepted as `request_id`.
  virtual void on_submit(int64_t request_id, const EngineRequest& request) = 0;
  /// The engine thread, after each step() that ran a step or produced outputs (requests that
  /// failed to enter the engine come as finished outputs too). `engine` may be queried
  /// (last_step, kv_snapshot, stats) during the call.
  virtual void on_step(const LLMEngine& engine, const std::vector<RequestOutput>& outputs) = 0;
};

class AsyncEngine {
 public:
  /// Takes ownership of a loaded engine and starts the engine thread. `max_waiting` > 0 caps
  /// the requests that must wait: those accepted but not yet running (submitted, or waiting
  /// in the scheduler, as of the last step's snapshot) less the free max_num_seqs slots.
  /// submit() beyond it fails with Unavailable. 0 = unlimited.
  explicit AsyncEngine(std::unique_ptr<LLMEngine> engine, int32_t max_waiting = 0);
  ~AsyncEngine();  // stops the thread; unfinished requests are aborted

  /// Validates (the same checks as LLMEngine::add_request: prompt length vs max_model_len,
  /// max_tokens, KV capacity, sampling params) and enqueues. Errors are InvalidArgument /
  /// ResourceExhausted with a message naming the numbers involved (for an HTTP 400), or
  /// Unavailable when max_waiting requests already wait or the engine is stopping (HTTP 429).
  Expected<std::shared_ptr<RequestStream>> submit(EngineRequest request);

  /// Aborts a request (client went away). Its KV blocks are freed by the next step.
  void abort(int64_t request_id);

  /// Aborts every request submitted and not finished yet (server shutdown deadline): each
  /// stream gets a final output with finish_reason abort after the next step.
  void abort_all();

  /// Installs (or, with nullptr, removes) the one observer. Once this returns, a removed
  /// observer is no longer called.
  void set_observer(EngineObserver* observer);

  /// The cap on waiting requests (0 = unlimited).
  int32_t max_waiting() const { return max_waiting_; }

  /// Requests submitted whose final output has not been pushed yet.
  size_t num_unfinished() const;

  /// Snapshot of engine gauges (updated after every step).
  EngineStats stats() const;

  /// Immutable facts about the loaded model, safe from any thread.
  const LLMEngine& engine() const { return *engine_; }

 private:
  void loop();

  std::unique_ptr<LLMEngine> engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, EngineRequest>> pending_adds_;
  std::deque<int64_t> pending_aborts_;
  std::unordered_map<int64_t, std::shared_ptr<RequestStream>> streams_;
  EngineStats stats_;
  int64_t next_request_id_ = 1;
  int64_t in_transit_ = 0;  // adds the engine thread took, not yet counted in stats_
  int32_t max_waiting_ = 0;
  bool stop_ = false;
  std::mutex observer_mu_;               // held while the observer is called or replaced
  EngineObserver* observer_ = nullptr;
  std::thread thread_;
};

}  // namespace llmserve
