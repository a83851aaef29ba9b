// Monotonic wall-clock helpers. All engine timestamps are seconds since an arbitrary epoch
// (steady_clock), as doubles, so that differences are latencies in seconds.
#pragma once

#include <chrono>

namespace llmserve {

/// Seconds on the steady (monotonic) clock.
inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace llmserve
