// HttpServer: the OpenAI-compatible HTTP front end of an AsyncEngine.
//
//   POST /v1/completions        text completion, JSON or SSE stream
//   POST /v1/chat/completions   chat completion (built-in template), JSON or SSE stream
//   GET  /v1/models             the one served model
//   GET  /health                200 "{}"
//   GET  /metrics               Prometheus text (vllm:* names)
//
// Errors are OpenAI-style JSON ({"error": {message, type, param, code}}): 400 bad input, 401
// missing/wrong API key, 404 unknown model or path, 405 wrong method on a known path.
//
// Usage (CLI):
//   AsyncEngine engine(std::move(llm_engine));
//   HttpServer server(engine, config);
//   Status st = server.listen();   // blocks; another thread (or a signal handler's helper
//                                  // thread) calls server.stop()
// The AsyncEngine must outlive the HttpServer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"

namespace llmserve {

class AsyncEngine;

struct ServerConfig {
  std::string host = "127.0.0.1";
  /// TCP port; 0 binds any free port (read it back with HttpServer::bound_port()).
  int port = 8000;
  /// Connections served at once (each streaming request holds one thread while it runs).
  int num_http_threads = 64;
  /// The model name clients must use (and see); empty: the engine's served_model_name().
  std::string served_model_name;
  /// Non-empty: every /v1/* request needs "Authorization: Bearer <api_key>" (else 401).
  std::string api_key;
  /// --chat-template: a file path or the template text; empty = the model's, else built-in
  /// (resolve_chat_template). The caller validates it first: one that fails to resolve here
  /// falls back to the built-in template with an error logged.
  std::string chat_template;
  /// Request bodies larger than this get 413.
  size_t max_request_body_bytes = size_t{32} << 20;

  /// port in [0, 65535], num_http_threads >= 1, non-empty host.
  Status validate() const;
};

class HttpServer {
 public:
  HttpServer(AsyncEngine& engine, ServerConfig config);
  ~HttpServer();  // stops the server if it is still listening
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds the listening socket without serving yet, so that bound_port() is known before
  /// listen(). Errors: invalid config (InvalidArgument), address in use or unavailable
  /// (Internal, naming host:port). listen() calls it when needed.
  Status bind();

  /// Serves until stop(); blocking. Returns an error if binding fails or the server cannot run.
  Status listen();

  /// Asks listen() to return: stops accepting, aborts requests still waiting on the engine,
  /// and waits for the HTTP threads. Thread-safe, idempotent; callable before listen().
  void stop();

  /// The bound TCP port (the real one when config.port was 0); 0 before bind().
  int bound_port() const;

  /// The model name the server answers to.
  const std::string& served_model_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmserve
