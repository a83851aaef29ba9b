// The HTTP side of one engine request: the handler thread that submitted it waits on its
// RequestStream in short slices and gives up (aborting the request) when the client is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/async_engine.h"
#include "server/metrics.h"

namespace llmserve {

/// How often a waiting HTTP thread wakes to ask whether it should give up.
inline constexpr double kStreamPollSeconds = 0.05;

/// What the access log and the failure counters learn about the HTTP request served on the
/// current thread. http_server.cc points current_request_record() at one for the duration of
/// a request (handler, then streaming content provider, then its logger: all on one httplib
/// thread) and null between requests; InflightRequests fill it in from the outputs they read.
struct RequestRecord {
  /// Why the server gave up on the request before its last output, if it did.
  enum class AbortCause { kNone, kClientGone, kShutdown };

  std::string request_id;        // the X-Request-Id of the response
  int64_t prompt_tokens = 0;     // of the first sample (all samples share the prompt)
  int64_t generated_tokens = 0;  // summed over samples ("n")
  FinishReason finish_reason = FinishReason::kNone;  // of the last sample that finished
  AbortCause abort_cause = AbortCause::kNone;
  std::string user;               // the request's "user" field (OpenAI), if sent
  std::string safety_identifier;  // the request's "safety_identifier" (OpenAI), if sent
};

/// The record of the request this thread serves, or null (outside a request).
RequestRecord*& current_request_record();

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

  /// Aborts the engine request unless it already finished. Idempotent. Outputs already
  /// waiting in the stream are consumed first (metrics as for next()): if the final one is
  /// among them the request counts as finished with its own reason, not as an abort. The
  /// current request record (if any) gets abort cause kClientGone unless a cause is set.
  void abort();

  bool finished() const { return finished_; }
  int64_t request_id() const { return stream_->request_id(); }

 private:
  AsyncEngine& engine_;
  ServerMetrics& metrics_;
  std::shared_ptr<RequestStream> stream_;
  /// Updates current_request_record() with `out`.
  void note(const RequestOutput& out);

  RequestMetricsState metrics_state_;
  int32_t noted_output_tokens_ = 0;  // num_output_tokens already added to the record
  bool finished_ = false;  // the engine sent the last output (or we aborted)
  double last_cancel_check_;  // now_seconds() of the last should_cancel call
};

}  // namespace llmserve
