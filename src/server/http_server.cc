#include "server/http_server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <unordered_map>
#include <exception>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "common/timing.h"
#include "common/version.h"
#include "dashboard/event_hub.h"
#include "engine/async_engine.h"
#include "server/api_error.h"
#include "server/engine_bridge.h"
#include "server/connection_probe.h"
#include "server/log_escape.h"
#include "server/metrics.h"
#include "server/builtin_chat_template.h"
#include "server/openai_serving.h"
#include "server/ui_routes.h"

namespace llmserve {

Status ServerConfig::validate() const {
  if (host.empty()) return InvalidArgument("host must not be empty");
  if (port < 0 || port > 65535)
    return InvalidArgument("--port must be in [0, 65535], got {}", port);
  if (num_http_threads < 0 || num_http_threads > 4096)
    return InvalidArgument("--http-threads must be in [0, 4096] (0 = automatic), got {}",
                           num_http_threads);
  if (max_request_body_bytes == 0)
    return InvalidArgument("--max-request-body-bytes must be > 0");
  if (keep_alive_timeout_s < 1 || read_timeout_s < 1 || write_timeout_s < 1 ||
      request_read_timeout_s < 0)
    return InvalidArgument("HTTP timeouts must be >= 1 s");
  if (!replica_id.empty() && !valid_replica_id(replica_id))
    return InvalidArgument("--replica-id must be 1..128 characters of [A-Za-z0-9._:-], got '{}'",
                           escape_for_log(replica_id.substr(0, 200)));
  return Status::Ok();
}

bool valid_replica_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string default_replica_id(int port) {
  char host[256] = {};
  std::string name = ::gethostname(host, sizeof(host) - 1) == 0 ? host : "";
  // Keep only characters valid in an id (a hostname is normally all of them).
  std::string clean;
  for (char c : name)
    if (valid_replica_id(std::string_view(&c, 1))) clean += c;
  if (clean.empty()) clean = "localhost";
  if (clean.size() > 120) clean.resize(120);
  return clean + ":" + std::to_string(port);
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
    {"/health", "GET"},          {"/metrics", "GET"},           {"/tokenize", "POST"},
    {"/detokenize", "POST"},     {"/version", "GET"},
};

const char* allowed_method(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return r.method;
  if (path.rfind("/v1/models/", 0) == 0 && path.size() > 11) return "GET";  // retrieve a model
  if (is_ui_path(path)) return "GET";  // the dashboard (when --disable-ui, a GET is a 404)
  return nullptr;
}

/// The error body for a status httplib produced itself (no handler wrote a body).
ApiError transport_error(const Request& req, const Response& res) {
  if (res.status == 404) {
    if (const char* method = allowed_method(req.path); method && req.method != method)
      return ApiError{405, "MethodNotAllowed",
                      fmt::format("method {} is not allowed on {}; use {}", req.method, req.path,
                                  method),
                      std::nullopt};
    return not_found(fmt::format("no such endpoint: {} {}", req.method, req.path));
  }
  if (res.status == 413) {
    // cpp-httplib (compiled into Debian's library) caps form-encoded bodies at 8 KiB whatever
    // --max-request-body-bytes says: curl -d without a JSON Content-Type lands here.
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0)
      return payload_too_large("request body is too large for Content-Type "
                               "application/x-www-form-urlencoded (8 KiB in the HTTP library); "
                               "send it with 'Content-Type: application/json'");
    return payload_too_large("request body is too large");
  }
  if (res.status == 400) {
    if (req.method == "POST" && !req.has_header("Content-Length"))
      return bad_request("malformed HTTP request: a POST needs a JSON body with a Content-Length "
                         "header");
    return bad_request("malformed HTTP request");
  }
  if (res.status == 414)
    return ApiError{414, "RequestURITooLong", "request URI is too long", std::nullopt};
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

/// Seconds a 429 asks the client to wait (Retry-After).
constexpr int kRetryAfterSeconds = 1;

/// A client-sent X-Request-Id is kept when it is 1..128 characters of [A-Za-z0-9._:-].
/// Request framing the server accepts, checked before the body is read (the pre-routing
/// handler runs first): a body comes with exactly one plain decimal Content-Length, never with
/// Transfer-Encoding (cpp-httplib 0.11 reads chunked bodies without the
/// --max-request-body-bytes limit) or a Content-Encoding other than identity (it would inflate
/// a gzip body without one). Ambiguous lengths are refused as request smuggling vectors
/// (RFC 9112 section 6.3).
std::optional<ApiError> check_framing(const Request& req) {
  if (req.has_header("Transfer-Encoding"))
    return ApiError{411, "LengthRequiredError",
                    "request bodies need a Content-Length header (Transfer-Encoding, e.g. "
                    "chunked, is not accepted)",
                    std::nullopt};
  if (req.has_header("Content-Encoding")) {
    const std::string enc = req.get_header_value("Content-Encoding");
    if (enc != "identity")
      return ApiError{415, "UnsupportedMediaTypeError",
                      fmt::format("Content-Encoding '{}' is not accepted; send the body "
                                  "uncompressed",
                                  escape_for_log(enc)),
                      std::nullopt};
  }
  const size_t n = req.get_header_value_count("Content-Length");
  for (size_t i = 0; i < n; ++i) {
    const std::string v = req.get_header_value("Content-Length", i);
    const bool digits = !v.empty() && v.size() <= 19 &&
                        std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || (i > 0 && v != req.get_header_value("Content-Length", 0)))
      return bad_request("malformed Content-Length header");
  }
  return std::nullopt;
}

// A client's X-Request-Id is kept when it is what a replica id may be: 1..128 characters of
// [A-Za-z0-9._:-] (safe in a header, a log line and a label).
bool sane_request_id(std::string_view id) { return valid_replica_id(id); }

/// 32 random hex digits (a uuid4-like token).
std::string generate_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (uint64_t(std::hash<std::thread::id>{}(
                                        std::this_thread::get_id())) << 1)};
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

/// The request's id: already on the response, else the client's (if sane), else a new one;
/// set as the X-Request-Id response header.
std::string ensure_request_id(const Request& req, Response& res) {
  if (res.has_header("X-Request-Id")) return res.get_header_value("X-Request-Id");
  std::string id = req.get_header_value("X-Request-Id");
  if (!sane_request_id(id)) id = generate_request_id();
  res.set_header("X-Request-Id", id);
  return id;
}

/// Compares without an early exit, so the time taken does not reveal how much of a guessed
/// key was right (only its length).
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

/// What the thread serving an HTTP request knows about it (handler, content provider and
/// logger all run on that thread).
struct ThreadRequestState {
  bool active = false;  // between the pre-routing handler and the logger
  double start_time = 0;
  RequestRecord record;
};

ThreadRequestState& thread_request_state() {
  thread_local ThreadRequestState state;
  return state;
}

}  // namespace

struct HttpServer::Impl {
  Impl(AsyncEngine& engine_in, ServerConfig config_in);
  ~Impl() {
    if (hub) engine.set_observer(nullptr);
  }
  void setup();
  /// ServerConfig::num_http_threads, or the automatic count when 0.
  size_t http_threads() const {
    if (config.num_http_threads > 0) return static_cast<size_t>(config.num_http_threads);
    const int64_t waiting = engine.max_waiting() > 0 ? engine.max_waiting() : 256;
    return static_cast<size_t>(std::clamp<int64_t>(
        int64_t{engine.engine().config().scheduler.max_num_seqs} + waiting + 64, 64, 4096));
  }
  /// Polled by waiting handlers: server stopping, this request's client hung up, or (for a
  /// non-streaming request, i.e. one still inside its handler: `handler_done` unset) the
  /// shutdown deadline passed. Streams are ended by AsyncEngine::abort_all instead, so that
  /// they close with a final chunk and [DONE].
  CancelCheck cancel_check(const Request& req,
                           std::shared_ptr<std::atomic<bool>> handler_done);
  /// Runs a generation handler with its cancel check.
  template <typename F>
  void generation(const Request& req, Response& res, F&& serve);
  /// The access-log line and failure counter of a finished request.
  void log_request(const Request& req, const Response& res);

  AsyncEngine& engine;
  ServerConfig config;
  ServerMetrics metrics;
  OpenAIServing serving;
  HttplibServer svr;
  /// The dashboard's event source (ServerConfig::enable_ui), the engine's observer.
  std::unique_ptr<dashboard::EventHub> hub;

  std::mutex bind_mu;
  std::atomic<int> bound_port{0};
  /// ServerConfig::replica_id, or the default once bound; fixed before listen().
  std::string replica_id;
  /// Sets X-Replica-Id on `res`.
  void set_replica_header(Response& res) const {
    if (!replica_id.empty()) res.set_header("X-Replica-Id", replica_id);
  }
  std::atomic<bool> stopping{false};   // stop() was called
  std::atomic<bool> listening{false};  // inside listen()
  std::atomic<bool> draining{false};   // shutdown() began: new requests get 503
  std::atomic<bool> deadline_passed{false};  // shutdown() is aborting what is left
  std::atomic<bool> listener_closed{false};  // httplib's stop() was called
  std::atomic<int> active_handlers{0};  // generation handlers running (parse .. submit ..)

  /// Stops httplib's accept loop (once); listen() returns when its threads are done.
  void close_listener();

  // Slow-request watchdog (ServerConfig::request_read_timeout_s).
  struct ConnState {
    bool busy = false;  // a request of this connection is being handled (routing .. logger)
    double since = 0;   // when it opened, or when its last response ended
  };
  /// Marks the connection of `req` busy (a request was read) or idle (its response ended).
  void mark_connection(const Request& req, bool busy);
  /// Every second: closes connections idle (not busy) for longer than the timeout.
  void watchdog_loop();
  std::mutex conn_mu;
  std::unordered_map<std::string, ConnState> conns;  // by peer "host:port"
  std::condition_variable watchdog_cv;
  bool watchdog_stop = false;  // guarded by conn_mu
};

void HttpServer::Impl::mark_connection(const Request& req, bool busy) {
  if (config.request_read_timeout_s <= 0) return;
  std::lock_guard<std::mutex> lock(conn_mu);
  conns[req.remote_addr + ":" + std::to_string(req.remote_port)] = {busy, now_seconds()};
}

void HttpServer::Impl::watchdog_loop() {
  std::unique_lock<std::mutex> lock(conn_mu);
  while (!watchdog_stop) {
    watchdog_cv.wait_for(lock, std::chrono::seconds(1));
    if (watchdog_stop) break;
    lock.unlock();
    const std::vector<AcceptedSocket> sockets = list_accepted_sockets(bound_port.load());
    lock.lock();
    const double now = now_seconds();
    std::unordered_map<std::string, ConnState> seen;
    for (const AcceptedSocket& s : sockets) {
      auto it = conns.find(s.peer);
      const ConnState st = it != conns.end() ? it->second : ConnState{false, now};
      if (!st.busy && now - st.since > config.request_read_timeout_s) {
        if (peer_still_is(s.fd, s.peer)) {
          spdlog::warn("closing connection from {}: no complete request within {} s", s.peer,
                       config.request_read_timeout_s);
          ::shutdown(s.fd, SHUT_RDWR);  // its HTTP thread's read fails and closes it
        }
        continue;
      }
      seen[s.peer] = st;
    }
    // Keep connections marked busy since the listing (accepted after it).
    for (const auto& [peer, st] : conns)
      if (st.busy && !seen.count(peer)) seen[peer] = st;
    conns.swap(seen);
  }
}

void HttpServer::Impl::close_listener() {
  // httplib's stop() acts only once its accept loop runs; if listen() is on its way in, wait.
  while (listening.load() && !svr.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!listener_closed.exchange(true)) svr.stop();
}

HttpServer::Impl::Impl(AsyncEngine& engine_in, ServerConfig config_in)
    : engine(engine_in),
      config(std::move(config_in)),
      metrics(engine_in.engine().max_model_len()),
      serving(engine_in, metrics,
              config.served_model_name.empty() ? engine_in.engine().served_model_name()
                                               : config.served_model_name,
              resolve_or_builtin(config.chat_template, engine_in.engine()),
              config.ignore_unknown_fields, config.chat_output) {
  if (config.enable_ui) {
    const LLMEngine& e = engine.engine();
    dashboard::HubConfig hub_config;
    hub_config.show_prompts = config.ui_show_prompts;
    // Each open dashboard holds an HTTP thread: at most a quarter of them (so a few browser
    // tabs can never take every thread from the API; 0 with fewer than 4 threads).
    hub_config.max_subscribers = std::min<size_t>(hub_config.max_subscribers, http_threads() / 4);
    dashboard::HelloInfo hello;
    hello.model = config.served_model_name.empty() ? e.served_model_name() : config.served_model_name;
    hello.num_total_blocks = engine.stats().num_total_blocks;
    hello.block_size = e.config().cache.block_size;
    hello.max_num_batched_tokens = e.config().scheduler.max_num_batched_tokens;
    hello.max_num_seqs = e.config().scheduler.max_num_seqs;
    hub = std::make_unique<dashboard::EventHub>(hub_config, std::move(hello), &e.tokenizer());
    engine.set_observer(hub.get());
  }
  setup();
}

CancelCheck HttpServer::Impl::cancel_check(const Request& req,
                                           std::shared_ptr<std::atomic<bool>> handler_done) {
  auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port,
                                                 req.remote_addr, req.remote_port);
  return [this, probe, handler_done] {
    RequestRecord* rec = current_request_record();
    if (stopping.load() || (deadline_passed.load() && !handler_done->load())) {
      if (rec) rec->abort_cause = RequestRecord::AbortCause::kShutdown;
      return true;
    }
    if (probe->peer_closed()) {
      if (rec) rec->abort_cause = RequestRecord::AbortCause::kClientGone;
      return true;
    }
    return false;
  };
}

template <typename F>
void HttpServer::Impl::generation(const Request& req, Response& res, F&& serve) {
  auto handler_done = std::make_shared<std::atomic<bool>>(false);
  struct Active {  // counted so that a drain also waits for requests not yet submitted
    std::atomic<int>& n;
    explicit Active(std::atomic<int>& count) : n(count) { ++n; }
    ~Active() { --n; }
  } active(active_handlers);
  serve(cancel_check(req, handler_done));
  handler_done->store(true);  // what polls from now on is a streaming content provider
  if (res.status == 429) res.set_header("Retry-After", std::to_string(kRetryAfterSeconds));
}

void HttpServer::Impl::log_request(const Request& req, const Response& res) {
  ThreadRequestState& st = thread_request_state();
  const bool active = st.active;
  const RequestRecord rec = active ? st.record : RequestRecord{};
  const double duration = active ? now_seconds() - st.start_time : 0.0;
  st.active = false;
  current_request_record() = nullptr;

  using Cause = RequestRecord::AbortCause;
  std::optional<FailureReason> failure;
  const int status = res.status;
  const bool engine_abort = rec.finish_reason == FinishReason::kAbort;
  if (rec.abort_cause == Cause::kClientGone && (status == 200 || status == 503))
    failure = FailureReason::kClientDisconnect;
  else if (rec.abort_cause == Cause::kShutdown || (engine_abort && deadline_passed.load()))
    failure = FailureReason::kShutdown;
  else if (status == 401)
    failure = FailureReason::kUnauthorized;
  else if (status == 413)
    failure = FailureReason::kTooLarge;
  else if (status == 429)  // a dashboard refused is no sign of an engine queue
    failure = is_ui_path(req.path) ? FailureReason::kUiLimit : FailureReason::kQueueFull;
  else if (status == 503)
    failure = FailureReason::kDraining;
  else if (status >= 400 && status < 500)
    failure = FailureReason::kBadRequest;
  else if (status >= 500)
    failure = FailureReason::kInternal;
  if (failure) metrics.record_failure(*failure);

  if (!config.log_requests) return;
  const char* finish = finish_reason_name(rec.finish_reason);
  // user / safety_identifier: OpenAI's end-user ids for abuse monitoring, kept in the log
  // (quoted so that spaces cannot split the key=value pairs).
  const auto quoted = [](const std::string& v) {
    if (v.empty()) return std::string("-");
    std::string out = "\"";
    for (char c : escape_for_log(v.substr(0, 256))) {
      if (c == '"') out += "\\x22";
      else out += c;
    }
    return out + "\"";
  };
  spdlog::info(
      "request_id={} method={} path={} status={} remote={}:{} prompt_tokens={} "
      "generated_tokens={} finish_reason={} failure={} duration_s={:.6f} user={} "
      "safety_identifier={}",
      res.get_header_value("X-Request-Id"), escape_for_log(req.method), escape_for_log(req.path),
      status, req.remote_addr,
      req.remote_port, rec.prompt_tokens, rec.generated_tokens, *finish ? finish : "-",
      failure ? failure_reason_name(*failure) : "-", duration, quoted(rec.user),
      quoted(rec.safety_identifier));
}

void HttpServer::Impl::setup() {
  const size_t num_threads = http_threads();
  spdlog::debug("HTTP worker threads: {}", num_threads);
  svr.new_task_queue = [num_threads] { return make_http_thread_pool(num_threads); };
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind a port that is already serving instead of failing.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr.set_payload_max_length(config.max_request_body_bytes);
  svr.set_keep_alive_timeout(config.keep_alive_timeout_s);
  svr.set_keep_alive_max_count(1000);
  svr.set_read_timeout(config.read_timeout_s, 0);
  svr.set_write_timeout(config.write_timeout_s, 0);

  svr.Post("/v1/completions", [this](const Request& req, Response& res) {
    generation(req, res, [&](CancelCheck check) { serving.completions(req, &res, check); });
  });
  svr.Post("/v1/chat/completions", [this](const Request& req, Response& res) {
    generation(req, res,
               [&](CancelCheck check) { serving.chat_completions(req, &res, check); });
  });
  svr.Post("/tokenize", [this](const Request& req, Response& res) {
    serving.tokenize(req, &res);
  });
  svr.Post("/detokenize", [this](const Request& req, Response& res) {
    serving.detokenize(req, &res);
  });
  // Each model card also says which replica answered ("replica_id", an llmserve extension
  // beside OpenAI's fields).
  svr.Get("/v1/models", [this](const Request&, Response& res) {
    nlohmann::json list = serving.models();
    for (nlohmann::json& card : list["data"]) card["replica_id"] = replica_id;
    res.set_content(list.dump(), "application/json");
  });
  // OpenAI's retrieve-model; the id may contain '/' (served names such as "org/model").
  svr.Get(R"(/v1/models/(.+))", [this](const Request& req, Response& res) {
    serving.model(req.matches[1].str(), &res);
    if (res.status != 200 && res.status != -1) return;
    nlohmann::json card = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (!card.is_object() || card.contains("error")) return;
    card["replica_id"] = replica_id;
    res.set_content(card.dump(), "application/json");
  });
  svr.Get("/version", [](const Request&, Response& res) {
    res.set_content(nlohmann::json{{"version", kLlmserveVersion}}.dump(), "application/json");
  });
  if (hub)
    register_ui_routes(svr, *hub, [this] { return stopping.load() || draining.load(); });
  svr.Get("/health", [this](const Request&, Response& res) {
    if (draining.load() || stopping.load())
      return set_error_response(service_unavailable("the server is shutting down"), &res);
    res.set_content("{}", "application/json");
  });
  svr.Get("/metrics", [this](const Request&, Response& res) {
    std::string page = serving.metrics_page();
    render_replica_info(replica_id, serving.served_model_name(), &page);
    if (hub) {
      page += fmt::format(
          "# HELP llmserve:ui_subscribers Dashboards (GET /ui/events) open now.\n"
          "# TYPE llmserve:ui_subscribers gauge\nllmserve:ui_subscribers {}\n"
          "# HELP llmserve:ui_events_dropped_total Dashboard events dropped for slow clients.\n"
          "# TYPE llmserve:ui_events_dropped_total counter\nllmserve:ui_events_dropped_total {}\n",
          hub->num_subscribers(), hub->dropped_total());
    }
    res.set_content(page, "text/plain; version=0.0.4; charset=utf-8");
  });

  svr.set_pre_routing_handler([this](const Request& req, Response& res) {
    // Every request passes here first, after its headers and before its body is read: start
    // its record, check the framing, the drain and the API key.
    mark_connection(req, /*busy=*/true);
    ThreadRequestState& st = thread_request_state();
    st.active = true;
    st.start_time = now_seconds();
    st.record = RequestRecord{};
    current_request_record() = &st.record;
    st.record.request_id = ensure_request_id(req, res);
    set_replica_header(res);
    if (std::optional<ApiError> err = check_framing(req)) {
      set_error_response(*err, &res);
      res.set_header("Connection", "close");  // the body (if any) was not read
      return HandlerResponse::Handled;
    }

    const bool v1 = req.path.rfind("/v1/", 0) == 0;
    if ((draining.load() || stopping.load()) &&
        (v1 || req.path == "/tokenize" || req.path == "/detokenize")) {
      set_error_response(service_unavailable("the server is shutting down"), &res);
      return HandlerResponse::Handled;
    }
    const bool ui = hub && is_ui_path(req.path);
    if (config.api_key.empty() || !(v1 || ui)) return HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.size() >= kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0 &&
        constant_time_equal(std::string_view(auth).substr(kBearer.size()), config.api_key))
      return HandlerResponse::Unhandled;
    // The dashboard's page and EventSource cannot send headers: ?api_key= as well.
    if (ui && !ui_query_api_key(req).empty() &&
        constant_time_equal(ui_query_api_key(req), config.api_key))
      return HandlerResponse::Unhandled;
    set_error_response(
        unauthorized("missing or invalid API key; send 'Authorization: Bearer <key>'"), &res);
    return HandlerResponse::Handled;
  });
  svr.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req,
                                                                    Response& res) {
    ensure_request_id(req, res);  // requests rejected before routing (413, 400) too
    if (!res.has_header("X-Replica-Id")) set_replica_header(res);
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
  // Called once the response (a stream included) was written, on the request's thread.
  svr.set_logger([this](const Request& req, const Response& res) {
    mark_connection(req, /*busy=*/false);
    log_request(req, res);
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
  impl_->replica_id = c.replica_id.empty() ? default_replica_id(port) : c.replica_id;
  if (impl_->hub) impl_->hub->set_replica_id(impl_->replica_id);
  impl_->bound_port = port;
  return Status::Ok();
}

Status HttpServer::listen() {
  LLMS_RETURN_IF_ERROR(bind());
  impl_->listening = true;
  if (impl_->stopping.load() || impl_->draining.load()) {  // stop() or shutdown() came first
    impl_->listening = false;
    return Status::Ok();
  }
  spdlog::info("llmserve: serving model '{}' on http://{}:{}", impl_->serving.served_model_name(),
               impl_->config.host, impl_->bound_port.load());
  std::thread watchdog;
  if (impl_->config.request_read_timeout_s > 0)
    watchdog = std::thread([this] { impl_->watchdog_loop(); });
  const bool ok = impl_->svr.listen_after_bind();
  if (watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> lock(impl_->conn_mu);
      impl_->watchdog_stop = true;
    }
    impl_->watchdog_cv.notify_all();
    watchdog.join();
  }
  impl_->listening = false;
  if (!ok && !impl_->stopping.load() && !impl_->draining.load())
    return Status(StatusCode::kInternal, "HTTP server stopped unexpectedly");
  return Status::Ok();
}

void HttpServer::stop() {
  if (impl_->stopping.exchange(true)) return;
  impl_->close_listener();
}

void HttpServer::shutdown(double timeout_s) {
  Impl& im = *impl_;
  if (im.draining.exchange(true)) return;
  const size_t in_flight = im.engine.num_unfinished();
  spdlog::info("shutting down: draining {} request(s) for up to {} s", in_flight, timeout_s);
  const double deadline = now_seconds() + std::max(0.0, timeout_s);
  auto idle = [&] { return im.engine.num_unfinished() == 0 && im.active_handlers.load() == 0; };
  auto wait_idle = [&](double until, bool keep_aborting) {
    while (!idle() && now_seconds() < until && !im.stopping.load()) {
      // Past the deadline, a request submitted by a handler that was still parsing is
      // aborted too.
      if (keep_aborting && im.engine.num_unfinished() > 0) im.engine.abort_all();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return idle();
  };
  if (!wait_idle(deadline, /*keep_aborting=*/false)) {
    spdlog::warn("shutdown timeout ({} s): aborting {} request(s)", timeout_s,
                 im.engine.num_unfinished());
    im.deadline_passed = true;
    // Non-streaming handlers notice the deadline at their next poll and answer 503; streams
    // are then ended by the engine's abort outputs (a final chunk and [DONE]).
    std::this_thread::sleep_for(std::chrono::duration<double>(3 * kStreamPollSeconds));
    im.engine.abort_all();
    wait_idle(now_seconds() + 5.0, /*keep_aborting=*/true);
  }
  // Close the listening socket; listen() returns once the HTTP threads have finished writing.
  im.close_listener();
}

bool HttpServer::shutting_down() const {
  return impl_->draining.load() || impl_->stopping.load();
}

int HttpServer::bound_port() const { return impl_->bound_port.load(); }

const std::string& HttpServer::served_model_name() const {
  return impl_->serving.served_model_name();
}

const std::string& HttpServer::replica_id() const { return impl_->replica_id; }

}  // namespace llmserve
