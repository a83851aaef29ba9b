#include "bench/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/timing.h"

namespace llmserve::bench {

namespace {
constexpr double kPlainIntervalS = 5.0;  // seconds between plain progress lines
constexpr int kBarWidth = 40;            // characters
}  // namespace

ProgressBar::ProgressBar(bool enabled)
    : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1), start_s_(now_seconds()) {}

void ProgressBar::update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const double now = now_seconds(), elapsed = now - start_s_;
  if (tty_) {
    const int filled = static_cast<int>(kBarWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kBarWidth, ' ');
    std::fprintf(stderr, "\r[%s] %lld/%lld requests, %.1f s", bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), elapsed);
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  if (done < total && now - last_print_s_ < kPlainIntervalS) return;
  last_print_s_ = now;
  std::fprintf(stderr, "progress: %lld/%lld requests done, %.1f s\n",
               static_cast<long long>(done), static_cast<long long>(total), elapsed);
}

void ProgressBar::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (enabled_ && tty_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace llmserve::bench
