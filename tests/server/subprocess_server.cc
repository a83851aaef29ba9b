#include "subprocess_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace llmserve::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string unique_log_path() {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          ("llmserve_serve_" + std::to_string(::getpid()) + "_" +
           std::to_string(counter.fetch_add(1)) + ".log"))
      .string();
}

std::string tail(const std::string& text, size_t n = 2000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

/// Exit status as a shell reports it.
int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ServeProcess::ServeProcess(std::vector<std::string> args, std::string binary,
                           double start_timeout_s) {
  if (binary.empty()) binary = LLMSERVE_BIN;
  log_path_ = unique_log_path();
  std::vector<std::string> argv_s = {binary, "serve"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  for (const char* a : {"--host", "127.0.0.1", "--port", "0"}) argv_s.emplace_back(a);
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment minus LLMSERVE_API_KEY: authentication only when `args` ask for it.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "LLMSERVE_API_KEY=", 17) != 0) envp.push_back(*e);
  envp.push_back(nullptr);

  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    error_ = std::string("fork failed: ") + std::strerror(errno);
    return;
  }
  if (pid_ == 0) {  // child: only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (fd < 0 || devnull < 0) ::_exit(127);
    ::dup2(devnull, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    static const char msg[] = "exec failed\n";
    [[maybe_unused]] ssize_t w = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }

  // Parent: wait for the "serving model '...' on http://127.0.0.1:PORT" line, then /health.
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(start_timeout_s * 1000));
  const std::regex port_re(R"(on http://127\.0\.0\.1:(\d+))");
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = shell_status(status);
      pid_ = -1;
      error_ = "llmserve serve exited with status " + std::to_string(exit_status_) +
               " before serving:\n" + tail(log());
      return;
    }
    if (port_ == 0) {
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, port_re)) port_ = std::stoi(m[1].str());
    }
    if (port_ > 0) {
      httplib::Client client("127.0.0.1", port_);
      client.set_connection_timeout(1);
      client.set_read_timeout(2);
      if (auto r = client.Get("/health"); r && r->status == 200) return;  // ready
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "llmserve serve did not become healthy within " + std::to_string(start_timeout_s) +
           " s:\n" + tail(log());
  stop(2.0);
}

ServeProcess::~ServeProcess() {
  stop();
  std::error_code ec;
  std::filesystem::remove(log_path_, ec);
}

std::string ServeProcess::log() const { return read_file(log_path_); }

long ServeProcess::status_value(const std::string& name) const {
  if (pid_ <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  const std::string key = name + ":";
  while (std::getline(in, line)) {  // e.g. "VmRSS:\t  1234 kB", "Threads:\t5"
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  }
  return -1;
}

int ServeProcess::stop(double timeout_s) {
  if (pid_ <= 0) return exit_status_;
  ::kill(pid_, SIGTERM);
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || r < 0) break;
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  exit_status_ = shell_status(status);
  pid_ = -1;
  return exit_status_;
}

}  // namespace llmserve::testing
