#include "server/ui_routes.h"

#include <memory>
#include <string>

#include <fmt/format.h>
#include <httplib.h>

#include "common/timing.h"
#include "dashboard/event_hub.h"
#include "dashboard/ui_assets.h"
#include "server/api_error.h"
#include "server/openai_serving.h"

namespace llmserve {

namespace {

void serve_asset(std::string_view name, httplib::Response& res) {
  const dashboard::UiAsset* asset = dashboard::find_ui_asset(name);
  if (!asset) {
    return set_error_response(
        ApiError{404, "NotFoundError", "no such dashboard file: /ui/" + std::string(name), std::nullopt},
        &res);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(asset->body), std::string(asset->content_type));
}

}  // namespace

bool is_ui_path(std::string_view path) { return path == "/ui" || path.rfind("/ui/", 0) == 0; }

std::string_view ui_query_api_key(const httplib::Request& req) {
  auto it = req.params.find("api_key");
  return it == req.params.end() ? std::string_view() : std::string_view(it->second);
}

void register_ui_routes(httplib::Server& svr, dashboard::EventHub& hub,
                        std::function<bool()> stopping) {
  svr.Get("/ui", [](const httplib::Request&, httplib::Response& res) { serve_asset("index.html", res); });
  svr.Get("/ui/", [](const httplib::Request&, httplib::Response& res) { serve_asset("index.html", res); });
  svr.Get("/ui/events", [&hub, stopping](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<dashboard::Subscription> sub = hub.subscribe();
    if (!sub) {
      return set_error_response(
          ApiError{429, "RateLimitError",
                   fmt::format("too many dashboards are open on this server (at most {}, a quarter "
                               "of its HTTP threads); close one",
                               hub.max_subscribers()),
                   std::nullopt},
          &res);
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // nginx: pass events through as they come
    res.set_chunked_content_provider(
        "text/event-stream",
        [&hub, sub, stopping](size_t /*offset*/, httplib::DataSink& sink) {
          // One call serves the whole stream: events as they come, `metrics` every second
          // (which also finds a client that went away: its write fails).
          double next_metrics = 0;
          while (!stopping()) {
            std::string chunk = sub->wait(0.25);
            const double now = now_seconds();
            if (now >= next_metrics) {
              chunk += hub.metrics_event(now);
              next_metrics = now + 1.0;
            }
            if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) return false;
            if (sink.is_writable && !sink.is_writable()) return false;
          }
          sink.done();
          return true;
        },
        [&hub, sub](bool /*success*/) { hub.unsubscribe(sub); });
  });
  svr.Get(R"(/ui/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    serve_asset(req.matches[1].str(), res);
  });
}

}  // namespace llmserve
