#include "bench/http_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/timing.h"
#include "server/sse.h"

namespace llmserve::bench {

using nlohmann::json;

namespace {
constexpr size_t kMaxErrorBytes = 2048;  // bytes of an error body kept for the message
}  // namespace

Expected<Endpoint> parse_completions_url(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 &&
                                      url.compare(0, scheme, "https") != 0))
    return InvalidArgument("--url '{}' must look like http://host:port", url);
  const size_t slash = url.find('/', scheme + 3);
  Endpoint e;
  e.base = url.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : url.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (e.base.size() <= scheme + 3) return InvalidArgument("--url '{}' has no host", url);
  if (path.size() >= 12 && path.compare(path.size() - 12, 12, "/completions") == 0) e.path = path;
  else if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0) e.path = path + "/completions";
  else e.path = path + "/v1/completions";
  return e;
}

namespace {

/// Timeouts of `seconds` and the bearer key, for every client of a run.
void configure(httplib::Client& cli, const ServeOptions& o, double seconds) {
  const auto sec = static_cast<time_t>(seconds);
  const auto usec = static_cast<time_t>((seconds - static_cast<double>(sec)) * 1e6);
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  if (!o.api_key.empty()) cli.set_bearer_token_auth(o.api_key.c_str());
}

/// Why a TCP connection to `base` (scheme://host[:port]) fails, from one attempt: "connection
/// refused", "no route to host", ... (cpp-httplib reports only that it could not connect).
std::string connect_failure(const std::string& base) {
  const bool https = base.compare(0, 5, "https") == 0;
  std::string host = base.substr(base.find("://") + 3), port = https ? "443" : "80";
  if (!host.empty() && host[0] == '[') {  // [v6 address]:port
    const size_t close = host.find(']');
    if (close != std::string::npos && close + 2 < host.size()) port = host.substr(close + 2);
    host = host.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    port = host.substr(colon + 1);
    host.resize(colon);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return fmt::format("cannot resolve host '{}': {}", host, ::gai_strerror(rc));
  std::string why = "cannot connect";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{5, 0};  // bounds connect() on Linux
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    const int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    const int err = errno;
    ::close(fd);
    if (rc == 0) {
      why = "it accepted a connection only on a second try";
      break;
    }
    why = std::strerror(err);
  }
  ::freeaddrinfo(found);
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  return why;
}

/// The one-line error for a request ("GET /v1/models") that got no HTTP reply.
Status no_reply(const Endpoint& ep, const std::string& request, httplib::Error err) {
  if (err == httplib::Error::Connection)
    return Status(StatusCode::kUnavailable,
                  fmt::format("cannot connect to {}: {} (is the server running?)", ep.base,
                              connect_failure(ep.base)));
  return Status(StatusCode::kUnavailable,
                fmt::format("{} on {}: {}", request, ep.base, httplib::to_string(err)));
}

}  // namespace

Expected<std::string> probe_server(const Endpoint& endpoint, const ServeOptions& options) {
  httplib::Client cli(endpoint.base);
  configure(cli, options, std::min(options.timeout_s, 30.0));
  const std::string path = endpoint.path.substr(0, endpoint.path.rfind('/')) + "/models";
  httplib::Result r = cli.Get(path);
  if (!r) return no_reply(endpoint, "GET " + path, r.error());
  if (r->status == 401)
    return InvalidArgument("GET {}{}: 401 Unauthorized: give the server's API key with "
                           "--api-key or OPENAI_API_KEY", endpoint.base, path);
  if (!options.model.empty()) return options.model;
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return Status(StatusCode::kInternal,
                  fmt::format("GET {}{}: status {}, no model id in the reply (name the model "
                              "with --served-model-name)", endpoint.base, path, r->status));
  return j["data"][0]["id"].get<std::string>();
}

namespace {

/// Counts requests in flight; acquire() blocks while `limit` are (limit 0 = no bound).
class Slots {
 public:
  explicit Slots(int32_t limit) : limit_(limit) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return limit_ <= 0 || in_flight_ < limit_; });
    ++in_flight_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int32_t limit_;
  int32_t in_flight_ = 0;
};

json request_body(const BenchRequest& b, const ServeOptions& o, const std::string& model) {
  json body = {{"model", model},
               {"max_tokens", b.output_len},
               {"temperature", o.temperature},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!b.prompt_token_ids.empty()) body["prompt"] = b.prompt_token_ids;
  else body["prompt"] = b.prompt_text;
  return body;
}

/// Reads one SSE event payload into `rec`; returns false on a server error event.
bool handle_event(const std::string& data, RequestRecord& rec, bool& done) {
  if (data == "[DONE]") {
    done = true;
    return true;
  }
  const double t = now_seconds();
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    rec.error = "malformed stream event: " + data.substr(0, 200);
    return false;
  }
  if (j.contains("error")) {
    rec.error = j["error"].dump();
    return false;
  }
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const json& c = j["choices"][0];
    if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) {
      rec.token_times.push_back(t);
      rec.output_text += c["text"].get<std::string>();
    }
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      rec.output_tokens = u["completion_tokens"].get<int32_t>();
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      rec.prompt_len = u["prompt_tokens"].get<int32_t>();
    // OpenAI's prefix-cache figure (llmserve; vLLM with --enable-prompt-tokens-details).
    auto d = u.find("prompt_tokens_details");
    if (d != u.end() && d->is_object()) {
      auto c = d->find("cached_tokens");
      if (c != d->end() && c->is_number_integer()) rec.cached_tokens = c->get<int32_t>();
    }
  }
  return true;
}

/// Sends one request and streams its reply into `rec` (arrival_time = send time).
void send_one(const Endpoint& ep, const BenchRequest& b, const ServeOptions& o,
              const std::string& model, RequestRecord& rec) {
  httplib::Client cli(ep.base);
  configure(cli, o, o.timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = ep.path;
  req.set_header("Content-Type", "application/json");
  req.body = request_body(b, o, model).dump();
  if (b.prompt_token_ids.empty()) rec.prompt_text = b.prompt_text;
  SseParser parser;
  std::string raw;  // first bytes, for error messages
  bool done = false, stream_ok = true;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (raw.size() < kMaxErrorBytes) raw.append(data, std::min(n, kMaxErrorBytes - raw.size()));
    for (const std::string& ev : parser.feed(std::string_view(data, n)))
      if (!handle_event(ev, rec, done)) stream_ok = false;
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  rec.arrival_time = now_seconds();
  const bool sent = cli.send(req, res, err);
  rec.finished_time = now_seconds();
  if (!sent) rec.error = no_reply(ep, "POST " + ep.path, err).message();
  else if (res.status != 200) rec.error = fmt::format("HTTP {}: {}", res.status, raw);
  else if (stream_ok && rec.token_times.empty()) rec.error = "stream carried no text";
  else if (stream_ok && !done) rec.error = "stream ended without [DONE]";
  rec.success = sent && res.status == 200 && stream_ok && done && !rec.token_times.empty();
  if (rec.success && rec.output_tokens == 0) rec.output_tokens = b.output_len;
}

/// Scrapes GET /metrics into `scrapes` (seconds from `t0`): once at construction, every
/// `interval` seconds on a thread while running, and once more in finish().
class MetricsPoller {
 public:
  MetricsPoller(const Endpoint& ep, const ServeOptions& o, std::string model, double t0)
      : cli_(ep.base), base_(ep.base), model_(std::move(model)), t0_(t0),
        interval_(o.metrics_interval_s) {
    configure(cli_, o, std::min(o.timeout_s, 10.0));
    if (interval_ <= 0) {
      note_ = "not scraped (metrics interval <= 0)";
      return;
    }
    if (!scrape()) return;
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::duration<double>(interval_), [&] { return stop_; })) {
        lock.unlock();
        scrape();
        lock.lock();
      }
    });
  }

  /// Stops the thread, takes the last scrape and summarises (nullopt: /metrics unreadable).
  std::optional<ServerEngineMetrics> finish(std::string* note) {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    if (scrapes_.empty()) {
      *note = note_;
      return std::nullopt;
    }
    scrape();
    return summarize_scrapes(scrapes_);
  }

 private:
  /// One scrape; a failure is remembered in note_ (only the first scrape's matters).
  bool scrape() {
    httplib::Result r = cli_.Get("/metrics");
    if (!r || r->status != 200) {
      note_ = fmt::format("GET {}/metrics: {}", base_,
                          r ? fmt::format("status {}", r->status) : httplib::to_string(r.error()));
      return false;
    }
    scrapes_.push_back({now_seconds() - t0_, read_prometheus_samples(r->body, model_)});
    return true;
  }

  httplib::Client cli_;
  std::string base_, model_;
  double t0_, interval_;
  std::vector<MetricsScrape> scrapes_;
  std::string note_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Expected<RunResult> run_over_http(const std::vector<BenchRequest>& requests,
                                  const ServeOptions& options) {
  LLMS_RETURN_IF_ERROR(check_follow_ups(requests));
  std::vector<int64_t> follow_up(requests.size(), -1);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].follows < 0) continue;
    if (!requests[i].prompt_token_ids.empty())
      return InvalidArgument("request {}: a follow-up turn must be text over HTTP (the reply "
                             "comes back as text)", i);
    follow_up[static_cast<size_t>(requests[i].follows)] = static_cast<int64_t>(i);
  }
  LLMS_ASSIGN_OR_RETURN(Endpoint ep, parse_completions_url(options.url));
  LLMS_ASSIGN_OR_RETURN(const std::string model, probe_server(ep, options));
  RunResult result;
  result.in_process = false;
  result.requests.resize(requests.size());
  result.finish_step.assign(requests.size(), -1);
  Slots slots(options.max_concurrency);
  std::mutex progress_mu;
  int64_t done = 0;
  auto count_done = [&] {
    std::lock_guard<std::mutex> lock(progress_mu);
    ++done;
    if (options.progress) options.progress(done, static_cast<int64_t>(requests.size()));
  };
  auto init_record = [&](size_t i) {
    RequestRecord& rec = result.requests[i];
    rec.id = static_cast<int64_t>(i);
    rec.prompt_len = requests[i].prompt_len;
    rec.target_output_len = requests[i].output_len;
    rec.conversation = requests[i].conversation;
    rec.turn = requests[i].turn;
  };
  std::vector<std::thread> threads;
  MetricsPoller metrics(ep, options, model, now_seconds());  // the "before" scrape first
  result.start_time = now_seconds();
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].follows >= 0) continue;  // sent by the thread of its previous turn
    const double wait = result.start_time + requests[i].arrival_offset_s - now_seconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    slots.acquire();  // a conversation keeps its slot from its first turn to its last
    init_record(i);
    threads.emplace_back([&, i] {
      send_one(ep, requests[i], options, model, result.requests[i]);
      count_done();
      for (int64_t k = follow_up[i], prev = static_cast<int64_t>(i); k >= 0;
           prev = k, k = follow_up[static_cast<size_t>(k)]) {
        const size_t ki = static_cast<size_t>(k);
        const RequestRecord& before = result.requests[static_cast<size_t>(prev)];
        init_record(ki);
        RequestRecord& rec = result.requests[ki];
        if (!before.success) {
          rec.error = "not sent: the previous turn of its conversation failed";
          count_done();
          continue;
        }
        // The conversation so far (the previous prompt and its reply), then the new turn.
        BenchRequest turn = requests[ki];
        turn.prompt_text = before.prompt_text + before.output_text + requests[ki].prompt_text;
        rec.prompt_text = turn.prompt_text;
        send_one(ep, turn, options, model, rec);
        count_done();
      }
      slots.release();
    });
  }
  for (std::thread& t : threads) t.join();
  result.end_time = now_seconds();
  result.server_engine = metrics.finish(&result.server_metrics_note);
  return result;
}

}  // namespace llmserve::bench
