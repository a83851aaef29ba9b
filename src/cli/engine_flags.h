// Engine flags shared by serve / generate / logits / bench (vLLM spelling), bound to an
// EngineConfig.
#pragma once

#include <optional>
#include <initializer_list>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/dtype.h"
#include "common/status.h"
#include "config/engine_config.h"

namespace llmserve::cli {

/// Options bound by add_engine_flags that need post-processing.
struct EngineFlagValues {
  std::string model_flag;       // --model (the positional MODEL goes to EngineConfig::model_path)
  std::string kv_cache_memory;  // "2147483648", "512MiB", "2GiB", "1.5G"
  std::string log_level = "info";
  std::string batching = "continuous";
  std::string prefill_policy = "prefill-first";
  std::string scheduling_policy = "fcfs";
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";
  int32_t tensor_parallel_size = 1;
  int32_t pipeline_parallel_size = 1;
  std::string gpu_memory_utilization_value;
  CLI::Option* gpu_memory_utilization = nullptr;  // refused when given
  CLI::App* app = nullptr;  // the (sub)command the flags were added to (which were given)
  std::vector<std::string> unused_flags;  // set_unused_flags: no effect on `command`
  std::string command;                    // "logits", for their error
};

/// Marks `flags` (engine flags) as having no effect on `command` (e.g. "logits"): its --help
/// lists them apart, under "Refused by 'llmserve logits'", and finish_engine_flags refuses the first one given before any other check,
/// "--seed has no effect on 'llmserve logits'" (a flag with no effect is refused, never
/// silently ignored, and no other error sends the user to one). Call after add_engine_flags.
void set_unused_flags(EngineFlagValues& values, std::vector<std::string> flags,
                      std::string command);

/// Adds MODEL (positional, or --model) and every engine flag to `app`.
void add_engine_flags(CLI::App& app, EngineConfig& config, EngineFlagValues& values);

/// Applies post-processed values (byte sizes, dtypes, the model path) into config and sets up
/// logging. Errors (one line naming the flag): a flag of set_unused_flags given, flags llmserve
/// refuses (--tensor-parallel-size
/// or --pipeline-parallel-size other than 1, --gpu-memory-utilization), MODEL and --model both
/// given and different, no model when `model_required`, bad byte sizes.
Status finish_engine_flags(EngineConfig& config, const EngineFlagValues& values,
                           bool model_required = true);

/// Adds the positional MODEL (into `positional`) and --model (into `flag`) to `app`; vLLM
/// accepts either. resolve_model_path() picks one.
void add_model_options(CLI::App& app, std::string& positional, std::string& flag,
                       const std::string& description);

/// The model path from MODEL and --model: the one given, or both when they are equal.
/// Errors: both given and different; neither given when `required`.
Expected<std::string> resolve_model_path(const std::string& positional, const std::string& flag,
                                         bool required);

/// Parses "123", "64KiB", "512MiB", "2GiB", "2G", "1.5GB", "1TiB" into bytes (binary units,
/// case-insensitive). Errors name --kv-cache-memory (an unknown unit: with the accepted ones).
Expected<int64_t> parse_bytes(const std::string& text);

/// The --dtype / --kv-cache-dtype spellings: vLLM's (auto, float32, float, bfloat16, float16,
/// half) and the short ones (f32, bf16, f16). nullopt = auto. Errors name `flag` and the
/// accepted spellings; "auto" is an error when !allow_auto.
Expected<std::optional<DType>> parse_dtype(const std::string& flag, const std::string& text,
                                           bool allow_auto = true);

/// A CLI11 check accepting exactly parse_dtype's spellings (so a bad value fails at parse).
CLI::Validator dtype_validator(bool allow_auto = true);

}  // namespace llmserve::cli
