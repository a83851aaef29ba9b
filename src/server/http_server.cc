#include "server/http_server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "engine/async_engine.h"
#include "server/api_error.h"
#include "server/connection_probe.h"
#include "server/metrics.h"
#include "server/builtin_chat_template.h"
#include "server/openai_serving.h"

namespace llmserve {

Status ServerConfig::validate() const {
  if (host.empty()) return InvalidArgument("host must not be empty");
  if (port < 0 || port > 65535)
    return InvalidArgument("--port must be in [0, 65535], got {}", port);
  if (num_http_threads < 1 || num_http_threads > 4096)
    return InvalidArgument("--http-threads must be in [1, 4096], got {}", num_http_threads);
  if (max_request_body_bytes == 0) return InvalidArgument("max_request_body_bytes must be > 0");
  return Status::Ok();
}

namespace {

using httplib::Request;
using httplib::Response;

ChatTemplate resolve_or_builtin(const std::string& override_source, const LLMEngine& engine) {
  std::string origin;
  Expected<ChatTemplate> tpl = resolve_chat_template(override_source, engine, &origin);
  if (tpl.ok()) {
    spdlog::info("chat template: {}", origin);
    return std::move(*tpl);
  }
  spdlog::error("{}; using the built-in chat template", tpl.status().message());
  return *ChatTemplate::parse(kBuiltinChatTemplate);
}
using HandlerResponse = httplib::Server::HandlerResponse;

/// Known paths and their one allowed method (for 405 answers).
struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"},
    {"/health", "GET"},          {"/metrics", "GET"},
};

const char* allowed_method(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return r.method;
  return nullptr;
}

/// The error body for a status httplib produced itself (no handler wrote a body).
ApiError transport_error(const Request& req, const Response& res) {
  if (res.status == 404) {
    if (const char* method = allowed_method(req.path))
      return ApiError{405, "MethodNotAllowed",
                      fmt::format("method {} is not allowed on {}; use {}", req.method, req.path,
                                  method),
                      std::nullopt};
    return not_found(fmt::format("no such endpoint: {} {}", req.method, req.path));
  }
  if (res.status == 413)
    return ApiError{413, "RequestEntityTooLarge", "request body is too large", std::nullopt};
  if (res.status == 400) return bad_request("malformed HTTP request");
  return ApiError{res.status, "Error", fmt::format("HTTP error {}", res.status), std::nullopt};
}

/// httplib's thread pool, with SIGPIPE blocked in its workers: this libcpp-httplib build sends
/// without MSG_NOSIGNAL, and a write to a client that hung up must fail with EPIPE rather than
/// kill the process. (Threads inherit the creating thread's signal mask.)
httplib::TaskQueue* make_http_thread_pool(size_t num_threads) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  auto* pool = new httplib::ThreadPool(num_threads);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pool;
}

/// httplib::Server whose listen backlog can be raised: this build hard-codes 5
/// (CPPHTTPLIB_LISTEN_BACKLOG), and a burst of clients connecting at once then overflows the
/// accept queue (seen as failed reads on the client side). listen(2) on an already listening
/// socket just updates its backlog.
class HttplibServer : public httplib::Server {
 public:
  void raise_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

constexpr int kListenBacklog = 1024;

}  // namespace

struct HttpServer::Impl {
  Impl(AsyncEngine& engine_in, ServerConfig config_in);
  void setup();
  /// Polled by waiting handlers: server stopping, or this request's client hung up.
  CancelCheck cancel_check(const Request& req);

  AsyncEngine& engine;
  ServerConfig config;
  ServerMetrics metrics;
  OpenAIServing serving;
  HttplibServer svr;

  std::mutex bind_mu;
  std::atomic<int> bound_port{0};
  std::atomic<bool> stopping{false};   // stop() was called
  std::atomic<bool> listening{false};  // inside listen()
};

HttpServer::Impl::Impl(AsyncEngine& engine_in, ServerConfig config_in)
    : engine(engine_in),
      config(std::move(config_in)),
      metrics(engine_in.engine().max_model_len()),
      serving(engine_in, metrics,
              config.served_model_name.empty() ? engine_in.engine().served_model_name()
                                               : config.served_model_name,
              resolve_or_builtin(config.chat_template, engine_in.engine())) {
  setup();
}

CancelCheck HttpServer::Impl::cancel_check(const Request& req) {
  auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port,
                                                 req.remote_addr, req.remote_port);
  return [this, probe] { return stopping.load() || probe->peer_closed(); };
}

void HttpServer::Impl::setup() {
  const size_t num_threads = static_cast<size_t>(std::max(config.num_http_threads, 1));
  svr.new_task_queue = [num_threads] { return make_http_thread_pool(num_threads); };
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind a port that is already serving instead of failing.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr.set_payload_max_length(config.max_request_body_bytes);

  svr.Post("/v1/completions", [this](const Request& req, Response& res) {
    serving.completions(req, &res, cancel_check(req));
  });
  svr.Post("/v1/chat/completions", [this](const Request& req, Response& res) {
    serving.chat_completions(req, &res, cancel_check(req));
  });
  svr.Post("/tokenize", [this](const Request& req, Response& res) {
    serving.tokenize(req, &res);
  });
  svr.Post("/detokenize", [this](const Request& req, Response& res) {
    serving.detokenize(req, &res);
  });
  svr.Get("/v1/models", [this](const Request&, Response& res) {
    res.set_content(serving.models().dump(), "application/json");
  });
  svr.Get("/health", [](const Request&, Response& res) {
    res.set_content("{}", "application/json");
  });
  svr.Get("/metrics", [this](const Request&, Response& res) {
    res.set_content(serving.metrics_page(), "text/plain; version=0.0.4; charset=utf-8");
  });

  svr.set_pre_routing_handler([this](const Request& req, Response& res) {
    if (config.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + config.api_key)
      return HandlerResponse::Unhandled;
    set_error_response(ApiError{401, "AuthenticationError",
                                "missing or invalid API key; send 'Authorization: Bearer <key>'",
                                std::nullopt},
                       &res);
    return HandlerResponse::Handled;
  });
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const Request& req,
                                                                Response& res) {
    if (!res.body.empty()) return HandlerResponse::Unhandled;  // a handler's own JSON error
    const ApiError err = transport_error(req, res);
    if (err.http_status == 405) res.set_header("Allow", allowed_method(req.path));
    set_error_response(err, &res);
    return HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{} {}: handler threw: {}", req.method, req.path, what);
    set_error_response(internal_error("internal server error: " + what), &res);
  });
  svr.set_logger([](const Request& req, const Response& res) {
    spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
  });
}

HttpServer::HttpServer(AsyncEngine& engine, ServerConfig config)
    : impl_(std::make_unique<Impl>(engine, std::move(config))) {}

HttpServer::~HttpServer() {
  stop();
  while (impl_->listening.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

Status HttpServer::bind() {
  std::lock_guard<std::mutex> lock(impl_->bind_mu);
  if (impl_->bound_port.load() > 0) return Status::Ok();
  LLMS_RETURN_IF_ERROR(impl_->config.validate());
  const ServerConfig& c = impl_->config;
  int port = -1;
  if (c.port == 0)
    port = impl_->svr.bind_to_any_port(c.host);
  else if (impl_->svr.bind_to_port(c.host, c.port))
    port = c.port;
  if (port <= 0)
    return Status(StatusCode::kInternal,
                  fmt::format("cannot listen on {}:{} (address in use or not available)", c.host,
                              c.port));
  impl_->svr.raise_backlog(kListenBacklog);
  impl_->bound_port = port;
  return Status::Ok();
}

Status HttpServer::listen() {
  LLMS_RETURN_IF_ERROR(bind());
  impl_->listening = true;
  if (impl_->stopping.load()) {  // stop() came first
    impl_->listening = false;
    return Status::Ok();
  }
  spdlog::info("llmserve: serving model '{}' on http://{}:{}", impl_->serving.served_model_name(),
               impl_->config.host, impl_->bound_port.load());
  const bool ok = impl_->svr.listen_after_bind();
  impl_->listening = false;
  if (!ok && !impl_->stopping.load())
    return Status(StatusCode::kInternal, "HTTP server stopped unexpectedly");
  return Status::Ok();
}

void HttpServer::stop() {
  if (impl_->stopping.exchange(true)) return;
  // httplib's stop() acts only once its accept loop runs; if listen() is on its way in, wait.
  while (impl_->listening.load() && !impl_->svr.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->svr.stop();
}

int HttpServer::bound_port() const { return impl_->bound_port.load(); }

const std::string& HttpServer::served_model_name() const {
  return impl_->serving.served_model_name();
}

}  // namespace llmserve
