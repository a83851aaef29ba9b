#include "server/engine_bridge.h"

#include <utility>

#include "common/timing.h"

namespace llmserve {

InflightRequest::InflightRequest(AsyncEngine& engine, ServerMetrics& metrics,
                                 std::shared_ptr<RequestStream> stream)
    : engine_(engine),
      metrics_(metrics),
      stream_(std::move(stream)),
      last_cancel_check_(now_seconds()) {}

InflightRequest::~InflightRequest() { abort(); }

std::optional<RequestOutput> InflightRequest::next(const std::function<bool()>& should_cancel) {
  if (finished_) return std::nullopt;
  for (;;) {
    std::optional<RequestOutput> out = stream_->wait_next(kStreamPollSeconds);
    if (out) metrics_.observe_output(&metrics_state_, *out);
    if (out && out->finished) {
      finished_ = true;
      return out;
    }
    // Ask at least every kStreamPollSeconds, also while outputs keep coming (a non-streaming
    // request writes nothing until the end, so only this notices its client leaving).
    const double now = now_seconds();
    if (!out || now - last_cancel_check_ >= kStreamPollSeconds) {
      last_cancel_check_ = now;
      if (should_cancel && should_cancel()) {
        abort();
        return std::nullopt;
      }
    }
    if (out) return out;
  }
}

std::optional<RequestOutput> InflightRequest::poll(double timeout_s) {
  if (finished_) return std::nullopt;
  std::optional<RequestOutput> out = stream_->wait_next(timeout_s);
  if (!out) return std::nullopt;
  metrics_.observe_output(&metrics_state_, *out);
  if (out->finished) finished_ = true;
  return out;
}

void InflightRequest::abort() {
  if (finished_) return;
  finished_ = true;
  engine_.abort(stream_->request_id());
  metrics_.record_abort(&metrics_state_);
}

}  // namespace llmserve
