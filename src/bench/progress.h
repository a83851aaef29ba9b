// Progress on stderr: a redrawn bar when stderr is a terminal, otherwise one plain line at
// most every few seconds (and at the end), so logs stay readable.
#pragma once

#include <cstdint>
#include <mutex>

namespace llmserve::bench {

class ProgressBar {
 public:
  /// `enabled` = false prints nothing.
  explicit ProgressBar(bool enabled = true);
  /// Reports `done` of `total` requests finished. Thread-safe.
  void update(int64_t done, int64_t total);
  /// Ends the bar's line (terminal mode).
  void finish();

 private:
  std::mutex mu_;
  bool enabled_;
  bool tty_;
  double start_s_;
  double last_print_s_ = -1e9;  // seconds (now_seconds clock)
  bool drawn_ = false;
};

}  // namespace llmserve::bench
