// Engine throughput on stories260K: single-stream decode vs the six reference prompts batched
// together (greedy, float32). Prints tokens/s and the batched/single ratio measured in the
// same run (the machine is shared and noisy, so the ratio is the stable figure).
// Usage: bench_engine [MODEL.bin TOKENIZER.bin] [--threads N]
#include <cstdio>
#include <cstdlib>
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
  c.model_path = argc > 2 ? argv[1] : "../shared/models/stories260K/stories260K.bin";
  c.tokenizer_path = argc > 2 ? argv[2] : "../shared/models/stories260K/tok512.bin";
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--threads") c.num_threads = std::atoi(argv[i + 1]);
  c.scheduler.max_model_len = 512;
  auto engine = LLMEngine::create(c);
  if (!engine.ok()) {
    std::fprintf(stderr, "error: %s\n", engine.status().message().c_str());
    return 1;
  }
  const int max_tokens = 256;
  run(**engine, 1, 16);  // warm-up
  const Result single = run(**engine, 1, max_tokens);
  const Result batched = run(**engine, 6, max_tokens);
  const double s_tps = single.tokens / single.seconds, b_tps = batched.tokens / batched.seconds;
  std::printf("single stream : %6lld tokens in %.3f s = %8.1f tok/s\n",
              static_cast<long long>(single.tokens), single.seconds, s_tps);
  std::printf("6 requests    : %6lld tokens in %.3f s = %8.1f tok/s aggregate\n",
              static_cast<long long>(batched.tokens), batched.seconds, b_tps);
  std::printf("ratio batched/single = %.2fx\n", b_tps / s_tps);
  return 0;
}
