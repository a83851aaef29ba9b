// The dashboard's cost on the engine thread (issue 18's "an open dashboard costs <= 2 % of
// engine throughput"): the engine steps a batched greedy workload, and after every step the
// EventHub is called as AsyncEngine calls it (on_step: step, request and kv events built and
// queued) with one subscriber drained by another thread, as an open /ui/events stream is. The
// figure is the hub's share of the engine thread's time, measured in the same run on the same
// thread (robust to a noisy machine, unlike two throughput runs): time in on_step / time in
// step(). Also printed: the same workload's tokens/s with no hub, with the hub but no
// subscriber, and with one subscriber, alternating, best of ROUNDS.
// Usage: bench_dashboard [MODEL] [--requests 32] [--max-tokens 128] [--rounds 3]
//                        [--num-kv-blocks N] [--threads N]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/logging.h"
#include "common/timing.h"
#include "dashboard/event_hub.h"
#include "engine/llm_engine.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace llmserve;

struct Result {
  double seconds = 0, hub_seconds = 0;
  int64_t tokens = 0, events_bytes = 0;
};

enum class Mode { kNoHub, kHubUnwatched, kHubWatched };

Result run(LLMEngine& e, Mode mode, int num_requests, int max_tokens, int64_t first_id) {
  dashboard::HelloInfo hello;
  hello.num_total_blocks = e.stats().num_total_blocks;
  hello.max_num_batched_tokens = e.config().scheduler.max_num_batched_tokens;
  dashboard::EventHub hub({}, hello, &e.tokenizer());
  std::shared_ptr<dashboard::Subscription> sub;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> bytes{0};
  std::thread reader;
  if (mode == Mode::kHubWatched) {
    sub = hub.subscribe();
    reader = std::thread([&] {
      while (!stop.load()) bytes += static_cast<int64_t>(sub->wait(0.05).size());
    });
  }
  for (int i = 0; i < num_requests; ++i) {
    EngineRequest r;
    r.prompt_token_ids = e.tokenizer().encode("Once upon a time, in a land far away,", true);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.arrival_time = now_seconds();
    r.external_id = "cmpl-bench";
    if (mode != Mode::kNoHub) hub.on_submit(first_id + i, r);
    if (!e.add_request(first_id + i, std::move(r)).ok()) std::abort();
  }
  Result res;
  const double t0 = now_seconds();
  while (e.has_unfinished_requests()) {
    std::vector<RequestOutput> outs = e.step();
    for (const auto& o : outs) res.tokens += static_cast<int64_t>(o.new_token_ids.size());
    if (mode != Mode::kNoHub) {
      const double h0 = now_seconds();
      hub.on_step(e, outs);
      res.hub_seconds += now_seconds() - h0;
    }
  }
  res.seconds = now_seconds() - t0;
  stop = true;
  if (reader.joinable()) reader.join();
  res.events_bytes = bytes.load();
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  init_logging("warn");
  EngineConfig c;
  c.model_path = "../shared/models/stories260K/stories260K.gguf";
  c.scheduler.max_model_len = 512;
  int requests = 32, max_tokens = 128, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--requests") requests = next();
    else if (a == "--max-tokens") max_tokens = next();
    else if (a == "--rounds") rounds = next();
    else if (a == "--num-kv-blocks") c.cache.num_kv_blocks = next();
    else if (a == "--threads") c.num_threads = next();
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "bench_dashboard: unknown flag %s\n", a.c_str());
      return 1;
    } else c.model_path = a;
  }
  auto engine = LLMEngine::create(c);
  if (!engine.ok()) {
    std::fprintf(stderr, "bench_dashboard: %s\n", engine.status().message().c_str());
    return 1;
  }
  LLMEngine& e = **engine;
  std::printf("model %s, %d requests x %d tokens, pool %d blocks, %d rounds\n", c.model_path.c_str(),
              requests, max_tokens, e.stats().num_total_blocks, rounds);
  const Mode modes[] = {Mode::kNoHub, Mode::kHubUnwatched, Mode::kHubWatched};
  const char* names[] = {"no hub", "hub, no dashboard", "hub, one dashboard"};
  double best[3] = {1e300, 1e300, 1e300};
  double share_sum[3] = {0, 0, 0};
  int64_t id = 0, tokens = 0, bytes = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int m = 0; m < 3; ++m) {
      Result res = run(e, modes[m], requests, max_tokens, id);
      id += requests;
      tokens = res.tokens;
      best[m] = std::min(best[m], res.seconds);
      share_sum[m] += res.hub_seconds / res.seconds;
      if (m == 2) bytes = res.events_bytes;
    }
  }
  for (int m = 0; m < 3; ++m)
    std::printf("%-20s best %.3f s, %.1f tok/s; hub share of the engine thread %.3f %%\n", names[m], best[m],
                tokens / best[m], 100.0 * share_sum[m] / rounds);
  std::printf("one dashboard: %.1f KiB of events per round; throughput ratio open/none (best of %d) %.4f\n",
              bytes / 1024.0, rounds, best[0] / best[2]);
  return 0;
}
