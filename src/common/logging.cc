#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace llmserve {

void init_logging(const std::string& level) {
  static auto logger = [] {
    auto l = spdlog::stderr_color_mt("llmserve");
    l->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_default_logger(l);
    return l;
  }();
  logger->set_level(spdlog::level::from_str(level));
}

}  // namespace llmserve
