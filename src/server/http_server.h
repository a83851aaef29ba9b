// HttpServer: the OpenAI-compatible HTTP front end of an AsyncEngine.
//
//   POST /v1/completions        text completion, JSON or SSE stream
//   POST /v1/chat/completions   chat completion (built-in template), JSON or SSE stream
//   GET  /v1/models             the one served model
//   GET  /health                200 "{}" (503 while shutting down)
//   GET  /metrics               Prometheus text (vllm:* names)
//   GET  /ui, /ui/events        the live dashboard and its event stream (server/ui_routes.h)
//
// Errors are OpenAI-style JSON ({"error": {message, type, param, code}}): 400 bad input, 401
// missing/wrong API key, 404 unknown model or path, 405 wrong method on a known path, 413 body
// too large, 429 request queue full (with Retry-After), 503 shutting down.
//
// Every response carries an X-Request-Id header (the client's, if sane, else a generated one)
// and an X-Replica-Id header (ServerConfig::replica_id: which replica behind a load balancer
// answered; /v1/models entries carry it as "replica_id" and /metrics as
// llmserve:replica_info{replica_id=...} 1, docs/deployment.md), and every request gets one structured access-log line at info level (see
// docs/operations.md) unless ServerConfig::log_requests is false.
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
#include <string_view>

#include "server/chat_output.h"

#include "common/status.h"

namespace llmserve {

class AsyncEngine;

struct ServerConfig {
  std::string host = "127.0.0.1";
  /// TCP port; 0 binds any free port (read it back with HttpServer::bound_port()).
  int port = 8000;
  /// Connections served at once (each streaming request holds one thread while it runs).
  /// 0 = automatic: max_num_seqs + max_waiting (256 when unlimited) + 64, at least 64.
  int num_http_threads = 0;
  /// The model name clients must use (and see); empty: the engine's served_model_name().
  std::string served_model_name;
  /// --replica-id: this process's name among the replicas behind a load balancer, sent as the
  /// X-Replica-Id header of every response, the "replica_id" field of /v1/models entries and
  /// the label of llmserve:replica_info in /metrics. Empty: "<hostname>:<bound port>".
  /// At most 128 characters of [A-Za-z0-9._:-] (safe in a header and a label).
  std::string replica_id;
  /// Non-empty: every /v1/* request needs "Authorization: Bearer <api_key>" (else 401).
  std::string api_key;
  /// --chat-template: a file path or the template text; empty = the model's, else built-in
  /// (resolve_chat_template). The caller validates it first: one that fails to resolve here
  /// falls back to the built-in template with an error logged.
  std::string chat_template;
  /// Request bodies larger than this get 413 (a declared Content-Length over it is rejected
  /// without buffering the body). 8 MiB: a 128k-token prompt is well under 1 MiB of text.
  size_t max_request_body_bytes = size_t{8} << 20;
  /// One access-log line per request (vLLM's --disable-log-requests turns it off).
  bool log_requests = true;
  /// --ignore-unknown-fields: request fields in no known schema are ignored (logged once per
  /// name, listed in X-LLMServe-Ignored-Fields) instead of a 400 (request_policy.h).
  bool ignore_unknown_fields = false;
  /// --tool-call-parser, --enable-auto-tool-choice, --reasoning-parser (server/chat_output.h).
  ChatOutputConfig chat_output;
  /// Seconds an idle keep-alive connection is kept open waiting for its next request.
  int keep_alive_timeout_s = 5;
  /// Seconds one socket read (request line, headers, body) or write may block.
  int read_timeout_s = 10;
  int write_timeout_s = 10;
  /// A connection that has not delivered a complete request (headers and body) this many
  /// seconds after it opened or after its previous response is closed: the defence against
  /// clients that trickle their headers a byte at a time (each read is within
  /// read_timeout_s, so httplib alone would wait forever). Checked about once a second.
  /// 0 = off.
  int request_read_timeout_s = 60;
  /// The live dashboard (GET /ui, /ui/events; server/ui_routes.h). --disable-ui turns it off.
  bool enable_ui = true;
  /// --ui-show-prompts: the dashboard shows each request's prompt text (off: never sent).
  bool ui_show_prompts = false;

  /// port in [0, 65535], num_http_threads in [0, 4096], non-empty host, timeouts >= 1
  /// (request_read_timeout_s >= 0), replica_id empty or 1..128 of [A-Za-z0-9._:-].
  Status validate() const;
};

/// Whether `id` can be a replica id: 1..128 characters of [A-Za-z0-9._:-].
bool valid_replica_id(std::string_view id);
/// The default replica id: "<hostname>:<port>" (the hostname's characters outside
/// valid_replica_id's set dropped; "localhost" if none is left).
std::string default_replica_id(int port);

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

  /// Graceful shutdown (SIGTERM): new requests get 503 (and /health 503) while the requests
  /// in flight run to completion for up to timeout_s seconds; what remains then is aborted (a
  /// non-streaming request gets 503, a stream ends with a finish_reason "abort" chunk and
  /// [DONE]). Then the listening socket is closed and listen() returns once every HTTP thread
  /// finished (an idle keep-alive connection may add up to keep_alive_timeout_s). Blocking;
  /// call from a thread other than listen()'s. stop() may still cut it short.
  void shutdown(double timeout_s);

  /// True once shutdown() (draining) or stop() began.
  bool shutting_down() const;

  /// The bound TCP port (the real one when config.port was 0); 0 before bind().
  int bound_port() const;

  /// The model name the server answers to.
  const std::string& served_model_name() const;

  /// The replica id in use (ServerConfig::replica_id, or "<hostname>:<port>" once bound);
  /// empty before bind() when none was configured.
  const std::string& replica_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmserve
