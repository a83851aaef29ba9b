#include "cli/remove_on_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace llmserve::cli {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
char g_path[4096] = {};

void on_signal(int sig) {
  if (g_path[0] != '\0') unlink(g_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

Status check_output_path(const std::string& out, const char* command, const char* flag) {
  if (out.empty()) return InvalidArgument("{} must not be empty", flag);
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_regular_file(out, ec))
    return InvalidArgument("{}: exists and is not a regular file ({} replaces only a regular "
                           "file)", out, command);
  return Status::Ok();
}

Status create_temp_file(const std::string& tmp) {
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST)
    return InvalidArgument("{} already exists (an earlier run's temporary file?); remove it or "
                           "choose another output path", tmp);
  if (fd < 0) return NotFound("{}: cannot create file: {}", tmp, std::strerror(errno));
  close(fd);
  return Status::Ok();
}

RemoveOnSignal::RemoveOnSignal(const std::string& path) {
  static_assert(sizeof(kSignals) / sizeof(kSignals[0]) == kCount);
  if (path.size() >= sizeof(g_path)) return;
  std::memcpy(g_path, path.c_str(), path.size() + 1);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < kCount; ++i) {
    sigaction(kSignals[i], nullptr, &old_[i]);
    if (old_[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &sa, nullptr);
  }
  armed_ = true;
}

RemoveOnSignal::~RemoveOnSignal() {
  if (!armed_) return;
  for (int i = 0; i < kCount; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  g_path[0] = '\0';
}

}  // namespace llmserve::cli
