// Server operations over real loopback HTTP (fake engine): API key, body limit, queue limit
// (429 + Retry-After), graceful shutdown (drain), client disconnects while queued, failure
// counters and success counts under disconnect load, request ids, connection timeouts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/async_engine.h"
#include "fake_engine.h"
#include "prometheus_text.h"
#include "server/api_error.h"
#include "server/engine_bridge.h"
#include "server/metrics.h"
#include "server/http_server.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

/// FakeEngine -> AsyncEngine (with max_waiting) -> HttpServer on a free loopback port.
class OpsServer {
 public:
  explicit OpsServer(FakeEngineOptions opts, ServerConfig config = {}, int32_t max_waiting = 0) {
    auto fake = std::make_unique<FakeEngine>(std::move(opts));
    fake_ = fake.get();
    engine_ = std::make_unique<AsyncEngine>(std::move(fake), max_waiting);
    config.port = 0;
    server_ = std::make_unique<HttpServer>(*engine_, std::move(config));
    Status st = server_->bind();
    EXPECT_TRUE(st.ok()) << st.message();
    listen_thread_ = std::thread([this] { listen_status_ = server_->listen(); });
  }
  ~OpsServer() { join(/*stop=*/true); }

  /// Waits for listen() to return (after shutdown()), or stops the server first.
  void join(bool stop) {
    if (!listen_thread_.joinable()) return;
    if (stop) server_->stop();
    listen_thread_.join();
    EXPECT_TRUE(listen_status_.ok()) << listen_status_.message();
  }

  FakeEngine& fake() { return *fake_; }
  HttpServer& server() { return *server_; }
  AsyncEngine& engine() { return *engine_; }
  int port() const { return server_->bound_port(); }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port());
    c->set_read_timeout(30, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body,
                       const httplib::Headers& headers = {}) const {
    return client()->Post(path.c_str(), headers, body.dump(), "application/json");
  }
  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) const {
    return client()->Get(path.c_str(), headers);
  }
  PrometheusPage metrics() const {
    auto r = get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    PrometheusPage page = parse_prometheus_text(r ? r->body : "");
    EXPECT_TRUE(page.errors.empty()) << page.error_text();
    return page;
  }

 private:
  FakeEngine* fake_ = nullptr;
  std::unique_ptr<AsyncEngine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread listen_thread_;
  Status listen_status_;
};

FakeEngineOptions slow_engine(int32_t max_num_seqs = 256, int step_ms = 2) {
  FakeEngineOptions opts;
  opts.max_model_len = 1 << 20;
  opts.num_blocks = 1 << 20;
  opts.max_num_seqs = max_num_seqs;
  opts.step_delay = std::chrono::milliseconds(step_ms);
  return opts;
}

std::string series(const std::string& name, const std::string& extra = "") {
  return name + "{model_name=\"fake-model\"" + (extra.empty() ? "" : "," + extra) + "}";
}
std::string failure_series(const std::string& reason) {
  return series("llmserve:request_failure_total", "reason=\"" + reason + "\"");
}
std::string success_series(const std::string& reason) {
  return series("vllm:request_success_total", "finished_reason=\"" + reason + "\"");
}

/// A raw loopback TCP connection (for clients that misbehave: hang up, send half a request).
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    timeval tv{30, 0};  // a safety net only: the tests expect the server to act first
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConnection() { close(); }
  void send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  /// Reads until the server closes the connection; false if the read timed out instead.
  bool read_until_closed(std::string* out = nullptr) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      if (out) out->append(buf, static_cast<size_t>(n));
    }
  }
  /// Waits for the first bytes of the reply.
  void read_some() {
    char buf[256];
    (void)::recv(fd_, buf, sizeof(buf), 0);
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

/// Parses an SSE body: the JSON events and whether it ended with exactly one [DONE].
struct Sse {
  std::vector<json> chunks;
  bool ends_with_done = false;
};
Sse parse_sse(const std::string& body) {
  Sse sse;
  size_t pos = 0;
  std::string last;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    last = body.substr(pos + 6, end - pos - 6);
    if (last != "[DONE]") sse.chunks.push_back(json::parse(last));
    pos = end + 2;
  }
  sse.ends_with_done = last == "[DONE]";
  return sse;
}

std::string finish_reason_of(const Sse& sse) {
  for (const json& c : sse.chunks)
    if (c.contains("choices") && !c["choices"].empty() &&
        c["choices"][0]["finish_reason"].is_string())
      return c["choices"][0]["finish_reason"];
  return "";
}

// ---------------------------------------------------------------------------------------

TEST(ServerConfigDefaults, LoopbackHostAndSaneLimits) {
  const ServerConfig c;
  EXPECT_EQ(c.host, "127.0.0.1");  // never all interfaces unless asked
  EXPECT_EQ(c.max_request_body_bytes, size_t{8} << 20);
  EXPECT_TRUE(c.log_requests);
  EXPECT_TRUE(c.validate().ok());
  ServerConfig bad;
  bad.num_http_threads = -1;
  EXPECT_FALSE(bad.validate().ok());
  bad = ServerConfig{};
  bad.read_timeout_s = 0;
  EXPECT_FALSE(bad.validate().ok());
}

TEST(ApiErrorMapping, UnavailableIs429AndResourceExhaustedStays400) {
  const ApiError busy = api_error_from_status(Unavailable("queue full"));
  EXPECT_EQ(busy.http_status, 429);
  EXPECT_EQ(busy.type, "RateLimitError");
  EXPECT_EQ(busy.to_json()["error"]["code"], 429);
  EXPECT_EQ(api_error_from_status(ResourceExhausted("needs 9 blocks")).http_status, 400);
  EXPECT_EQ(service_unavailable("x").http_status, 503);
  EXPECT_EQ(payload_too_large("x").to_json()["error"]["code"], 413);
}

TEST(ApiKey, V1NeedsTheBearerKeyOtherPathsStayOpen) {
  ServerConfig config;
  config.api_key = "s3cret-key";
  OpsServer s(slow_engine(256, 0), config);
  const json body = {{"prompt", "hi"}, {"max_tokens", 2}};
  expect_api_error(s.post("/v1/completions", body), 401, std::nullopt, {"API key"});
  expect_api_error(s.get("/v1/models", {{"Authorization", "Bearer wrong-key!"}}), 401,
                   std::nullopt);
  expect_api_error(s.get("/v1/models", {{"Authorization", "Bearer s3cret-ke"}}), 401,
                   std::nullopt);  // a prefix of the key
  expect_api_error(s.get("/v1/models", {{"Authorization", "Bearer s3cret-key2"}}), 401,
                   std::nullopt);  // the key plus more
  expect_api_error(s.get("/v1/models", {{"Authorization", "s3cret-key"}}), 401, std::nullopt);
  auto ok = s.post("/v1/completions", body, {{"Authorization", "Bearer s3cret-key"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(s.get("/health")->status, 200);
  EXPECT_EQ(s.get("/metrics")->status, 200);
  EXPECT_TRUE(wait_for([&] { return s.metrics().value(failure_series("unauthorized")) == 5; }));
}

TEST(BodyLimit, TenMegabyteBodyIs413WithAnOpenAIError) {
  OpsServer s(slow_engine(256, 0));  // default limit: 8 MiB
  const std::string big = json{{"prompt", std::string(10'000'000, 'a')}, {"max_tokens", 1}}.dump();
  ASSERT_GT(big.size(), size_t{10'000'000});
  auto r = s.client()->Post("/v1/completions", big, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  expect_api_error(r, 413, std::nullopt, {"too large"});
  EXPECT_FALSE(r->get_header_value("X-Request-Id").empty());
  EXPECT_EQ(s.fake().num_added(), 0);
  // Just under the limit is parsed (and fails on the fake's context length, not on size).
  ServerConfig small;
  small.max_request_body_bytes = 1000;
  OpsServer t(slow_engine(256, 0), small);
  expect_api_error(t.client()->Post("/v1/completions",
                                    json{{"prompt", std::string(1000, 'a')}}.dump(),
                                    "application/json"),
                   413, std::nullopt);
  auto fits = t.post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 1}});
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200);
  EXPECT_TRUE(wait_for([&] { return t.metrics().value(failure_series("too_large")) == 1; }));
}

TEST(QueueLimit, FullQueueGives429WithRetryAfterAndDistinctFrom400) {
  // One running seat; max_waiting 2: the 4th concurrent request is turned away.
  OpsServer s(slow_engine(/*max_num_seqs=*/1, /*step_ms=*/5), {}, /*max_waiting=*/2);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  auto start = [&](int i) {
    clients.emplace_back([&, i] {
      auto r = s.post("/v1/completions",
                      {{"prompt", "q" + std::to_string(i)}, {"max_tokens", i == 0 ? 300 : 2}});
      if (r && r->status == 200) ++ok;
    });
  };
  start(0);  // the long one takes the seat first
  EXPECT_TRUE(wait_for([&] { return s.fake().blocks_in_use() > 0; }, 10.0));
  start(1);
  start(2);
  const bool queued = wait_for([&] {
    const PrometheusPage p = s.metrics();
    return p.value(series("vllm:num_requests_running")) == 1 &&
           p.value(series("vllm:num_requests_waiting")) == 2;
  }, 10.0);
  EXPECT_TRUE(queued);
  if (!queued) {
    for (auto& t : clients) t.join();
    return;
  }
  auto r = s.post("/v1/completions", {{"prompt", "late"}, {"max_tokens", 2}});
  expect_api_error(r, 429, std::nullopt, {"--max-waiting 2"});
  ASSERT_TRUE(r);
  const std::string retry = r->get_header_value("Retry-After");
  ASSERT_FALSE(retry.empty());
  EXPECT_GE(std::stoi(retry), 1);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "RateLimitError");
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 3);
  // A request that can never fit is still a 400, not a 429.
  FakeEngineOptions small = slow_engine(1, 0);
  small.max_model_len = 16;
  OpsServer t(small, {}, 2);
  expect_api_error(t.post("/v1/completions", {{"prompt", "hello"}, {"max_tokens", 100}}), 400,
                   "*");
  EXPECT_EQ(s.metrics().value(failure_series("queue_full")), 1);
}

TEST(Disconnect, QueuedClientsLeavingAreAbortedBeforeTheyRunAndFreeEverything) {
  OpsServer s(slow_engine(/*max_num_seqs=*/1, /*step_ms=*/5));
  // A long request holds the only seat.
  std::thread runner([&] {
    auto r = s.post("/v1/completions", {{"prompt", "run"}, {"max_tokens", 150}});
    EXPECT_TRUE(r && r->status == 200);
  });
  struct Joiner {
    std::thread& t;
    ~Joiner() { if (t.joinable()) t.join(); }
  } join_runner{runner};
  ASSERT_TRUE(wait_for([&] { return s.fake().blocks_in_use() > 0; }, 10.0));
  // Three more, streamed and not, wait behind it; their clients hang up.
  std::vector<std::unique_ptr<RawConnection>> conns;
  for (int i = 0; i < 3; ++i) {
    conns.push_back(std::make_unique<RawConnection>(s.port()));
    conns.back()->send_all(http_post(
        "/v1/completions",
        json{{"prompt", "wait" + std::to_string(i)}, {"max_tokens", 50}, {"stream", i != 1}}
            .dump()));
  }
  ASSERT_TRUE(wait_for([&] {
    return s.metrics().value(series("vllm:num_requests_waiting")) == 3;
  }, 10.0));
  for (auto& c : conns) c->close();
  // Aborted while still waiting: the queue empties while the first request still runs.
  EXPECT_TRUE(wait_for([&] { return s.fake().num_aborted() == 3; }, 10.0));
  // The gauges are the snapshot after the next step.
  EXPECT_TRUE(wait_for([&] {
    return s.metrics().value(series("vllm:num_requests_waiting")) == 0;
  }, 10.0));
  EXPECT_EQ(s.metrics().value(series("vllm:num_requests_running")), 1)
      << "the aborts should not wait for the running request";
  runner.join();
  const PrometheusPage page = s.metrics();
  EXPECT_EQ(page.value(series("vllm:num_requests_waiting")), 0);
  EXPECT_EQ(page.value(series("vllm:num_requests_running")), 0);
  EXPECT_EQ(page.value(series("llmserve:kv_blocks_used")), 0);
  EXPECT_EQ(s.fake().blocks_in_use(), 0);
  // The aborted ones never ran: only the runner's 150 tokens and 3-token prompt were counted.
  EXPECT_EQ(page.value(series("vllm:generation_tokens_total")), 150);
  EXPECT_EQ(page.value(series("vllm:prompt_tokens_total")),
            static_cast<double>(fake_encode("run", /*add_bos=*/true).size()));
  EXPECT_EQ(page.value(success_series("abort")), 3);
  EXPECT_EQ(page.value(success_series("length")), 1);
  EXPECT_EQ(page.value(failure_series("client_disconnect")), 3);
}

// Regression (QA: completed streaming requests counted as finished_reason="abort" under load
// with clients disconnecting): when the server gives up on a request whose final output the
// engine already pushed (the HTTP thread lags behind the engine under load), the request
// finished; it must be counted with its real finish reason and not aborted in the engine.
TEST(MetricsRegression, GivingUpAfterTheEngineFinishedCountsTheRealFinishReason) {
  FakeEngineOptions opts = slow_engine(256, /*step_ms=*/1);
  auto fake_owned = std::make_unique<FakeEngine>(opts);
  FakeEngine& fake = *fake_owned;
  AsyncEngine engine(std::move(fake_owned));
  ServerMetrics metrics;
  auto submit = [&](int32_t max_tokens) {
    EngineRequest req;
    req.prompt_token_ids = fake_encode("abc", /*add_bos=*/true);
    req.params.max_tokens = max_tokens;
    req.params.ignore_eos = true;
    auto stream = engine.submit(std::move(req));
    if (!stream.ok()) throw std::runtime_error(stream.status().message());
    return std::make_unique<InflightRequest>(engine, metrics, std::move(*stream));
  };
  auto done = submit(4);  // 4 steps of 1 ms
  // The engine finishes it; none of its outputs has been read yet.
  ASSERT_TRUE(wait_for([&] { return engine.num_unfinished() == 0; }, 10.0));
  done->abort();  // e.g. the client hung up at the very end
  EXPECT_TRUE(done->finished());
  const PrometheusPage page = parse_prometheus_text(metrics.render(EngineStats{}, "m"));
  const std::string success = "vllm:request_success_total{model_name=\"m\",finished_reason=\"";
  EXPECT_EQ(page.value(success + "length\"}"), 1);
  EXPECT_EQ(page.value(success + "abort\"}"), 0);
  EXPECT_EQ(page.value("vllm:generation_tokens_total{model_name=\"m\"}"), 4);
  EXPECT_EQ(page.value("vllm:request_generation_tokens_count{model_name=\"m\"}"), 1);
  // A request the engine has not finished is still aborted (and counted so).
  auto running = submit(100000);
  ASSERT_TRUE(wait_for([&] { return fake.blocks_in_use() > 0; }, 10.0));
  running->abort();
  EXPECT_TRUE(wait_for([&] { return fake.num_aborted() == 1; }, 10.0));
  const PrometheusPage after = parse_prometheus_text(metrics.render(EngineStats{}, "m"));
  EXPECT_EQ(after.value(success + "abort\"}"), 1);
  EXPECT_EQ(after.value(success + "length\"}"), 1);
}

// Under concurrent streaming chat load with some clients hanging up,
// requests whose streams completed were counted as finished_reason="abort".
TEST(MetricsUnderLoad, CompletedStreamsCountAsSuccessDisconnectsAsAbort) {
  OpsServer s(slow_engine(/*max_num_seqs=*/64, /*step_ms=*/1));
  constexpr int kClients = 40;
  std::atomic<int> completed{0}, done_ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      const bool leaves = i % 3 == 0;
      const json body = {{"model", "fake-model"},
                         {"messages", json::array({{{"role", "user"}, {"content", "hi " +
                                                                        std::to_string(i)}}})},
                         {"max_tokens", leaves ? 100000 : 30 + i},
                         {"stream", true}};
      if (leaves) {
        RawConnection c(s.port());
        c.send_all(http_post("/v1/chat/completions", body.dump()));
        c.read_some();  // the stream started
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + i));
        c.close();  // mid-stream
        return;
      }
      auto r = s.post("/v1/chat/completions", body);
      if (!r || r->status != 200) return;
      const Sse sse = parse_sse(r->body);
      if (sse.ends_with_done && finish_reason_of(sse) == "length") ++done_ok;
      ++completed;
    });
  for (auto& t : clients) t.join();
  const int leavers = (kClients + 2) / 3;
  EXPECT_EQ(completed.load(), kClients - leavers);
  EXPECT_EQ(done_ok.load(), kClients - leavers);
  ASSERT_TRUE(wait_for([&] { return s.fake().num_aborted() == leavers; }, 10.0));
  ASSERT_TRUE(wait_for([&] {
    return s.metrics().value(failure_series("client_disconnect")) == leavers;
  }, 10.0));
  const PrometheusPage page = s.metrics();
  EXPECT_EQ(page.value(success_series("length")), kClients - leavers);
  EXPECT_EQ(page.value(success_series("stop")), 0);
  EXPECT_EQ(page.value(success_series("abort")), leavers);
  EXPECT_EQ(page.value(series("llmserve:kv_blocks_used")), 0);
  EXPECT_EQ(page.value(failure_series("shutdown")), 0);
}

TEST(RequestId, SaneIdIsEchoedOthersReplaced) {
  OpsServer s(slow_engine(256, 0));
  auto r = s.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}},
                  {{"X-Request-Id", "client-id_42.a:b"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("X-Request-Id"), "client-id_42.a:b");
  // The OpenAI response id carries it too (vLLM: "cmpl-" + the request id).
  EXPECT_EQ(nlohmann::json::parse(r->body).at("id"), "cmpl-client-id_42.a:b");
  const std::regex generated("[0-9a-f]{32}");
  for (const std::string& bad : {std::string("has space"), std::string(129, 'a'),
                                std::string("semi;colon")}) {
    auto b = s.get("/health", {{"X-Request-Id", bad}});
    ASSERT_TRUE(b);
    EXPECT_TRUE(std::regex_match(b->get_header_value("X-Request-Id"), generated))
        << b->get_header_value("X-Request-Id");
  }
  // Without one, each request gets its own; errors (404) carry one too.
  auto a = s.get("/health"), b = s.get("/nope");
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(std::regex_match(a->get_header_value("X-Request-Id"), generated));
  EXPECT_TRUE(std::regex_match(b->get_header_value("X-Request-Id"), generated));
  EXPECT_NE(a->get_header_value("X-Request-Id"), b->get_header_value("X-Request-Id"));
  EXPECT_EQ(b->status, 404);
  // Streams too.
  auto st = s.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"stream", true}},
                   {{"X-Request-Id", "stream-1"}});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->get_header_value("X-Request-Id"), "stream-1");
  EXPECT_NE(st->body.find("\"id\":\"cmpl-stream-1\""), std::string::npos) << st->body;
  // Without a client id the response id is "cmpl-" + the generated X-Request-Id.
  auto g = s.post("/v1/chat/completions",
                  {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}});
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, 200) << g->body;
  EXPECT_EQ(nlohmann::json::parse(g->body).at("id"),
            "chatcmpl-" + g->get_header_value("X-Request-Id"));
}

TEST(Shutdown, DrainLetsInFlightFinishAndRefusesNewRequests) {
  OpsServer s(slow_engine(256, 2));
  std::string body;
  std::thread client([&] {
    auto r = s.post("/v1/completions", {{"prompt", "p"}, {"max_tokens", 200}, {"stream", true}});
    if (r) body = r->body;
  });
  EXPECT_TRUE(wait_for([&] { return s.fake().blocks_in_use() > 0; }, 10.0));
  std::thread drainer([&] { s.server().shutdown(/*timeout_s=*/60); });
  struct Joiner {
    std::thread& a;
    std::thread& b;
    ~Joiner() {
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
    }
  } joiner{client, drainer};
  EXPECT_TRUE(wait_for([&] { return s.server().shutting_down(); }));
  // New requests (and health checks) get 503 while the stream runs on (the listening socket
  // stays open during the drain).
  auto late = s.post("/v1/completions", {{"prompt", "late"}, {"max_tokens", 2}});
  expect_api_error(late, 503, std::nullopt, {"shutting down"});
  auto health = s.get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  client.join();
  drainer.join();
  s.join(/*stop=*/false);  // listen() returned by itself
  const Sse sse = parse_sse(body);
  EXPECT_TRUE(sse.ends_with_done);
  EXPECT_EQ(finish_reason_of(sse), "length");  // ran to completion
  EXPECT_EQ(s.fake().num_aborted(), 0);
  EXPECT_EQ(s.fake().num_added(), 1);
}

TEST(Shutdown, DeadlineEndsStreamsCleanlyAndNonStreamingWith503) {
  OpsServer s(slow_engine(256, 2));
  std::string stream_body;
  std::optional<httplib::Result> whole;
  std::thread streamer([&] {
    auto r = s.post("/v1/chat/completions",
                    {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                     {"max_tokens", 500000},
                     {"stream", true}});
    if (r) stream_body = r->body;
  });
  std::thread waiter([&] {
    whole.emplace(s.post("/v1/completions", {{"prompt", "p"}, {"max_tokens", 500000}}));
  });
  EXPECT_TRUE(wait_for([&] { return s.engine().num_unfinished() == 2; }, 10.0));
  EXPECT_TRUE(wait_for([&] { return s.fake().blocks_in_use() > 0; }, 10.0));
  s.server().shutdown(/*timeout_s=*/0.2);
  streamer.join();
  waiter.join();
  s.join(/*stop=*/false);
  const Sse sse = parse_sse(stream_body);
  EXPECT_TRUE(sse.ends_with_done) << stream_body.substr(stream_body.size() > 300
                                                             ? stream_body.size() - 300 : 0);
  EXPECT_EQ(finish_reason_of(sse), "abort");
  ASSERT_TRUE(whole.has_value());
  expect_api_error(*whole, 503, std::nullopt);
  EXPECT_EQ(s.fake().blocks_in_use(), 0);
  EXPECT_EQ(s.fake().num_aborted(), 2);
  // The metrics page is no longer served, but the counters were kept.
}

TEST(Timeouts, IdleAndSlowHeaderConnectionsAreClosed) {
  ServerConfig config;
  config.keep_alive_timeout_s = 1;
  config.read_timeout_s = 1;
  OpsServer s(slow_engine(256, 0), config);
  RawConnection idle(s.port());              // connects and never sends a byte
  RawConnection slow(s.port());
  slow.send_all("GET /health HTTP/1.1\r\n");  // half a request, then nothing
  EXPECT_TRUE(idle.read_until_closed()) << "an idle connection must not hold a thread forever";
  std::string reply;
  EXPECT_TRUE(slow.read_until_closed(&reply));
  // A keep-alive client that goes quiet after one request is closed as well.
  RawConnection ka(s.port());
  ka.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got;
  EXPECT_TRUE(ka.read_until_closed(&got));
  EXPECT_NE(got.find("200"), std::string::npos) << got;
  EXPECT_EQ(s.get("/health")->status, 200);
}

TEST(Timeouts, TricklingHeadersAreCutOffLongRequestsAreNot) {
  ServerConfig config;
  config.read_timeout_s = 5;  // each byte comes well within this
  config.request_read_timeout_s = 2;
  OpsServer s(slow_engine(256, 2), config);
  // A long-running stream (about 3 s) is busy, not idle: it must not be cut.
  std::string stream_body;
  std::thread streamer([&] {
    auto r = s.post("/v1/completions", {{"prompt", "long"}, {"max_tokens", 1500},
                                        {"stream", true}});
    if (r) stream_body = r->body;
  });
  RawConnection slow(s.port());
  std::atomic<bool> closed{false};
  std::thread trickler([&] {
    slow.send_all("GET /health HTTP/1.1\r\nX-Pad: ");
    for (int i = 0; i < 60 && !closed.load(); ++i) {  // one byte every 0.25 s, for <= 15 s
      slow.send_all("a");
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  EXPECT_TRUE(slow.read_until_closed()) << "a trickling client must be disconnected";
  closed = true;
  trickler.join();
  streamer.join();
  EXPECT_TRUE(parse_sse(stream_body).ends_with_done);
  EXPECT_EQ(finish_reason_of(parse_sse(stream_body)), "length");
}

TEST(Concurrency, TwoHundredStreamingClientsWithDefaultThreads) {
  FakeEngineOptions opts = slow_engine(/*max_num_seqs=*/256, /*step_ms=*/2);
  OpsServer s(opts);  // num_http_threads = 0 (automatic)
  constexpr int kClients = 200;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      auto r = s.post("/v1/completions", {{"prompt", "c" + std::to_string(i)},
                                          {"max_tokens", 40},
                                          {"stream", true}});
      if (r && r->status == 200 && parse_sse(r->body).ends_with_done) ++ok;
    });
  // While they all stream, the server still answers.
  auto health = s.get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients);
  EXPECT_EQ(s.metrics().value(success_series("length")), kClients);
}

}  // namespace
}  // namespace llmserve::testing

namespace llmserve::testing {
namespace {

/// The status line's code of a raw HTTP reply ("HTTP/1.1 411 Length Required" -> 411).
int status_of(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0 || reply.size() < 12) return -1;
  return std::stoi(reply.substr(9, 3));
}

TEST(Framing, ChunkedCompressedAndAmbiguousBodiesAreRefusedBeforeTheyAreRead) {
  OpsServer s(slow_engine(256, 0));
  const std::string body = R"({"prompt": "abc"})";
  struct Case {
    std::string request;
    int status;
  };
  // Connection: close so each reply ends with the connection (no keep-alive wait).
  const std::string head = "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                           "Content-Type: application/json\r\n";
  char chunk_len[16];
  std::snprintf(chunk_len, sizeof(chunk_len), "%zx", body.size());
  for (const Case& c : std::vector<Case>{
           // Chunked bodies escape the body limit in cpp-httplib 0.11: 411.
           {head + "Transfer-Encoding: chunked\r\n\r\n" + chunk_len + "\r\n" + body + "\r\n0\r\n\r\n",
            411},
           // A gzip body would be inflated without a limit: 415.
           {head + "Content-Encoding: gzip\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n\r\n" + body,
            415},
           // Ambiguous or malformed lengths (request smuggling vectors): 400.
           {head + "Content-Length: " + std::to_string(body.size()) + "\r\nContent-Length: 3\r\n\r\n" +
                body,
            400},
           {head + "Content-Length: " + std::to_string(body.size()) + "abc\r\n\r\n" + body, 400},
       }) {
    RawConnection conn(s.port());
    conn.send_all(c.request);
    std::string reply;
    conn.read_until_closed(&reply);
    EXPECT_EQ(status_of(reply), c.status) << c.request << "\n---\n" << reply;
    EXPECT_NE(reply.find("\"error\""), std::string::npos) << reply;
  }
  // The same body with one plain Content-Length is fine.
  RawConnection ok(s.port());
  ok.send_all(head + "Content-Length: " + std::to_string(body.size()) +
              "\r\n\r\n" + body);
  std::string reply;
  ok.read_until_closed(&reply);
  EXPECT_EQ(status_of(reply), 200) << reply;
}

TEST(QueueLimit, MoreSamplesThanTheServerCanEverHoldIs400NotARetryableRateLimit) {
  OpsServer s(slow_engine(/*max_num_seqs=*/1, /*step_ms=*/0), {}, /*max_waiting=*/2);
  expect_api_error(s.post("/v1/completions", {{"prompt", "p"}, {"max_tokens", 2}, {"n", 4}}),
                   400, "n", {"--max-num-seqs 1", "--max-waiting 2"});
  EXPECT_EQ(s.fake().num_added(), 0);
  // On an idle server, n = max-num-seqs + max-waiting is accepted.
  auto r = s.post("/v1/completions", {{"prompt", "p"}, {"max_tokens", 2}, {"n", 3}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(Routes, WrongMethodOnTokenizeIs405AndTooManyMessagesIs400) {
  OpsServer s(slow_engine(256, 0));
  for (const char* path : {"/tokenize", "/detokenize"}) {
    auto r = s.get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405) << path;
    EXPECT_EQ(r->get_header_value("Allow"), "POST");
  }
  json messages = json::array();
  for (int i = 0; i < 4097; ++i) messages.push_back({{"role", "user"}, {"content", ""}});
  expect_api_error(s.post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}}),
                   400, "messages", {"4097", "4096"});
  expect_api_error(s.post("/tokenize", {{"messages", messages}}), 400, "messages", {"4096"});
  messages.erase(messages.begin());
  auto r = s.post("/tokenize", {{"messages", messages}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace llmserve::testing
