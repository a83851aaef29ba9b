// Test harness: `llmserve serve` as a real child process on a free loopback port, for tests
// that need what only a separate process shows (its RSS, its exit, its command line).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace llmserve::testing {

/// Runs `<binary> serve <args...> --host 127.0.0.1 --port 0` with stdout and stderr written to
/// a log file (environment inherited, except LLMSERVE_API_KEY), and waits until the log names the
/// bound port and GET /health answers 200. The destructor stops the child (SIGTERM, then SIGKILL
/// after `stop_timeout_s`); the child also gets SIGKILL if the test process dies first
/// (PR_SET_PDEATHSIG).
///
/// Usage:
///   ServeProcess srv({model, "--max-model-len", "512"});
///   ASSERT_TRUE(srv.ok()) << srv.error();
///   httplib::Client c("127.0.0.1", srv.port());
class ServeProcess {
 public:
  /// `args`: everything after `serve` (the model and flags; not --host/--port). `binary`:
  /// the llmserve executable (default LLMSERVE_BIN). `start_timeout_s`: how long to wait for
  /// the port and /health before giving up (the child is then killed and ok() is false).
  explicit ServeProcess(std::vector<std::string> args, std::string binary = "",
                        double start_timeout_s = 60.0);
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  /// True once the server answered /health; false if it failed to start (see error()).
  bool ok() const { return port_ > 0 && error_.empty(); }
  /// Why it failed to start, with the log's tail; empty when ok().
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// The child's stdout + stderr so far.
  std::string log() const;

  /// Resident set size of the child in KiB (VmRSS of /proc/<pid>/status); -1 when unknown.
  long rss_kib() const { return status_value("VmRSS"); }
  /// The number in field `name` of /proc/<pid>/status (e.g. "VmRSS" in kB, "Threads");
  /// -1 when the child or the field is not there.
  long status_value(const std::string& name) const;

  /// SIGTERM, wait up to `timeout_s` for the exit, then SIGKILL. Returns the exit status as a
  /// shell would (128 + signal when killed); -1 if there was no child. Idempotent.
  int stop(double timeout_s = 15.0);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string log_path_;
  std::string error_;
};

}  // namespace llmserve::testing
