#include "dashboard/event_hub.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/timing.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::dashboard {

using nlohmann::json;

namespace {

std::shared_ptr<const std::string> sse(const char* name, const json& data) {
  return std::make_shared<const std::string>(
      std::string("event: ") + name + "\ndata: " +
      data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
}

// The per-step events are written straight into text (fmt; doubles in their shortest
// round-trip form): building them as nlohmann::json values cost the engine thread ~5 % of a
// tiny model's steps.
using Buffer = fmt::memory_buffer;

template <typename T>
void append_array(Buffer& b, const std::vector<T>& v) {
  b.push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) b.push_back(',');
    fmt::format_to(std::back_inserter(b), "{}", v[i]);
  }
  b.push_back(']');
}

std::shared_ptr<const std::string> finish_event(const Buffer& b) {
  return std::make_shared<const std::string>(b.data(), b.size());
}

json opt_time(double t) { return t > 0 ? json(t) : json(nullptr); }

// Nearest-rank percentile of unsorted samples (copied, sorted); null when there are none.
json percentile(std::vector<double> v, double p) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

json percentiles(const std::deque<std::pair<double, double>>& samples) {
  std::vector<double> v;
  v.reserve(samples.size());
  for (const auto& s : samples) v.push_back(s.second);
  return json{{"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)}};
}

}  // namespace

std::string Subscription::wait(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
               [this] { return !queue_.empty() || dropped_ != dropped_reported_; });
  std::string out;
  if (dropped_ != dropped_reported_) {
    out += *sse("dropped", json{{"dropped_total", dropped_}});
    dropped_reported_ = dropped_;
  }
  std::deque<std::shared_ptr<const std::string>> events;
  events.swap(queue_);
  const size_t bytes = queued_bytes_;
  queued_bytes_ = 0;
  lock.unlock();  // the engine thread's push() does not wait for the copy below
  out.reserve(out.size() + bytes);
  for (const auto& e : events) out += *e;
  return out;
}

uint64_t Subscription::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

size_t Subscription::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

void Subscription::push(const std::shared_ptr<const std::string>& event, size_t max_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_bytes_ + event->size() > max_bytes) {
      ++dropped_;
    } else {
      queue_.push_back(event);
      queued_bytes_ += event->size();
    }
  }
  cv_.notify_all();
}

EventHub::EventHub(HubConfig config, HelloInfo hello, const Tokenizer* tokenizer)
    : config_(config), hello_(std::move(hello)), tokenizer_(tokenizer) {}

std::shared_ptr<Subscription> EventHub::subscribe() {
  std::lock_guard<std::mutex> lock(mu_);
  if (subs_.size() >= config_.max_subscribers) return nullptr;
  auto sub = std::make_shared<Subscription>();
  sub->push(sse("hello", json{{"model", hello_.model},
                              {"replica_id", hello_.replica_id.empty() ? json(nullptr)
                                                                       : json(hello_.replica_id)},
                              {"num_total_blocks", hello_.num_total_blocks},
                              {"block_size", hello_.block_size},
                              {"max_num_batched_tokens", hello_.max_num_batched_tokens},
                              {"max_num_seqs", hello_.max_num_seqs},
                              {"show_prompts", config_.show_prompts},
                              {"server_time", now_seconds()}}),
            config_.max_queued_bytes);
  if (last_kv_) sub->push(last_kv_, config_.max_queued_bytes);
  std::vector<int64_t> ids;
  for (const auto& [id, t] : tracked_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (int64_t id : ids) {
    auto event = std::make_shared<const std::string>(request_event(id, tracked_.at(id), nullptr));
    sub->push(event, config_.max_queued_bytes);
  }
  subs_.push_back(sub);
  return sub;
}

void EventHub::set_replica_id(std::string replica_id) {
  std::lock_guard<std::mutex> lock(mu_);
  hello_.replica_id = std::move(replica_id);
}

void EventHub::unsubscribe(const std::shared_ptr<Subscription>& sub) {
  std::lock_guard<std::mutex> lock(mu_);
  subs_.erase(std::remove(subs_.begin(), subs_.end(), sub), subs_.end());
}

size_t EventHub::num_subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subs_.size();
}

uint64_t EventHub::dropped_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = dropped_total_;
  for (const auto& s : subs_) total += s->dropped();
  return total;
}

std::string EventHub::request_event(int64_t id, const Tracked& t, const char* finish_reason) const {
  auto since = [](double later, double earlier) {
    return later > 0 && earlier > 0 ? json(later - earlier) : json(nullptr);
  };
  json itl = json::array();
  for (double s : t.itl_s) itl.push_back(s * 1000.0);
  json j{{"id", id},
         {"api_id", t.api_id},
         {"arrival", t.arrival},
         {"num_prompt_tokens", t.num_prompt_tokens},
         {"num_cached_tokens", t.num_cached_tokens},
         {"num_output_tokens", t.num_output_tokens},
         {"first_scheduled", opt_time(t.first_scheduled)},
         {"queue_s", since(t.first_scheduled, t.arrival)},
         {"prefill_s", since(t.first_token, t.first_scheduled)},
         {"ttft_s", since(t.first_token, t.arrival)},
         {"itl_ms", t.first_token > 0 ? itl : json(nullptr)},
         {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)},
         {"prompt", config_.show_prompts ? json(t.prompt) : json(nullptr)}};
  return *sse("request", j);
}

void EventHub::publish(std::shared_ptr<const std::string> event) {
  for (const auto& s : subs_) s->push(event, config_.max_queued_bytes);
}

void EventHub::prune(double now) {
  const double horizon = now - config_.metrics_window_s;
  constexpr size_t kMaxSamples = 100000;
  while (!output_tokens_.empty() &&
         (output_tokens_.front().first < horizon || output_tokens_.size() > kMaxSamples))
    output_tokens_.pop_front();
  for (auto* d : {&ttft_s_, &itl_s_})
    while (!d->empty() && (d->front().first < horizon || d->size() > kMaxSamples)) d->pop_front();
}

std::string EventHub::metrics_event(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  prune(now);
  // Output tokens per second over the last 10 s (or the window, if shorter).
  const double span = std::min(10.0, config_.metrics_window_s);
  int64_t tokens = 0;
  for (auto it = output_tokens_.rbegin(); it != output_tokens_.rend() && it->first >= now - span;
       ++it)
    tokens += it->second;
  return *sse("metrics", json{{"time", now},
                              {"num_running", num_running_},
                              {"num_waiting", num_waiting_},
                              {"kv_cache_usage", kv_cache_usage_},
                              {"output_tokens_per_s", static_cast<double>(tokens) / span},
                              {"ttft_s", percentiles(ttft_s_)},
                              {"itl_s", percentiles(itl_s_)},
                              {"window_s", config_.metrics_window_s}});
}

void EventHub::on_submit(int64_t request_id, const EngineRequest& request) {
  Tracked t;
  t.api_id = request.external_id;
  t.arrival = request.arrival_time > 0 ? request.arrival_time : now_seconds();
  t.num_prompt_tokens = static_cast<int32_t>(request.prompt_token_ids.size());
  if (config_.show_prompts && tokenizer_ && num_subscribers() > 0) {
    // Decoded outside mu_ (the engine thread's on_step takes it), and bounded: the caller
    // (AsyncEngine::submit) holds the engine's queue lock.
    const size_t n = std::min(request.prompt_token_ids.size(), kMaxPromptTokensShown);
    t.prompt = tokenizer_->decode(std::vector<int32_t>(request.prompt_token_ids.begin(),
                                                       request.prompt_token_ids.begin() + n));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (tracked_.size() >= kMaxTracked) tracked_.erase(tracked_.begin());
  tracked_[request_id] = std::move(t);
}

void EventHub::on_step(const LLMEngine& engine, const std::vector<RequestOutput>& outputs) {
  const StepRecord& rec = engine.last_step();
  std::lock_guard<std::mutex> lock(mu_);
  const bool watched = !subs_.empty();
  const bool new_step = rec.end_time > 0 && rec.step_idx != last_step_idx_;
  if (new_step) last_step_idx_ = rec.step_idx;
  const double now = new_step ? rec.end_time : now_seconds();

  // Admissions: requests scheduled for the first time.
  std::vector<int64_t> admitted;
  if (new_step) {
    for (const StepRecord::Entry& e : rec.scheduled) {
      auto it = tracked_.find(e.request_id);
      if (it != tracked_.end() && it->second.first_scheduled == 0) {
        it->second.first_scheduled = rec.start_time;
        admitted.push_back(e.request_id);
      }
    }
  }
  // Tokens, timings and finishes.
  int32_t new_tokens = 0, num_finished = 0;
  std::vector<std::pair<int64_t, const char*>> finished;
  std::vector<std::string> finished_events;
  for (const RequestOutput& out : outputs) {
    const int32_t n = static_cast<int32_t>(out.new_token_ids.size());
    new_tokens += n;
    auto it = tracked_.find(out.request_id);
    if (it != tracked_.end()) {
      Tracked& t = it->second;
      t.num_cached_tokens = out.num_cached_tokens;
      t.num_output_tokens = out.num_output_tokens;
      if (n > 0) {
        if (t.first_token == 0) {
          t.first_token = now;
          ttft_s_.emplace_back(now, now - t.arrival);
        } else {
          // Several tokens in one step: the first waited the whole gap, the others none.
          for (int32_t i = 0; i < n; ++i) {
            const double gap = i == 0 ? now - t.last_token : 0.0;
            itl_s_.emplace_back(now, gap);
            if (t.itl_s.size() < kMaxItlPerRequest) t.itl_s.push_back(gap);
          }
        }
        t.last_token = now;
      }
    }
    if (out.finished) {
      ++num_finished;
      const char* reason = finish_reason_name(out.finish_reason);
      if (watched) {
        finished.emplace_back(out.request_id, reason);
        if (it != tracked_.end()) finished_events.push_back(request_event(out.request_id, it->second, reason));
      }
      if (it != tracked_.end()) tracked_.erase(it);
    }
  }
  if (new_step) {
    output_tokens_.emplace_back(now, new_tokens);
    // rec.num_running counts the seats held while the step ran; those that finished in it are
    // free now (the metrics event says what runs after the step, as vllm:num_requests_running).
    num_running_ = std::max(0, rec.num_running - num_finished);
    num_waiting_ = rec.num_waiting;
    kv_cache_usage_ = hello_.num_total_blocks > 0
                          ? static_cast<double>(rec.num_used_blocks) / hello_.num_total_blocks
                          : 0.0;
  } else if (num_finished > 0) {
    // Requests that ended without a step (aborted: a client disconnect): the engine's state now.
    const EngineStats st = engine.stats();
    num_running_ = st.num_running;
    num_waiting_ = st.num_waiting;
    kv_cache_usage_ = st.kv_cache_usage;
  }
  prune(now);
  if (!watched) return;

  for (int64_t id : admitted) publish(std::make_shared<const std::string>(request_event(id, tracked_.at(id), nullptr)));
  if (new_step) {
    Buffer b;
    auto out = std::back_inserter(b);
    fmt::format_to(out, "event: step\ndata: {{\"step\":{},\"start\":{},\"end\":{},\"scheduled\":[",
                   rec.step_idx, rec.start_time, rec.end_time);
    for (size_t i = 0; i < rec.scheduled.size(); ++i) {
      const StepRecord::Entry& e = rec.scheduled[i];
      fmt::format_to(out, "{}{{\"id\":{},\"tokens\":{},\"prefill\":{}}}", i ? "," : "", e.request_id,
                     e.num_scheduled_tokens, e.is_prefill);
    }
    fmt::format_to(out, "],\"preempted\":");
    append_array(b, rec.preempted);
    fmt::format_to(out, ",\"waiting\":");
    append_array(b, rec.waiting);
    fmt::format_to(out,
                   ",\"num_running\":{},\"num_waiting\":{},\"num_prefill_tokens\":{},\"num_decode_tokens\":{},"
                   "\"token_budget\":{},\"num_used_blocks\":{},\"num_cached_blocks\":{},\"kv_cache_usage\":{},"
                   "\"finished\":[",
                   rec.num_running, rec.num_waiting, rec.num_prefill_tokens, rec.num_decode_tokens,
                   hello_.max_num_batched_tokens, rec.num_used_blocks, rec.num_cached_blocks, kv_cache_usage_);
    for (size_t i = 0; i < finished.size(); ++i)  // reasons are fixed ASCII names
      fmt::format_to(out, "{}{{\"id\":{},\"finish_reason\":\"{}\"}}", i ? "," : "", finished[i].first,
                     finished[i].second);
    fmt::format_to(out, "]}}\n\n");
    publish(finish_event(b));
  }  // finishes outside a step (aborts of queued requests) show in their `request` events
  for (auto& e : finished_events) publish(std::make_shared<const std::string>(std::move(e)));

  // Throttled, except when the engine went idle: the pool's final state must be shown.
  if (now - last_kv_time_ >= config_.kv_interval_s || !engine.has_unfinished_requests()) {
    std::optional<KvSnapshot> snap = engine.kv_snapshot();
    // Unchanged since the last kv event (an idle pool, decodes inside their last block): none.
    if (snap && last_kv_snapshot_ && snap->ref_counts == last_kv_snapshot_->ref_counts &&
        snap->cached == last_kv_snapshot_->cached && snap->block_tables == last_kv_snapshot_->block_tables)
      snap.reset();
    if (snap) {
      Buffer b;
      auto out = std::back_inserter(b);
      fmt::format_to(out, "event: kv\ndata: {{\"step\":{},\"num_total_blocks\":{},\"ref_counts\":", snap->step_idx,
                     snap->ref_counts.size());
      append_array(b, snap->ref_counts);
      fmt::format_to(out, ",\"cached\":");
      append_array(b, snap->cached);
      fmt::format_to(out, ",\"block_tables\":{{");
      for (size_t i = 0; i < snap->block_tables.size(); ++i) {
        fmt::format_to(out, "{}\"{}\":", i ? "," : "", snap->block_tables[i].first);
        append_array(b, snap->block_tables[i].second);
      }
      fmt::format_to(out, "}}}}\n\n");
      last_kv_ = finish_event(b);
      publish(last_kv_);
      last_kv_time_ = now;
      last_kv_snapshot_ = std::move(snap);
    }
  }
}

}  // namespace llmserve::dashboard
