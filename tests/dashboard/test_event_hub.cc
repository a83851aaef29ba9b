// EventHub against the real engine (stories260K): step events match the engine's StepRecords
// one for one, kv events agree with the block tables, request events carry the API id and
// timings; a subscription nobody reads stays bounded and counts what it dropped.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "../engine/reference_cases.h"
#include "common/timing.h"
#include "dashboard/event_hub.h"
#include "engine/async_engine.h"
#include "engine/llm_engine.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::testing {
namespace {

using nlohmann::json;

std::unique_ptr<LLMEngine> stories_engine(int32_t num_kv_blocks) {
  EngineConfig c;
  c.model_path = stories_gguf();
  c.scheduler.max_model_len = 128;
  c.scheduler.check_invariants = true;
  c.cache.num_kv_blocks = num_kv_blocks;
  c.num_threads = 1;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(e).value();
}

// Forwards to the hub and keeps a copy of every StepRecord the hub was shown.
class Recorder : public EngineObserver {
 public:
  explicit Recorder(dashboard::EventHub& hub) : hub_(hub) {}
  void on_submit(int64_t id, const EngineRequest& r) override { hub_.on_submit(id, r); }
  void on_step(const LLMEngine& engine, const std::vector<RequestOutput>& outputs) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      const StepRecord& rec = engine.last_step();
      if (rec.end_time > 0 && (steps.empty() || steps.back().step_idx != rec.step_idx)) steps.push_back(rec);
    }
    hub_.on_step(engine, outputs);
  }
  std::mutex mu;
  std::vector<StepRecord> steps;

 private:
  dashboard::EventHub& hub_;
};

struct Event {
  std::string name;
  json data;
};

// Splits SSE text into (event name, JSON data) pairs.
std::vector<Event> parse(const std::string& text) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string block = text.substr(pos, end - pos);
    pos = end + 2;
    Event e;
    size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    e.name = block.substr(7, nl - 7);
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    e.data = json::parse(block.substr(nl + 7));
    out.push_back(std::move(e));
  }
  return out;
}

dashboard::HelloInfo hello_for(const LLMEngine& e) {
  dashboard::HelloInfo h;
  h.model = e.served_model_name();
  h.num_total_blocks = e.stats().num_total_blocks;
  h.block_size = e.config().cache.block_size;
  h.max_num_batched_tokens = e.config().scheduler.max_num_batched_tokens;
  h.max_num_seqs = e.config().scheduler.max_num_seqs;
  return h;
}

EngineRequest request(const LLMEngine& e, const std::string& text, int max_tokens, const std::string& api_id) {
  EngineRequest r;
  r.prompt_token_ids = e.tokenizer().encode(text, /*add_bos=*/true);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.external_id = api_id;
  return r;
}

TEST(EventHub, StepEventsMatchStepRecordsOneForOne) {
  auto engine = stories_engine(/*num_kv_blocks=*/10);  // small: requests share and preempt
  dashboard::HubConfig config;
  config.kv_interval_s = 0;  // a kv event after every step
  dashboard::EventHub hub(config, hello_for(*engine), &engine->tokenizer());
  AsyncEngine async(std::move(engine));
  Recorder recorder(hub);
  async.set_observer(&recorder);
  auto sub = hub.subscribe();
  ASSERT_NE(sub, nullptr);

  std::vector<std::shared_ptr<RequestStream>> streams;
  const char* prompts[] = {"Once upon a time", "Lily and Ben", "The little dog", "One day, a girl"};
  for (int i = 0; i < 8; ++i) {
    auto s = async.submit(request(async.engine(), prompts[i % 4], 60, "cmpl-" + std::to_string(i)));
    ASSERT_TRUE(s.ok()) << s.status().message();
    streams.push_back(*s);
  }
  std::map<int64_t, std::string> finish;
  for (auto& s : streams) {
    for (;;) {
      auto out = s->wait_next(30);
      ASSERT_TRUE(out);
      if (out->finished) {
        finish[s->request_id()] = finish_reason_name(out->finish_reason);
        break;
      }
    }
  }
  async.set_observer(nullptr);
  std::vector<Event> events = parse(sub->wait(0.5));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].name, "hello");
  EXPECT_EQ(events[0].data["num_total_blocks"], 10);
  EXPECT_EQ(sub->dropped(), 0u);

  std::vector<json> steps;
  std::map<int64_t, std::vector<json>> requests;
  std::vector<json> kvs;
  for (const Event& e : events) {
    if (e.name == "step") steps.push_back(e.data);
    if (e.name == "request") requests[e.data["id"].get<int64_t>()].push_back(e.data);
    if (e.name == "kv") kvs.push_back(e.data);
  }
  std::lock_guard<std::mutex> lock(recorder.mu);
  ASSERT_EQ(steps.size(), recorder.steps.size());
  EXPECT_EQ(static_cast<int64_t>(steps.size()), async.stats().num_steps);
  bool preempted = false;
  std::map<int64_t, std::string> finished_in_steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& rec = recorder.steps[i];
    const json& s = steps[i];
    EXPECT_EQ(s["step"], rec.step_idx);
    EXPECT_EQ(s["start"], rec.start_time);
    EXPECT_EQ(s["end"], rec.end_time);
    ASSERT_EQ(s["scheduled"].size(), rec.scheduled.size());
    for (size_t k = 0; k < rec.scheduled.size(); ++k) {
      EXPECT_EQ(s["scheduled"][k]["id"], rec.scheduled[k].request_id);
      EXPECT_EQ(s["scheduled"][k]["tokens"], rec.scheduled[k].num_scheduled_tokens);
      EXPECT_EQ(s["scheduled"][k]["prefill"], rec.scheduled[k].is_prefill);
    }
    EXPECT_EQ(s["preempted"].get<std::vector<int64_t>>(), rec.preempted);
    EXPECT_EQ(s["waiting"].get<std::vector<int64_t>>(), rec.waiting);
    EXPECT_EQ(s["num_used_blocks"], rec.num_used_blocks);
    EXPECT_EQ(s["num_decode_tokens"], rec.num_decode_tokens);
    EXPECT_EQ(s["token_budget"], async.engine().config().scheduler.max_num_batched_tokens);
    preempted |= !rec.preempted.empty();
    for (const json& f : s["finished"]) finished_in_steps[f["id"].get<int64_t>()] = f["finish_reason"];
  }
  EXPECT_TRUE(preempted) << "the pool was meant to be small enough to preempt";
  EXPECT_EQ(finished_in_steps, finish);

  // Each request: admitted once, finished once, with its API id and consistent timings.
  ASSERT_EQ(requests.size(), 8u);
  for (const auto& [id, evs] : requests) {
    ASSERT_EQ(evs.size(), 2u) << id;
    EXPECT_TRUE(evs[0]["finish_reason"].is_null());
    EXPECT_EQ(evs[1]["finish_reason"], finish[id]);
    EXPECT_EQ(evs[1]["api_id"], "cmpl-" + std::to_string(id - 1));
    EXPECT_EQ(evs[1]["num_output_tokens"], 60);
    EXPECT_GE(evs[1]["queue_s"].get<double>(), 0);
    EXPECT_GE(evs[1]["ttft_s"].get<double>(), evs[1]["queue_s"].get<double>());
    EXPECT_EQ(evs[1]["itl_ms"].size(), 59u);
    EXPECT_TRUE(evs[1]["prompt"].is_null());  // show_prompts off
  }

  // kv events: after any step that changed the pool (interval 0), never two alike, each
  // block's ref count = the tables holding it; the last one shows the pool emptied.
  ASSERT_GT(kvs.size(), 1u);
  EXPECT_LE(kvs.size(), steps.size());
  for (size_t i = 1; i < kvs.size(); ++i) {
    json a = kvs[i - 1], b = kvs[i];
    a.erase("step");
    b.erase("step");
    EXPECT_NE(a, b) << "kv event " << i << " repeats the one before";
  }
  EXPECT_TRUE(kvs.back()["block_tables"].empty());
  EXPECT_EQ(kvs.back()["ref_counts"].get<std::vector<int>>(), std::vector<int>(10, 0));
  for (const json& kv : kvs) {
    ASSERT_EQ(kv["ref_counts"].size(), 10u);
    std::vector<int> held(10, 0);
    for (const auto& [id, table] : kv["block_tables"].items())
      for (const json& b : table) ++held[b.get<int>()];
    EXPECT_EQ(kv["ref_counts"].get<std::vector<int>>(), held);
    for (const json& b : kv["cached"]) EXPECT_EQ(held[b.get<int>()], 0);
  }
  hub.unsubscribe(sub);
  EXPECT_EQ(hub.num_subscribers(), 0u);
}

TEST(EventHub, AnUnreadSubscriptionStaysBoundedAndCountsDrops) {
  auto engine = stories_engine(/*num_kv_blocks=*/64);
  dashboard::HubConfig config;
  config.max_queued_bytes = 16 << 10;
  config.kv_interval_s = 0;
  config.max_subscribers = 2;
  dashboard::EventHub hub(config, hello_for(*engine), &engine->tokenizer());
  AsyncEngine async(std::move(engine));
  async.set_observer(&hub);
  auto slow = hub.subscribe();
  auto second = hub.subscribe();
  ASSERT_NE(slow, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(hub.subscribe(), nullptr) << "max_subscribers is 2";
  hub.unsubscribe(second);
  for (int i = 0; i < 4; ++i) {
    auto s = async.submit(request(async.engine(), "Once upon a time", 100, "x"));
    ASSERT_TRUE(s.ok());
    while (true) {
      auto out = (*s)->wait_next(30);
      ASSERT_TRUE(out);
      if (out->finished) break;
    }
  }
  async.set_observer(nullptr);
  EXPECT_LE(slow->queued_bytes(), config.max_queued_bytes);
  EXPECT_GT(slow->dropped(), 0u);
  EXPECT_EQ(hub.dropped_total(), slow->dropped());
  std::vector<Event> events = parse(slow->wait(0));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].name, "dropped");
  EXPECT_EQ(events[0].data["dropped_total"], slow->dropped());
  EXPECT_EQ(slow->queued_bytes(), 0u);
}

// Throttled kv events still show the pool's state once the engine goes idle.
TEST(EventHub, TheLastKvEventShowsTheIdlePool) {
  auto engine = stories_engine(/*num_kv_blocks=*/64);
  dashboard::HubConfig config;
  config.kv_interval_s = 3600;  // only the first kv event and the idle one
  dashboard::EventHub hub(config, hello_for(*engine), &engine->tokenizer());
  AsyncEngine async(std::move(engine));
  async.set_observer(&hub);
  auto sub = hub.subscribe();
  auto s = async.submit(request(async.engine(), "Once upon a time", 40, "z"));
  ASSERT_TRUE(s.ok());
  while (!(*s)->wait_next(30)->finished) {
  }
  async.set_observer(nullptr);
  std::vector<json> kvs;
  for (const Event& e : parse(sub->wait(0.5)))
    if (e.name == "kv") kvs.push_back(e.data);
  ASSERT_EQ(kvs.size(), 2u);
  EXPECT_FALSE(kvs.front()["block_tables"].empty());
  EXPECT_TRUE(kvs.back()["block_tables"].empty());
  for (const json& r : kvs.back()["ref_counts"]) EXPECT_EQ(r, 0);
}

// --ui-show-prompts: the request events carry the prompt's text (decoded by the tokenizer).
TEST(EventHub, ShowPromptsSendsThePromptText) {
  auto engine = stories_engine(/*num_kv_blocks=*/64);
  dashboard::HubConfig config;
  config.show_prompts = true;
  dashboard::EventHub hub(config, hello_for(*engine), &engine->tokenizer());
  AsyncEngine async(std::move(engine));
  async.set_observer(&hub);
  auto sub = hub.subscribe();
  EngineRequest r = request(async.engine(), "Lily and Ben", 5, "p");
  const std::string text = async.engine().tokenizer().decode(r.prompt_token_ids);
  auto s = async.submit(std::move(r));
  ASSERT_TRUE(s.ok());
  while (!(*s)->wait_next(30)->finished) {
  }
  async.set_observer(nullptr);
  int seen = 0;
  for (const Event& e : parse(sub->wait(0.5)))
    if (e.name == "request") {
      EXPECT_EQ(e.data["prompt"], text);
      ++seen;
    }
  EXPECT_EQ(seen, 2);
  EXPECT_NE(text.find("Lily and Ben"), std::string::npos) << text;
}

TEST(EventHub, MetricsEventPercentilesAndRates) {
  auto engine = stories_engine(/*num_kv_blocks=*/64);
  dashboard::EventHub hub({}, hello_for(*engine), &engine->tokenizer());
  AsyncEngine async(std::move(engine));
  async.set_observer(&hub);
  auto s = async.submit(request(async.engine(), "Once upon a time", 30, "y"));
  ASSERT_TRUE(s.ok());
  while (!(*s)->wait_next(30)->finished) {
  }
  async.set_observer(nullptr);
  std::vector<Event> m = parse(hub.metrics_event(now_seconds()));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].name, "metrics");
  const json& d = m[0].data;
  EXPECT_GT(d["output_tokens_per_s"].get<double>(), 0);
  EXPECT_FALSE(d["ttft_s"]["p50"].is_null());
  EXPECT_LE(d["itl_s"]["p50"].get<double>(), d["itl_s"]["p99"].get<double>());
  EXPECT_EQ(d["num_running"], 0);  // the request finished in the last step: nothing runs after it
}

// A request aborted with nothing else running (a client disconnect) ends without a step: the
// metrics event must still say nothing runs.
TEST(EventHub, AbortedLastRequestLeavesNothingRunning) {
  auto engine = stories_engine(/*num_kv_blocks=*/64);
  dashboard::EventHub hub({}, hello_for(*engine), &engine->tokenizer());
  AsyncEngine async(std::move(engine));
  async.set_observer(&hub);
  auto s = async.submit(request(async.engine(), "Once upon a time", 100, "z"));
  ASSERT_TRUE(s.ok());
  (*s)->wait_next(30);  // the first token: it is running
  async.abort((*s)->request_id());
  while (!(*s)->wait_next(30)->finished) {
  }
  async.set_observer(nullptr);
  std::vector<Event> m = parse(hub.metrics_event(now_seconds()));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].data["num_running"], 0);
  EXPECT_EQ(m[0].data["kv_cache_usage"], 0.0);
}

}  // namespace
}  // namespace llmserve::testing
