// The HTTP side of one engine request: the handler thread that submitted it waits on its
// RequestStream in short slices and gives up (aborting the request) when the client is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "engine/async_engine.h"
#include "server/metrics.h"

namespace llmserve {

/// How often a waiting HTTP thread wakes to ask whether it should give up.
inline constexpr double kStreamPollSeconds = 0.05;

/// One request in flight, owned by the HTTP thread serving it. If it is destroyed before the
/// engine reported it finished (client gone, server stopping, an exception), the engine
/// request is aborted so its KV blocks are freed.
class InflightRequest {
 public:
  InflightRequest(AsyncEngine& engine, ServerMetrics& metrics,
                  std::shared_ptr<RequestStream> stream);
  ~InflightRequest();
  InflightRequest(const InflightRequest&) = delete;
  InflightRequest& operator=(const InflightRequest&) = delete;

  /// Blocks until the engine's next output for this request. At least every
  /// kStreamPollSeconds (with or without outputs) it calls `should_cancel`; when that returns
  /// true the request is aborted and nullopt returned. Every output received is fed to the
  /// metrics (counters, inter-token gaps; the last one records the request). After the last
  /// output (or an abort) it returns nullopt at once.
  std::optional<RequestOutput> next(const std::function<bool()>& should_cancel);

  /// Waits up to timeout_s for the next output, without asking whether to cancel (callers
  /// that watch several requests ask themselves). nullopt when none came in time or the
  /// request already finished; metrics as for next().
  std::optional<RequestOutput> poll(double timeout_s);

  /// Aborts the engine request unless it already finished. Idempotent.
  void abort();

  bool finished() const { return finished_; }
  int64_t request_id() const { return stream_->request_id(); }

 private:
  AsyncEngine& engine_;
  ServerMetrics& metrics_;
  std::shared_ptr<RequestStream> stream_;
  RequestMetricsState metrics_state_;
  bool finished_ = false;  // the engine sent the last output (or we aborted)
  double last_cancel_check_;  // now_seconds() of the last should_cancel call
};

}  // namespace llmserve
