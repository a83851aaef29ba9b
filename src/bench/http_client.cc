#include "bench/http_client.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
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

Expected<std::string> fetch_model_name(const Endpoint& endpoint, double timeout_s) {
  httplib::Client cli(endpoint.base);
  cli.set_connection_timeout(static_cast<time_t>(std::max(1.0, timeout_s)));
  cli.set_read_timeout(static_cast<time_t>(std::max(1.0, timeout_s)));
  const std::string path = endpoint.path.substr(0, endpoint.path.rfind('/')) + "/models";
  httplib::Result r = cli.Get(path);
  if (!r)
    return Status(StatusCode::kInternal, fmt::format("GET {}{}: {}", endpoint.base, path,
                                                     httplib::to_string(r.error())));
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return Status(StatusCode::kInternal,
                  fmt::format("GET {}{}: status {}, no model id in the reply", endpoint.base,
                              path, r->status));
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
    if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty())
      rec.token_times.push_back(t);
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      rec.output_tokens = u["completion_tokens"].get<int32_t>();
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      rec.prompt_len = u["prompt_tokens"].get<int32_t>();
  }
  return true;
}

/// Sends one request and streams its reply into `rec` (arrival_time = send time).
void send_one(const Endpoint& ep, const BenchRequest& b, const ServeOptions& o,
              const std::string& model, RequestRecord& rec) {
  httplib::Client cli(ep.base);
  cli.set_connection_timeout(static_cast<time_t>(std::max(1.0, o.timeout_s)));
  cli.set_read_timeout(static_cast<time_t>(std::max(1.0, o.timeout_s)));
  httplib::Request req;
  req.method = "POST";
  req.path = ep.path;
  req.set_header("Content-Type", "application/json");
  req.body = request_body(b, o, model).dump();
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
  if (!sent) rec.error = "HTTP error: " + httplib::to_string(err);
  else if (res.status != 200) rec.error = fmt::format("HTTP {}: {}", res.status, raw);
  else if (stream_ok && rec.token_times.empty()) rec.error = "stream carried no text";
  else if (stream_ok && !done) rec.error = "stream ended without [DONE]";
  rec.success = sent && res.status == 200 && stream_ok && done && !rec.token_times.empty();
  if (rec.success && rec.output_tokens == 0) rec.output_tokens = b.output_len;
}

}  // namespace

Expected<RunResult> run_over_http(const std::vector<BenchRequest>& requests,
                                  const ServeOptions& options) {
  LLMS_ASSIGN_OR_RETURN(Endpoint ep, parse_completions_url(options.url));
  std::string model = options.model;
  if (model.empty()) {
    LLMS_ASSIGN_OR_RETURN(model, fetch_model_name(ep, options.timeout_s));
  }
  RunResult result;
  result.in_process = false;
  result.requests.resize(requests.size());
  result.finish_step.assign(requests.size(), -1);
  Slots slots(options.max_concurrency);
  std::mutex progress_mu;
  int64_t done = 0;
  std::vector<std::thread> threads;
  result.start_time = now_seconds();
  for (size_t i = 0; i < requests.size(); ++i) {
    const double wait = result.start_time + requests[i].arrival_offset_s - now_seconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    slots.acquire();
    RequestRecord& rec = result.requests[i];
    rec.id = static_cast<int64_t>(i);
    rec.prompt_len = requests[i].prompt_len;
    rec.target_output_len = requests[i].output_len;
    threads.emplace_back([&, i] {
      send_one(ep, requests[i], options, model, result.requests[i]);
      slots.release();
      std::lock_guard<std::mutex> lock(progress_mu);
      ++done;
      if (options.progress) options.progress(done, static_cast<int64_t>(requests.size()));
    });
  }
  for (std::thread& t : threads) t.join();
  result.end_time = now_seconds();
  return result;
}

}  // namespace llmserve::bench
