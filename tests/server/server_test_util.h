// Test harness: a FakeEngine behind AsyncEngine behind HttpServer on a free loopback port,
// plus small HTTP/SSE helpers and an independent re-statement of the fake's output rule.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/async_engine.h"
#include "fake_engine.h"
#include "server/http_server.h"

namespace llmserve::testing {

using nlohmann::json;

/// Runs the whole stack; the destructor stops the server and the engine.
class TestServer {
 public:
  explicit TestServer(FakeEngineOptions engine_options = {}, ServerConfig config = {});
  /// Serves any engine (e.g. the real LLMEngine); fake() is then unavailable.
  TestServer(std::unique_ptr<LLMEngine> engine, ServerConfig config);
  ~TestServer();

  FakeEngine& fake() {
    EXPECT_NE(fake_, nullptr) << "this TestServer does not run the fake engine";
    return *fake_;
  }
  HttpServer& server() { return *server_; }
  int port() const { return server_->bound_port(); }
  std::unique_ptr<httplib::Client> client() const;

  /// POST `body` (raw text) with Content-Type application/json.
  httplib::Result post_raw(const std::string& path, const std::string& body) const;
  httplib::Result post(const std::string& path, const json& body) const;
  httplib::Result get(const std::string& path) const;

  /// Stops the server (as the destructor would) and waits for listen() to return.
  void stop();

 private:
  void start(std::unique_ptr<LLMEngine> engine, ServerConfig config);

  FakeEngine* fake_ = nullptr;  // owned by engine_, null when serving another engine
  std::unique_ptr<AsyncEngine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread listen_thread_;
  Status listen_status_;
};

/// A parsed SSE response.
struct StreamReply {
  int status = 0;
  std::string content_type;
  std::vector<json> chunks;  // the JSON events before [DONE]
  int num_done = 0;          // how many "[DONE]" events
  bool done_is_last = false;
};
StreamReply post_stream(const TestServer& server, const std::string& path, const json& body);

/// The fake's tokenization, restated: optional BOS (1), then byte + 3 per byte.
std::vector<int32_t> fake_encode(const std::string& text, bool add_bos);
/// The fake's output for `prompt_ids`, restated: n letters 'a' + (sum + k) % 26.
std::string expected_fake_text(const std::vector<int32_t>& prompt_ids, int n);

/// Asserts an OpenAI error response: status, {"error": {message (containing every string in
/// `message_has`), type (non-empty string), param, code == status}}. `param`: nullopt = must
/// be null; "*" = anything.
void expect_api_error(const httplib::Result& r, int status, std::optional<std::string> param,
                      const std::vector<std::string>& message_has = {});

/// Polls `pred` every 10 ms for up to `timeout_s`; true once it holds.
bool wait_for(const std::function<bool()>& pred, double timeout_s = 2.0);

/// The real engine on stories260K (GGUF) for HTTP tests: max_model_len `max_model_len`,
/// scheduler invariants checked, 2 threads.
std::unique_ptr<LLMEngine> stories_http_engine(int32_t max_model_len = 512);
/// A ServerConfig that binds any free port.
ServerConfig any_port();

}  // namespace llmserve::testing
