#include "server/engine_bridge.h"

#include <utility>

#include "common/timing.h"

namespace llmserve {

RequestRecord*& current_request_record() {
  thread_local RequestRecord* record = nullptr;
  return record;
}

void InflightRequest::note(const RequestOutput& out) {
  RequestRecord* rec = current_request_record();
  if (!rec) return;
  if (rec->prompt_tokens == 0 && out.num_prompt_tokens > 0)
    rec->prompt_tokens = out.num_prompt_tokens;
  if (out.num_output_tokens > noted_output_tokens_) {
    rec->generated_tokens += out.num_output_tokens - noted_output_tokens_;
    noted_output_tokens_ = out.num_output_tokens;
  }
  if (out.finished)
    rec->finish_reason =
        out.finish_reason == FinishReason::kNone ? FinishReason::kAbort : out.finish_reason;
}

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
    if (out) {
      metrics_.observe_output(&metrics_state_, *out);
      note(*out);
    }
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
  note(*out);
  if (out->finished) finished_ = true;
  return out;
}

void InflightRequest::abort() {
  if (finished_) return;
  finished_ = true;
  // Outputs the engine already pushed but nobody read yet: if the last one is among them the
  // request did finish (stop or length) and is counted so, not as an abort. (Under load the
  // HTTP thread lags behind the engine; a client leaving at the end of its stream used to
  // turn a request the engine had completed into finished_reason="abort".)
  while (std::optional<RequestOutput> out = stream_->wait_next(0)) {
    metrics_.observe_output(&metrics_state_, *out);
    note(*out);
    if (out->finished) {
      if (RequestRecord* rec = current_request_record();
          rec && rec->abort_cause == RequestRecord::AbortCause::kNone)
        rec->abort_cause = RequestRecord::AbortCause::kClientGone;
      return;
    }
  }
  engine_.abort(stream_->request_id());
  metrics_.record_abort(&metrics_state_);
  if (RequestRecord* rec = current_request_record()) {
    if (rec->abort_cause == RequestRecord::AbortCause::kNone)
      rec->abort_cause = RequestRecord::AbortCause::kClientGone;
    rec->finish_reason = FinishReason::kAbort;
  }
}

}  // namespace llmserve
