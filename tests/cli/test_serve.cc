// `llmserve serve` as an operator runs it (a real subprocess on stories260K, loopback only):
// the default host, --api-key / $LLMSERVE_API_KEY, and SIGTERM draining (streams end with
// [DONE], requests after the signal are refused, exit status 0).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "../engine/reference_cases.h"

namespace llmserve {
namespace {

using nlohmann::json;

/// A `llmserve serve` child process on a free port; killed (SIGKILL) if still running at the
/// end of the test.
class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> extra_args,
               std::optional<std::string> api_key_env = std::nullopt) {
    log_path_ = testing::temp_dir() + "/serve_" + std::to_string(counter_++) + ".log";
    std::vector<std::string> args = {LLMSERVE_BIN,
                                     "serve",
                                     testing::stories_bin(),
                                     "--tokenizer",
                                     testing::stories_tokenizer(),
                                     "--port",
                                     "0",
                                     "--threads",
                                     "1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      if (api_key_env)
        setenv("LLMSERVE_API_KEY", api_key_env->c_str(), 1);
      else
        unsetenv("LLMSERVE_API_KEY");
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // The port is in the start-up line: "serving model '...' on http://HOST:PORT".
    const std::regex line(R"(serving model '[^']*' on http://([0-9.]+):([0-9]+))");
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // up to 60 s for the model load
      std::smatch m;
      const std::string log = this->log();
      if (std::regex_search(log, m, line)) {
        host_ = m[1];
        port_ = std::stoi(m[2]);
        break;
      }
      if (exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_GT(port_, 0) << "serve did not start:\n" << log();
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exit_status_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  std::string log() const { return testing::slurp(log_path_); }
  void signal(int sig) const { kill(pid_, sig); }

  bool exited() {
    if (exit_status_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return true;
    }
    return false;
  }
  /// Waits up to timeout_s for the process to exit; its status, or nullopt if still running.
  std::optional<int> wait_exit(double timeout_s) {
    for (int i = 0; i < timeout_s * 100; ++i) {
      if (exited()) return exit_status_;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exited() ? exit_status_ : std::nullopt;
  }

  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(60, 0);
    return c;
  }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  std::string log_path_;
  std::string host_;
  int port_ = 0;
  std::optional<int> exit_status_;
};

TEST(Serve, ListensOnLoopbackByDefault) {
  ServeProcess p({});
  ASSERT_GT(p.port(), 0);
  EXPECT_EQ(p.host(), "127.0.0.1");
  auto r = p.client()->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->get_header_value("X-Request-Id").empty());
  // The access log has one structured line for it.
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(30), 0);
  EXPECT_NE(p.log().find("method=GET path=/health status=200"), std::string::npos) << p.log();
  // The KV blocks a full batch can hold were committed before it listened (default
  // --kv-cache-prefault): stories260K's 512-token context x 128 sequences = 4096 blocks.
  EXPECT_NE(p.log().find("KV cache: 4096 of "), std::string::npos) << p.log();
}

TEST(Serve, NoKvCachePrefaultCommitsOnFirstUse) {
  ServeProcess p({"--no-kv-cache-prefault"});
  ASSERT_GT(p.port(), 0);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(30), 0);
  EXPECT_EQ(p.log().find("committed at start-up"), std::string::npos) << p.log();
}

TEST(Serve, ApiKeyFromEnvironmentOrFlag) {
  {
    ServeProcess p({}, "env-key");
    ASSERT_GT(p.port(), 0);
    auto c = p.client();
    auto r = c->Get("/v1/models");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(json::parse(r->body)["error"]["code"], 401);
    r = c->Get("/v1/models", {{"Authorization", "Bearer env-key"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(c->Get("/health")->status, 200);  // open, as in vLLM
  }
  {
    ServeProcess p({"--api-key", "flag-key", "--disable-log-requests"}, "env-key");
    ASSERT_GT(p.port(), 0);
    auto c = p.client();
    EXPECT_EQ(c->Get("/v1/models", {{"Authorization", "Bearer env-key"}})->status, 401);
    EXPECT_EQ(c->Get("/v1/models", {{"Authorization", "Bearer flag-key"}})->status, 200);
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait_exit(30), 0);
    EXPECT_EQ(p.log().find("request_id="), std::string::npos) << "access log not disabled";
  }
}

TEST(Serve, BenchServeSendsTheApiKeyAndReadsEngineRowsFromMetrics) {
  ServeProcess p({"--api-key", "bench-key", "--disable-log-requests"});
  ASSERT_GT(p.port(), 0);
  const std::string bench = "bench serve --url http://127.0.0.1:" + std::to_string(p.port()) +
                            " --num-prompts 3 --input-len 8 --output-len 4 --vocab-size 512";
  // Without a key: one line naming both ways to give it, exit 1, nothing sent.
  auto r = testing::run_shell("env -u OPENAI_API_KEY " + std::string(LLMSERVE_BIN) + " " + bench);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: GET http://127.0.0.1:" + std::to_string(p.port()) +
                       "/v1/models: 401 Unauthorized: give the server's API key with --api-key "
                       "or OPENAI_API_KEY\n");
  // From $OPENAI_API_KEY (vLLM bench's variable) or --api-key.
  for (const std::string& how : {"env OPENAI_API_KEY=bench-key " + std::string(LLMSERVE_BIN) +
                                     " " + bench + " --json",
                                 "env -u OPENAI_API_KEY " + std::string(LLMSERVE_BIN) + " " +
                                     bench + " --api-key bench-key --json"}) {
    r = testing::run_shell(how);
    ASSERT_EQ(r.exit_code, 0) << how << "\n" << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["completed"], 3);
    EXPECT_EQ(j["failed"], 0);
    // Engine rows from the server's /metrics, not n/a: steps were run, nothing preempted.
    EXPECT_GT(j["num_steps"].get<int64_t>(), 0) << r.out;
    EXPECT_EQ(j["num_preemptions"], 0);
  }
}

TEST(Serve, BadOperationsFlagsAreOneLineErrors) {
  const std::string model = "'" + testing::stories_bin() + "' --tokenizer '" +
                            testing::stories_tokenizer() + "' --port 0";
  for (const auto& [flag, words] : std::vector<std::pair<std::string, std::string>>{
           {"--max-waiting -1", "--max-waiting"},
           {"--shutdown-timeout -2", "--shutdown-timeout"},
           {"--max-request-body-bytes 0", "--max-request-body-bytes"},
           {"--http-threads 5000", "--http-threads"}}) {
    const testing::CommandResult r = testing::run_llmserve("serve " + model + " " + flag);
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_NE(r.err.find(words), std::string::npos) << flag << ": " << r.err;
  }
}

/// Streams `body` to /v1/completions; returns the SSE text, and calls `on_first` once the
/// first bytes arrived.
std::string stream(const ServeProcess& p, const json& body,
                   const std::function<void()>& on_first = nullptr) {
  auto c = p.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string got;
  bool first = true;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    got.append(data, n);
    if (first && on_first) on_first();
    first = false;
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  c->send(req, res, error);
  return got;
}

std::string last_finish_reason(const std::string& sse) {
  const std::regex re(R"re("finish_reason":"([a-z]+)")re");
  std::string reason;
  for (auto it = std::sregex_iterator(sse.begin(), sse.end(), re); it != std::sregex_iterator();
       ++it)
    reason = (*it)[1];
  return reason;
}

bool ends_with_done(const std::string& sse) {
  const std::string tail = "data: [DONE]\n\n";
  return sse.size() >= tail.size() && sse.compare(sse.size() - tail.size(), tail.size(), tail) == 0;
}

/// The value of a `model_name`-labelled gauge on /metrics, or -1.
double gauge(const ServeProcess& p, const std::string& name) {
  auto m = p.client()->Get("/metrics");
  if (!m || m->status != 200) return -1;
  const size_t at = m->body.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  return std::stod(m->body.substr(m->body.find("} ", at) + 2));
}

TEST(Serve, SigtermDrainsStreamsRefusesNewRequestsAndExitsZero) {
  // One sequence at a time, so that requests queue; a shutdown timeout long enough for all.
  ServeProcess p({"--max-num-seqs", "1", "--shutdown-timeout", "60"});
  ASSERT_GT(p.port(), 0);
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"ignore_eos", true},
                     {"stream", true}, {"temperature", 0}};
  std::string first, queued;
  std::thread a([&] { first = stream(p, body); });
  std::thread b([&] { queued = stream(p, body); });
  // Both requests are in (one running, one queued) before the signal.
  bool both_in = false;
  for (int i = 0; i < 3000 && !both_in; ++i)
    both_in = gauge(p, "vllm:num_requests_running") + gauge(p, "vllm:num_requests_waiting") == 2;
  p.signal(SIGTERM);
  // A request after the signal is refused: 503 (the listening socket stays open during the
  // drain), or the connection is turned away once the drain is over.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto r = p.client()->Get("/v1/models");
  const bool refused = !r || r->status == 503;
  a.join();
  b.join();
  ASSERT_TRUE(both_in) << "the two requests were never in flight together";
  EXPECT_TRUE(refused) << (r ? std::to_string(r->status) : "");
  for (const std::string* s : {&first, &queued}) {
    EXPECT_TRUE(ends_with_done(*s)) << s->substr(s->size() > 200 ? s->size() - 200 : 0);
    EXPECT_EQ(last_finish_reason(*s), "length");  // both ran to completion
  }
  EXPECT_EQ(p.wait_exit(60), 0) << p.log();
}

TEST(Serve, ShutdownDeadlineAbortsWhatRemainsCleanly) {
  ServeProcess p({"--max-num-seqs", "1", "--shutdown-timeout", "0"});
  ASSERT_GT(p.port(), 0);
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 450}, {"ignore_eos", true},
                     {"stream", true}, {"temperature", 0}};
  // Four long streams behind one seat; the signal goes out once some of them are queued, and
  // with an immediate deadline those are aborted.
  std::vector<std::string> out(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) clients.emplace_back([&, i] { out[i] = stream(p, body); });
  bool queued = false;
  for (int i = 0; i < 3000 && !queued; ++i) {
    queued = gauge(p, "vllm:num_requests_waiting") >= 2;
    if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(queued) << "the requests never queued";
  p.signal(SIGTERM);
  for (auto& t : clients) t.join();
  int aborted = 0;
  for (const std::string& s : out) {
    EXPECT_TRUE(ends_with_done(s)) << s.substr(s.size() > 200 ? s.size() - 200 : 0);
    const std::string reason = last_finish_reason(s);
    EXPECT_TRUE(reason == "length" || reason == "abort") << reason;
    aborted += reason == "abort";
  }
  EXPECT_GE(aborted, 1);
  EXPECT_EQ(p.wait_exit(30), 0) << p.log();
}

}  // namespace
}  // namespace llmserve
