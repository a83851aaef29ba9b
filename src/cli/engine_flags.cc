#include "cli/engine_flags.h"

#include <cctype>
#include <cmath>
#include <map>

#include "cli/human_int.h"
#include "common/logging.h"
#include "quant/quant_scheme.h"

namespace llmserve::cli {

namespace {

/// Every --dtype spelling and what it means (nullopt = auto).
const std::map<std::string, std::optional<DType>>& dtype_names() {
  static const std::map<std::string, std::optional<DType>> kNames = {
      {"auto", std::nullopt},   {"float32", DType::kF32},   {"float", DType::kF32},
      {"f32", DType::kF32},     {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
      {"float16", DType::kF16}, {"half", DType::kF16},      {"f16", DType::kF16}};
  return kNames;
}

/// Why `text` is no dtype ("'fp8' is not one of ..."), or "" when it is one.
std::string dtype_error(const std::string& text, bool allow_auto) {
  if (dtype_names().count(text) && (allow_auto || text != "auto")) return "";
  return fmt::format("'{}' is not one of {}float32 (float, f32), bfloat16 (bf16), float16 "
                     "(half, f16)", text, allow_auto ? "auto, " : "");
}

}  // namespace

void add_model_options(CLI::App& app, std::string& positional, std::string& flag,
                       const std::string& description) {
  app.add_option("model", positional, description + " (or --model)");
  app.add_option("--model", flag, description + " (or the positional MODEL)");
}

Expected<std::string> resolve_model_path(const std::string& positional, const std::string& flag,
                                         bool required) {
  if (!positional.empty() && !flag.empty() && positional != flag)
    return InvalidArgument("MODEL '{}' and --model '{}' differ; give the model once", positional,
                           flag);
  if (positional.empty() && flag.empty() && required)
    return InvalidArgument("no model given (MODEL or --model)");
  return positional.empty() ? flag : positional;
}

void add_engine_flags(CLI::App& app, EngineConfig& c, EngineFlagValues& v) {
  v.app = &app;
  add_model_options(app, c.model_path, v.model_flag,
                    "Model: GGUF file, llama2.c .bin checkpoint or Hugging Face directory "
                    "(config.json + *.safetensors)");
  app.add_option("--tokenizer", c.tokenizer_path,
                 "Tokenizer: a GGUF file, a Hugging Face directory or tokenizer.json, or a llama2.c "
                 "tokenizer.bin (required for .bin checkpoints; GGUF models and HF directories "
                 "with tokenizer.json bring their own)");
  app.add_option("--served-model-name", c.served_model_name,
                 "Model name in the API (default: the model file's stem)");
  app.add_option("--dtype", v.dtype,
                 "Weight dtype: auto (each tensor's file dtype, read in place), float32 / float / "
                 "f32, bfloat16 / bf16, float16 / half / f16 (F32/F16/BF16 weight matrices "
                 "converted at load; norms stay float32)")
      ->check(dtype_validator())
      ->capture_default_str();
  app.add_option("--generation-config", c.generation_config,
                 "Sampling defaults: auto (the checkpoint's generation_config.json), vllm (none; "
                 "its eos ids still stop generation) or a directory holding a "
                 "generation_config.json")
      ->capture_default_str();
  app.add_option("--max-num-seqs", c.scheduler.max_num_seqs,
                 "Maximum sequences scheduled in one step")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", c.scheduler.max_num_batched_tokens,
                 "Token budget of one step (prefill chunks + decodes)")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--max-model-len", c.scheduler.max_model_len,
                 "Maximum tokens (prompt + output) of one sequence (default: the model's "
                 "context length)")
      ->transform(human_int(1));
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
      // The range at parse time, so that a bad value is named as such in every command
      // (before "only applies with --batching dynamic" or "has no effect").
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            size_t used = 0;
            double ms = 0;
            try {
              ms = std::stod(text, &used);
            } catch (...) {
              return "";  // not a number: CLI11's conversion error names it
            }
            if (used != text.size()) return "";
            if (!(ms >= 0) || ms > 3.6e6) return "must be in [0, 3600000], got " + text;
            return "";
          },
          ""))
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
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching",
               c.cache.enable_prefix_caching,
               "Automatic prefix caching: full KV blocks are shared across requests with the "
               "same token prefix and kept after use until evicted (default: on)");
  app.add_flag("--kv-cache-prefault,!--no-kv-cache-prefault", c.cache.kv_cache_prefault,
               fmt::format("Commit the KV blocks a full batch can hold at start-up (written once), "
                           "not on first use under a request (default: {})",
                           c.cache.kv_cache_prefault ? "on" : "off"));
  app.add_option("--kv-cache-memory", v.kv_cache_memory,
                 "KV cache budget in bytes (suffixes KiB/MiB/GiB/TiB accepted; default 2GiB)")
      ->check(CLI::Validator(  // "" would read as "not given", i.e. the default
          [](std::string& value) {
            return value.empty() ? std::string("needs a size, got an empty value") : std::string();
          },
          "", "non-empty"));
  app.add_option("--num-kv-blocks", c.cache.num_kv_blocks,
                 "Number of KV blocks (overrides --kv-cache-memory; at least 1)")
      ->transform(human_int(1));
  app.add_option("--threads", c.num_threads,
                 fmt::format("Compute threads, 0 to {} (0 = auto: the physical cores; default)",
                             kMaxThreads))
      ->transform(human_int(0, kMaxThreads));
  app.add_option("--seed", c.seed, "Default seed for requests that give none")
      ->transform(human_int(0, INT64_MAX))  // a uint64: "-1" would wrap around; 1k = 1000
      ->capture_default_str();
  app.add_option("--attention-backend", c.attention_backend,
                 "Attention implementation: flash (tiled, online softmax, batch-invariant), "
                 "flash-split (flash-decoding context split: faster for few long decodes, not "
                 "batch-invariant) or naive (reference: materialises the score matrix)")
      ->check(CLI::IsMember({"flash", "flash-split", "naive", "reference"}))
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", v.kv_cache_dtype,
                 "KV cache element type: auto (the model's dtype after --dtype), float32 / f32, "
                 "bfloat16 / bf16, float16 / half / f16")
      ->check(dtype_validator())
      ->capture_default_str();
  // -tp / -pp: vLLM's short forms, rewritten to these by expand_short_aliases (main.cc).
  app.add_option("--tensor-parallel-size", v.tensor_parallel_size,
                 "(-tp) Accepted for vLLM compatibility: only 1 (one CPU process)")
      ->capture_default_str();
  app.add_option("--pipeline-parallel-size", v.pipeline_parallel_size,
                 "(-pp) Accepted for vLLM compatibility: only 1 (one CPU process)")
      ->capture_default_str();
  v.gpu_memory_utilization =
      app.add_option("--gpu-memory-utilization", v.gpu_memory_utilization_value,
                     "Refused (a CPU engine): size the KV cache with --kv-cache-memory");
  app.add_option("--quantization", c.quantization,
                 "Quantize f32/f16/bf16 weight matrices at load (norms untouched): " +
                     quantization_flag_names() + "; an already quantized file must match (its types "
                     "are those the value gives, or mostly the value's type)")
      ->check(CLI::IsMember(quantization_flag_values()));
  app.add_option("--log-level", v.log_level, "Log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

Expected<std::optional<DType>> parse_dtype(const std::string& flag, const std::string& text,
                                           bool allow_auto) {
  if (std::string err = dtype_error(text, allow_auto); !err.empty())
    return InvalidArgument("{}: {}", flag, err);
  return dtype_names().at(text);
}

CLI::Validator dtype_validator(bool allow_auto) {
  return CLI::Validator(
      [allow_auto](std::string& value) { return dtype_error(value, allow_auto); }, "");
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
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1099511627776.0;
  else
    return InvalidArgument("--kv-cache-memory: unknown unit '{}' in '{}' (units: B, KiB, MiB, "
                           "GiB, TiB; K/KB, M/MB, G/GB, T/TB the same, binary)",
                           text.substr(i), text);
  const double bytes = value * mult;
  if (!(bytes >= 1) || bytes > 9e18)
    return InvalidArgument("--kv-cache-memory: '{}' is out of range (1 byte to 9e18 bytes)", text);
  return static_cast<int64_t>(std::llround(bytes));
}

namespace {

/// The first of set_unused_flags' flags given on the command line, as an error.
Status reject_unused_flags(const EngineFlagValues& v) {
  if (v.app == nullptr) return Status::Ok();
  for (const std::string& flag : v.unused_flags) {
    if (v.app->count(flag) == 0) continue;
    // A flag with a negation (--x / --no-x) is named by both spellings: count() cannot tell
    // which one was given.
    std::string names;
    if (const CLI::Option* opt = v.app->get_option_no_throw(flag); opt != nullptr)
      for (const std::string& n : opt->get_lnames()) names += (names.empty() ? "--" : " / --") + n;
    return InvalidArgument("{} has no effect on 'llmserve {}'", names.empty() ? flag : names,
                           v.command);
  }
  return Status::Ok();
}

}  // namespace

void set_unused_flags(EngineFlagValues& v, std::vector<std::string> flags, std::string command) {
  // A group of their own at the end of --help, still parsed (to be refused by name). Not
  // hidden: CLI11 names a hidden option "" in its parse errors.
  const std::string group = fmt::format("Refused by 'llmserve {}' (no effect there)", command);
  for (const std::string& flag : flags)
    if (CLI::Option* opt = v.app->get_option_no_throw(flag); opt != nullptr) opt->group(group);
  v.unused_flags = std::move(flags);
  v.command = std::move(command);
}

Status finish_engine_flags(EngineConfig& c, const EngineFlagValues& v, bool model_required) {
  // Flags with no effect on this command first: no other check may point to one of them.
  LLMS_RETURN_IF_ERROR(reject_unused_flags(v));
  // Refusals: flags a vLLM user may bring that mean nothing here.
  if (v.tensor_parallel_size != 1)
    return InvalidArgument("--tensor-parallel-size {} is not supported: llmserve runs the model "
                           "in one CPU process (no tensor parallelism); use 1",
                           v.tensor_parallel_size);
  if (v.pipeline_parallel_size != 1)
    return InvalidArgument("--pipeline-parallel-size {} is not supported: llmserve runs the "
                           "model in one CPU process (no pipeline parallelism); use 1",
                           v.pipeline_parallel_size);
  if (v.gpu_memory_utilization != nullptr && v.gpu_memory_utilization->count() > 0)
    return InvalidArgument("--gpu-memory-utilization is not supported: llmserve is a CPU "
                           "engine; size the KV cache in bytes with --kv-cache-memory (e.g. "
                           "--kv-cache-memory 4GiB)");
  LLMS_ASSIGN_OR_RETURN(c.model_path, resolve_model_path(c.model_path, v.model_flag,
                                                         model_required));
  // Flags whose value would have no effect with the others given.
  const auto given = [&](const char* flag) { return v.app != nullptr && v.app->count(flag) > 0; };
  if (given("--prefill-policy") && c.scheduler.enable_chunked_prefill)
    return InvalidArgument("--prefill-policy only applies with --no-enable-chunked-prefill "
                           "(chunked prefill, the default, interleaves prompts and decodes "
                           "itself)");
  if (given("--max-delay-ms") && v.batching != "dynamic")
    return InvalidArgument("--max-delay-ms only applies with --batching dynamic");
  if (given("--served-model-name") && c.served_model_name.empty())
    return InvalidArgument("--served-model-name must not be empty");
  init_logging(v.log_level);
  c.scheduler.batching = v.batching == "static"    ? BatchingMode::kStatic
                         : v.batching == "dynamic" ? BatchingMode::kDynamic
                                                   : BatchingMode::kContinuous;
  c.scheduler.prefill_policy =
      v.prefill_policy == "mixed" ? PrefillPolicy::kMixed : PrefillPolicy::kPrefillFirst;
  c.scheduler.policy =
      v.scheduling_policy == "priority" ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  LLMS_ASSIGN_OR_RETURN(c.dtype, parse_dtype("--dtype", v.dtype));
  LLMS_ASSIGN_OR_RETURN(c.cache.kv_cache_dtype, parse_dtype("--kv-cache-dtype", v.kv_cache_dtype));
  if (!v.kv_cache_memory.empty()) {
    LLMS_ASSIGN_OR_RETURN(c.cache.kv_cache_memory_bytes, parse_bytes(v.kv_cache_memory));
  }
  return Status::Ok();
}

}  // namespace llmserve::cli
