#include "cli/engine_flags.h"

#include <cctype>
#include <cmath>

#include "common/logging.h"
#include "quant/quant_scheme.h"

namespace llmserve::cli {

void add_engine_flags(CLI::App& app, EngineConfig& c, EngineFlagValues& v) {
  app.add_option("model", c.model_path, "Model: GGUF file, llama2.c .bin checkpoint or Hugging Face directory (config.json + *.safetensors)")
      ->required();
  app.add_option("--tokenizer", c.tokenizer_path,
                 "Tokenizer: a GGUF file, a Hugging Face directory or tokenizer.json, or a llama2.c "
                 "tokenizer.bin (required for .bin checkpoints; GGUF models and HF directories "
                 "with tokenizer.json bring their own)");
  app.add_option("--served-model-name", c.served_model_name,
                 "Model name in the API (default: the model file's stem)");
  app.add_option("--max-num-seqs", c.scheduler.max_num_seqs,
                 "Maximum sequences scheduled in one step")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", c.scheduler.max_num_batched_tokens,
                 "Token budget of one step (prefill chunks + decodes)")
      ->capture_default_str();
  app.add_option("--max-model-len", c.scheduler.max_model_len,
                 "Maximum tokens (prompt + output) of one sequence (default: the model's "
                 "context length)");
  app.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill",
               c.scheduler.enable_chunked_prefill,
               "Split prompts longer than the step's leftover token budget (default: on)");
  app.add_option("--batching", v.batching,
                 "continuous (join/leave every step), static (a batch runs to completion) or "
                 "dynamic (static, launched when --max-num-seqs wait or after --max-delay-ms)")
      ->check(CLI::IsMember({"continuous", "static", "dynamic"}))
      ->capture_default_str();
  app.add_option("--max-delay-ms", c.scheduler.max_delay_ms,
                 "Dynamic batching: launch a batch once the oldest request waited this long")
      ->capture_default_str();
  app.add_option("--prefill-policy", v.prefill_policy,
                 "Without chunked prefill: prefill-first (prompts get whole steps) or mixed "
                 "(whole prompts join running decodes)")
      ->check(CLI::IsMember({"prefill-first", "mixed"}))
      ->capture_default_str();
  app.add_option("--scheduling-policy", v.scheduling_policy,
                 "fcfs (arrival order) or priority (request 'priority', lower first, then "
                 "arrival)")
      ->check(CLI::IsMember({"fcfs", "priority"}))
      ->capture_default_str();
  app.add_option("--block-size", c.cache.block_size, "Tokens per KV cache block")
      ->capture_default_str();
  app.add_option("--kv-cache-memory", v.kv_cache_memory,
                 "KV cache budget in bytes (suffixes KiB/MiB/GiB accepted; default 2GiB)");
  app.add_option("--num-kv-blocks", c.cache.num_kv_blocks,
                 "Number of KV blocks (overrides --kv-cache-memory)");
  app.add_option("--threads", c.num_threads, "Compute threads (default: physical cores)");
  app.add_option("--seed", c.seed, "Default seed for requests that give none")
      ->capture_default_str();
  app.add_option("--attention-backend", c.attention_backend,
                 "Attention implementation: flash (tiled, online softmax, batch-invariant), "
                 "flash-split (flash-decoding context split: faster for few long decodes, not "
                 "batch-invariant) or naive (reference: materialises the score matrix)")
      ->check(CLI::IsMember({"flash", "flash-split", "naive", "reference"}))
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", v.kv_cache_dtype,
                 "KV cache element type: auto (the model's weight dtype), f32, bf16 or f16")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "float32", "bfloat16", "float16"}))
      ->capture_default_str();
  app.add_option("--quantization", c.quantization,
                 "Quantize f32/f16/bf16 weight matrices at load (norms untouched): " +
                     quantization_flag_names() + "; an already quantized file must match")
      ->check(CLI::IsMember(quantization_flag_values()));
  app.add_option("--log-level", v.log_level, "Log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

Expected<int64_t> parse_bytes(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return InvalidArgument("--kv-cache-memory: '{}' is not a size in bytes", text);
  double value = 0;
  size_t used = 0;
  try {
    value = std::stod(text.substr(0, i), &used);
  } catch (...) {
    used = 0;
  }
  if (used != i) return InvalidArgument("--kv-cache-memory: '{}' is not a size in bytes", text);
  std::string unit = text.substr(i);
  for (auto& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double mult;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1048576.0;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1073741824.0;
  else return InvalidArgument("--kv-cache-memory: unknown unit '{}' in '{}'", unit, text);
  const double bytes = value * mult;
  if (!(bytes >= 1) || bytes > 9e18)
    return InvalidArgument("--kv-cache-memory: '{}' is out of range", text);
  return static_cast<int64_t>(std::llround(bytes));
}

Status finish_engine_flags(EngineConfig& c, const EngineFlagValues& v) {
  init_logging(v.log_level);
  c.scheduler.batching = v.batching == "static"    ? BatchingMode::kStatic
                         : v.batching == "dynamic" ? BatchingMode::kDynamic
                                                   : BatchingMode::kContinuous;
  c.scheduler.prefill_policy =
      v.prefill_policy == "mixed" ? PrefillPolicy::kMixed : PrefillPolicy::kPrefillFirst;
  c.scheduler.policy =
      v.scheduling_policy == "priority" ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  const std::string& kd = v.kv_cache_dtype;
  if (kd == "f32" || kd == "float32") c.cache.kv_cache_dtype = DType::kF32;
  else if (kd == "bf16" || kd == "bfloat16") c.cache.kv_cache_dtype = DType::kBF16;
  else if (kd == "f16" || kd == "float16") c.cache.kv_cache_dtype = DType::kF16;
  else c.cache.kv_cache_dtype.reset();
  if (!v.kv_cache_memory.empty()) {
    LLMS_ASSIGN_OR_RETURN(c.cache.kv_cache_memory_bytes, parse_bytes(v.kv_cache_memory));
  }
  return Status::Ok();
}

}  // namespace llmserve::cli
