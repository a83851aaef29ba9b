// EventHub: the live dashboard's event source (GET /ui/events, docs/ui.md). It watches the
// engine as an EngineObserver and fans what it sees out to the open dashboards as server-sent
// events:
//
//   hello    once per connection: model, pool size, block size, limits
//   step     one per engine step (StepRecord + the requests it finished)
//   kv       the block pool (KvSnapshot), at most every HubConfig::kv_interval_s (and after
//            the step that leaves the engine idle), only when it changed
//   request  a request admitted (first scheduled) and finished, with its timings
//   metrics  once a second, on demand (metrics_event): gauges and TTFT / ITL percentiles
//            over the last HubConfig::metrics_window_s seconds
//   dropped  the events this connection lost so far, when it lost some
//
// The engine thread never waits on a client: each subscription has a byte-bounded queue, and
// what does not fit is dropped and counted (a slow browser loses steps, the engine does not
// slow down). With no subscription the engine thread does O(requests in the step) bookkeeping
// and builds no JSON.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/async_engine.h"

namespace llmserve {
class Tokenizer;
}

namespace llmserve::dashboard {

struct HubConfig {
  /// Include each request's prompt text (its first 4096 tokens) in `request` events
  /// (serve --ui-show-prompts).
  bool show_prompts = false;
  /// Dashboards open at once; subscribe() refuses more.
  size_t max_subscribers = 8;
  /// Bytes of events queued per subscription before new ones are dropped.
  size_t max_queued_bytes = size_t{4} << 20;
  /// Least seconds between two `kv` events.
  double kv_interval_s = 0.25;
  /// Seconds of history behind the `metrics` event's rates and percentiles.
  double metrics_window_s = 60;
};

/// What the `hello` event says about the server (fixed for its lifetime).
struct HelloInfo {
  std::string model;
  std::string replica_id;  // "" = none
  int32_t num_total_blocks = 0;
  int32_t block_size = 0;
  int32_t max_num_batched_tokens = 0;
  int32_t max_num_seqs = 0;
};

/// One open event stream. Thread-safe.
class Subscription {
 public:
  /// Waits up to timeout_s seconds for events and returns them as SSE text ("event: NAME\n
  /// data: JSON\n\n" each, in order), "" on timeout. A `dropped` event comes first when
  /// events were dropped since the last call.
  std::string wait(double timeout_s);
  /// Events dropped from this subscription so far.
  uint64_t dropped() const;
  /// Bytes queued now (at most HubConfig::max_queued_bytes).
  size_t queued_bytes() const;

 private:
  friend class EventHub;
  void push(const std::shared_ptr<const std::string>& event, size_t max_bytes);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dropped_reported_ = 0;
};

class EventHub : public EngineObserver {
 public:
  /// `tokenizer` (may be null) decodes prompts when config.show_prompts.
  EventHub(HubConfig config, HelloInfo hello, const Tokenizer* tokenizer);

  /// Opens a stream, already holding `hello`, the last `kv` event and a `request` event per
  /// request in flight. nullptr when config.max_subscribers are open.
  std::shared_ptr<Subscription> subscribe();
  /// HelloInfo::replica_id, known once the server is bound.
  void set_replica_id(std::string replica_id);
  void unsubscribe(const std::shared_ptr<Subscription>& sub);
  size_t num_subscribers() const;
  size_t max_subscribers() const { return config_.max_subscribers; }
  /// Events dropped over all subscriptions, ever (llmserve:ui_events_dropped_total).
  uint64_t dropped_total() const;

  /// The `metrics` event for time `now` (now_seconds clock), SSE-framed.
  std::string metrics_event(double now);

  void on_submit(int64_t request_id, const EngineRequest& request) override;
  void on_step(const LLMEngine& engine, const std::vector<RequestOutput>& outputs) override;

 private:
  struct Tracked {  // one request from submit to finish
    std::string api_id;
    std::string prompt;  // only with show_prompts
    double arrival = 0;
    int32_t num_prompt_tokens = 0;
    int32_t num_cached_tokens = 0;
    int32_t num_output_tokens = 0;
    double first_scheduled = 0, first_token = 0, last_token = 0;  // 0 = not yet
    std::vector<double> itl_s;  // at most kMaxItlPerRequest
  };
  static constexpr size_t kMaxItlPerRequest = 1024;
  static constexpr size_t kMaxTracked = 100000;  // requests that never finish are dropped
  static constexpr size_t kMaxPromptTokensShown = 4096;  // show_prompts: the prompt's start

  std::string request_event(int64_t id, const Tracked& t, const char* finish_reason) const;
  void publish(std::shared_ptr<const std::string> event);  // mu_ held
  void prune(double now);                                  // mu_ held

  const HubConfig config_;
  HelloInfo hello_;  // replica_id guarded by mu_
  const Tokenizer* tokenizer_;

  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Subscription>> subs_;
  uint64_t dropped_total_ = 0;
  std::unordered_map<int64_t, Tracked> tracked_;
  std::shared_ptr<const std::string> last_kv_;
  std::optional<KvSnapshot> last_kv_snapshot_;  // what last_kv_ shows
  double last_kv_time_ = -1e300;
  int64_t last_step_idx_ = -1;  // the last StepRecord published
  // The last step's gauges, and samples over the metrics window (time, value).
  int32_t num_running_ = 0, num_waiting_ = 0;
  double kv_cache_usage_ = 0;
  std::deque<std::pair<double, int32_t>> output_tokens_;  // per step
  std::deque<std::pair<double, double>> ttft_s_, itl_s_;
};

}  // namespace llmserve::dashboard
