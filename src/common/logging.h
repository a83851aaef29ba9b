// Logging goes through spdlog; this header only fixes the project-wide setup.
#pragma once

#include <spdlog/spdlog.h>

namespace llmserve {

/// Configures the default logger: stderr, "[time] [level] message", level by name
/// ("debug", "info", "warn", "error"). Safe to call more than once.
void init_logging(const std::string& level);

}  // namespace llmserve
