// Engine flags shared by serve / generate / logits (vLLM spelling), bound to an EngineConfig.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "config/engine_config.h"

namespace llmserve::cli {

/// Options bound by add_engine_flags that need post-processing.
struct EngineFlagValues {
  std::string kv_cache_memory;  // "2147483648", "512MiB", "2GiB", "1.5G"
  std::string log_level = "info";
  std::string batching = "continuous";
  std::string prefill_policy = "prefill-first";
  std::string scheduling_policy = "fcfs";
  std::string kv_cache_dtype = "auto";
};

/// Adds MODEL (positional) and every engine flag to `app`.
void add_engine_flags(CLI::App& app, EngineConfig& config, EngineFlagValues& values);

/// Applies post-processed values (byte sizes, negations) into config; sets up logging.
Status finish_engine_flags(EngineConfig& config, const EngineFlagValues& values);

/// Parses "123", "64KiB", "512MiB", "2GiB", "2G", "1.5GB" into bytes (binary units).
Expected<int64_t> parse_bytes(const std::string& text);

}  // namespace llmserve::cli
