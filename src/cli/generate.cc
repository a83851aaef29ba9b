// llmserve generate: one prompt through the engine, text streamed to stdout (or --json).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/human_int.h"
#include "common/timing.h"
#include "engine/llm_engine.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::cli {

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return 1;
}

Status check_sampling_flags(double temperature, double top_p) {
  if (!(std::isfinite(temperature) && temperature >= 0))
    return InvalidArgument("--temperature must be a finite number >= 0, got {}", temperature);
  if (!(top_p > 0 && top_p <= 1))
    return InvalidArgument("--top-p must be in (0, 1], got {}", top_p);
  // The engine reads 32-bit floats: a value that rounds to 0 or inf there is refused as given.
  for (const auto& [flag, v] : {std::pair{"--temperature", temperature}, std::pair{"--top-p", top_p}}) {
    const float f = static_cast<float>(v);
    if (!std::isfinite(f) || (v != 0 && f == 0))
      return InvalidArgument("{} {} is out of a 32-bit float's range ({} to {})", flag, v,
                             std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::max());
  }
  return Status::Ok();
}

GenerateCommand::GenerateCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("generate", "Generate a completion for one prompt");
  add_engine_flags(*cmd_, config_, flags_);
  // One request: no name to serve, nothing to schedule against.
  set_unused_flags(flags_, {"--served-model-name", "--max-num-seqs", "--batching",
                            "--max-delay-ms", "--scheduling-policy"},
                   "generate");
  cmd_->add_option("--prompt", prompt_, "Prompt text (BOS is prepended)")->required();
  cmd_->add_option("--max-tokens", max_tokens_,
                   "Maximum tokens to generate (default: the generation config's max_new_tokens, "
                   "else 64)")
      ->transform(human_int(1))
      ->capture_default_str();
  cmd_->add_option("--temperature", temperature_,
                   "0 = greedy (default: the generation config's, else 0)")
      ->capture_default_str();
  cmd_->add_option("--top-p", top_p_, "Nucleus sampling mass in (0, 1]")->capture_default_str();
  cmd_->add_option("--top-k", top_k_, "Keep the k most likely tokens (-1 or 0 = all)")
      ->transform(human_int(-1))  // -1 to 2^31-1: a larger value is a range error, not a wrap
      ->capture_default_str();
  cmd_->add_option("--request-seed", seed_,
                   "Seed for this request's sampling, -1 to 2^63-1 (-1 = the engine's --seed)")
      ->transform(human_int(-1, INT64_MAX));  // an int64: out of range is an error, not clamped
  cmd_->add_flag("--ignore-eos", ignore_eos_, "Do not stop at the end-of-sequence token");
  cmd_->add_flag("--json", json_,
                 "Print one JSON object (prompt, token ids, text, timings) instead of text");
}

int GenerateCommand::run() {
  if (Status st = finish_engine_flags(config_, flags_); !st.ok()) return fail(st);
  // As the server refuses "prompt": "" (a BOS alone is no prompt).
  if (prompt_.empty()) return fail(InvalidArgument("--prompt must not be empty"));
  // The sampling flags given are checked before the model loads (seconds for a large one);
  // values from the generation config are checked after it, below.
  if (Status st = check_sampling_flags(cmd_->count("--temperature") > 0 ? temperature_ : 0.0,
                                       cmd_->count("--top-p") > 0 ? top_p_ : 1.0);
      !st.ok())
    return fail(st);
  auto engine_or = LLMEngine::create(config_);
  if (!engine_or.ok()) return fail(engine_or.status());
  LLMEngine& engine = **engine_or;

  EngineRequest req;
  req.arrival_time = now_seconds();
  req.prompt_token_ids = engine.tokenizer().encode(prompt_, /*add_bos=*/true);
  // The generation config's defaults (as serve applies them), then the flags given. Without
  // any: greedy, 64 tokens (or the config's max_new_tokens).
  req.params = engine.default_sampling_params();
  if (cmd_->count("--temperature") > 0 || !engine.has_default_temperature())
    req.params.temperature = static_cast<float>(temperature_);
  if (cmd_->count("--top-p") > 0) req.params.top_p = static_cast<float>(top_p_);
  if (cmd_->count("--top-k") > 0) req.params.top_k = top_k_;
  if (Status st = check_sampling_flags(req.params.temperature, req.params.top_p); !st.ok())
    return fail(st);
  if (top_k_ > engine.tokenizer().vocab_size())
    return fail(InvalidArgument("--top-k {} is larger than the vocabulary ({} tokens); -1 keeps "
                                "all", top_k_, engine.tokenizer().vocab_size()));
  req.params.max_tokens = max_tokens_;
  if (cmd_->count("--max-tokens") == 0 && engine.default_max_tokens())
    req.params.max_tokens = *engine.default_max_tokens();
  req.params.ignore_eos = ignore_eos_;
  if (seed_ >= 0) req.params.seed = static_cast<uint64_t>(seed_);
  const std::vector<int32_t> prompt_ids = req.prompt_token_ids;
  if (Status st = engine.add_request(0, std::move(req)); !st.ok()) return fail(st);

  std::vector<int32_t> output_ids;
  std::string text;
  RequestOutput last;
  if (!json_) std::cout << prompt_ << std::flush;
  while (engine.has_unfinished_requests()) {
    for (RequestOutput& o : engine.step()) {
      output_ids.insert(output_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      text += o.new_text;
      if (!json_) std::cout << o.new_text << std::flush;
      last = std::move(o);
    }
  }
  const RequestTiming& t = last.timing;
  const double ttft = t.first_token_time - t.arrival_time;
  const double e2e = t.finished_time - t.arrival_time;
  const double decode_s = t.last_token_time - t.first_token_time;
  const double decode_tps = output_ids.size() > 1 ? (output_ids.size() - 1) / decode_s : 0.0;
  if (json_) {
    nlohmann::json j = {{"prompt", prompt_},
                        {"prompt_token_ids", prompt_ids},
                        {"token_ids", output_ids},
                        {"text", text},
                        {"finish_reason", finish_reason_name(last.finish_reason)},
                        {"num_prompt_tokens", prompt_ids.size()},
                        {"num_output_tokens", output_ids.size()},
                        {"ttft_s", ttft},
                        {"e2e_s", e2e},
                        {"decode_tokens_per_s", decode_tps}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "\n";
    std::fprintf(stderr, "[%zu prompt + %zu generated tokens, TTFT %.2f ms, decode %.1f tok/s, "
                 "finish_reason %s]\n", prompt_ids.size(), output_ids.size(), ttft * 1e3,
                 decode_tps, finish_reason_name(last.finish_reason));
  }
  return 0;
}

}  // namespace llmserve::cli
