#include "server_test_util.h"

#include <signal.h>

#include <chrono>

#include <gtest/gtest.h>

#include "../engine/reference_cases.h"
#include "engine/llm_engine.h"
#include "server/sse.h"

namespace llmserve::testing {

namespace {
// Client sockets in this process write to servers that may have hung up.
const bool kSigpipeIgnored = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();
}  // namespace

TestServer::TestServer(FakeEngineOptions engine_options, ServerConfig config) {
  auto fake = std::make_unique<FakeEngine>(std::move(engine_options));
  fake_ = fake.get();
  start(std::move(fake), std::move(config));
}

TestServer::TestServer(std::unique_ptr<LLMEngine> engine, ServerConfig config) {
  start(std::move(engine), std::move(config));
}

void TestServer::start(std::unique_ptr<LLMEngine> engine, ServerConfig config) {
  (void)kSigpipeIgnored;
  engine_ = std::make_unique<AsyncEngine>(std::move(engine));
  config.port = 0;
  config.host = "127.0.0.1";
  server_ = std::make_unique<HttpServer>(*engine_, std::move(config));
  Status st = server_->bind();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_GT(server_->bound_port(), 0);
  listen_thread_ = std::thread([this] { listen_status_ = server_->listen(); });
}

void TestServer::stop() {
  if (!listen_thread_.joinable()) return;
  server_->stop();
  listen_thread_.join();
  EXPECT_TRUE(listen_status_.ok()) << listen_status_.message();
}

TestServer::~TestServer() {
  stop();
  server_.reset();
  engine_.reset();
}

std::unique_ptr<httplib::Client> TestServer::client() const {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port());
  c->set_read_timeout(30, 0);
  return c;
}

httplib::Result TestServer::post_raw(const std::string& path, const std::string& body) const {
  return client()->Post(path.c_str(), body, "application/json");
}

httplib::Result TestServer::post(const std::string& path, const json& body) const {
  return post_raw(path, body.dump());
}

httplib::Result TestServer::get(const std::string& path) const {
  return client()->Get(path.c_str());
}

StreamReply post_stream(const TestServer& server, const std::string& path, const json& body) {
  StreamReply reply;
  httplib::Result r = server.post(path, body);
  if (!r) {
    ADD_FAILURE() << "POST " << path << " failed: " << httplib::to_string(r.error());
    return reply;
  }
  reply.status = r->status;
  reply.content_type = r->get_header_value("Content-Type");
  SseParser parser;
  for (const std::string& data : parser.feed(r->body)) {
    if (data == "[DONE]") {
      ++reply.num_done;
      reply.done_is_last = true;
      continue;
    }
    reply.done_is_last = false;
    reply.chunks.push_back(json::parse(data));
  }
  return reply;
}

std::vector<int32_t> fake_encode(const std::string& text, bool add_bos) {
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(1);
  for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
  return ids;
}

std::string expected_fake_text(const std::vector<int32_t>& prompt_ids, int n) {
  int64_t sum = 0;
  for (int32_t id : prompt_ids) sum += id;
  std::string s;
  for (int k = 0; k < n; ++k) s += static_cast<char>('a' + (sum + k) % 26);
  return s;
}

void expect_api_error(const httplib::Result& r, int status, std::optional<std::string> param,
                      const std::vector<std::string>& message_has) {
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
  json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(body.is_object()) << r->body;
  ASSERT_TRUE(body.contains("error")) << r->body;
  const json& err = body["error"];
  ASSERT_TRUE(err["message"].is_string()) << r->body;
  const std::string message = err["message"].get<std::string>();
  EXPECT_FALSE(message.empty());
  for (const std::string& s : message_has)
    EXPECT_NE(message.find(s), std::string::npos) << "message lacks '" << s << "': " << message;
  ASSERT_TRUE(err["type"].is_string()) << r->body;
  EXPECT_FALSE(err["type"].get<std::string>().empty());
  ASSERT_TRUE(err.contains("param")) << r->body;
  if (!param) {
    EXPECT_TRUE(err["param"].is_null()) << r->body;
  } else if (*param != "*") {
    EXPECT_EQ(err["param"], *param) << r->body;
  }
  EXPECT_EQ(err["code"], status) << r->body;
}

bool wait_for(const std::function<bool()>& pred, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::unique_ptr<LLMEngine> stories_http_engine(int32_t max_model_len) {
  EngineConfig c;
  c.model_path = stories_gguf();
  c.scheduler.max_model_len = max_model_len;
  c.scheduler.check_invariants = true;
  c.num_threads = 2;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

ServerConfig any_port() {
  ServerConfig c;
  c.port = 0;
  return c;
}

}  // namespace llmserve::testing
