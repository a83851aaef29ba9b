// Engine throughput: single-stream decode vs N requests batched together (greedy), on
// stories260K by default. Prints tokens/s and the batched/single ratio measured in the same
// run (the machine is shared and noisy, so the ratio is the stable figure).
// --compare-backends runs the same workload with the batch-invariant "flash" attention and
// the opt-in "flash-split" (dedicated decode kernel + flash-decoding splits), alternating,
// three rounds each, and prints the best time of each and their ratio: the end-to-end cost
// of batch-invariant attention (docs/batch_invariance.md).
// Usage: bench_engine [MODEL [TOKENIZER]] [--threads N] [--requests N] [--max-tokens N]
//                     [--compare-backends]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/timing.h"
#include "engine/llm_engine.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace llmserve;

const char* kPrompts[] = {"Once upon a time", "", "Lily and Ben went to the park. They saw a big dog.",
                          "The cat sat on the mat", "Tom had 3 red balls and 2 blue balls!",
                          "\"Mom, can I have a cookie?\" asked Sam."};

struct Result {
  int64_t tokens = 0;
  double seconds = 0;
};

Result run(LLMEngine& e, int num_requests, int max_tokens) {
  for (int i = 0; i < num_requests; ++i) {
    EngineRequest r;
    r.prompt_token_ids = e.tokenizer().encode(kPrompts[i % 6], true);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.arrival_time = now_seconds();
    if (!e.add_request(i, std::move(r)).ok()) std::abort();
  }
  Result res;
  const double t0 = now_seconds();
  while (e.has_unfinished_requests())
    for (const auto& o : e.step()) res.tokens += static_cast<int64_t>(o.new_token_ids.size());
  res.seconds = now_seconds() - t0;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  init_logging("warn");
  EngineConfig c;
  c.model_path = "../shared/models/stories260K/stories260K.bin";
  c.tokenizer_path = "../shared/models/stories260K/tok512.bin";
  int requests = 6, max_tokens = 256;
  bool compare = false;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--threads" && has_value) {
      c.num_threads = std::atoi(argv[++i]);
    } else if (a == "--requests" && has_value) {
      requests = std::atoi(argv[++i]);
    } else if (a == "--max-tokens" && has_value) {
      max_tokens = std::atoi(argv[++i]);
    } else if (a == "--compare-backends") {
      compare = true;
    } else if (!a.empty() && a[0] != '-') {
      positional.push_back(a);
    } else {
      std::fprintf(stderr, "error: unknown or incomplete option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (!positional.empty()) {
    c.model_path = positional[0];
    c.tokenizer_path = positional.size() > 1 ? positional[1] : "";
  }
  if (requests < 1 || max_tokens < 1) {
    std::fprintf(stderr, "error: --requests and --max-tokens must be >= 1\n");
    return 2;
  }
  c.scheduler.max_model_len = 512;
  auto make = [&](const std::string& backend) -> std::unique_ptr<LLMEngine> {
    EngineConfig cc = c;
    cc.attention_backend = backend;
    auto engine = LLMEngine::create(cc);
    if (!engine.ok()) {
      std::fprintf(stderr, "error: %s\n", engine.status().message().c_str());
      return nullptr;
    }
    return std::move(*engine);
  };
  if (compare) {
    double best[2] = {1e30, 1e30};
    const char* names[2] = {"flash-split", "flash"};
    for (int round = 0; round < 3; ++round) {
      for (int b = 0; b < 2; ++b) {
        auto e = make(names[b]);
        if (!e) return 1;
        run(*e, 1, 16);  // warm-up
        const Result r = run(*e, requests, max_tokens);
        best[b] = std::min(best[b], r.seconds);
        std::printf("round %d %-11s: %lld tokens in %.3f s\n", round, names[b],
                    static_cast<long long>(r.tokens), r.seconds);
      }
    }
    std::printf("best: flash-split %.3f s, flash %.3f s, flash/flash-split = %.3f\n", best[0],
                best[1], best[1] / best[0]);
    return 0;
  }
  auto engine = make("flash");
  if (!engine) return 1;
  run(*engine, 1, 16);  // warm-up
  const Result single = run(*engine, 1, max_tokens);
  const Result batched = run(*engine, requests, max_tokens);
  const double s_tps = single.tokens / single.seconds, b_tps = batched.tokens / batched.seconds;
  std::printf("single stream : %6lld tokens in %.3f s = %8.1f tok/s\n",
              static_cast<long long>(single.tokens), single.seconds, s_tps);
  std::printf("%d requests    : %6lld tokens in %.3f s = %8.1f tok/s aggregate\n", requests,
              static_cast<long long>(batched.tokens), batched.seconds, b_tps);
  std::printf("ratio batched/single = %.2fx\n", b_tps / s_tps);
  return 0;
}
