// The live dashboard's HTTP routes (docs/ui.md):
//
//   GET /ui, /ui/        the page (ui/index.html, built into the binary)
//   GET /ui/<file>       its other files (ui/*.js, ui/*.css); 404 for any other name
//   GET /ui/events       text/event-stream of dashboard::EventHub events; 429 when
//                        HubConfig::max_subscribers dashboards are already open
//
// With --api-key the routes need the key like /v1/*: "Authorization: Bearer KEY", or the
// query parameter `api_key=KEY` (a browser's EventSource and address bar cannot send headers).
// `serve --disable-ui` leaves them unregistered (404).
#pragma once

#include <functional>
#include <string_view>

namespace httplib {
class Server;
struct Request;
}  // namespace httplib

namespace llmserve {

namespace dashboard {
class EventHub;
}

/// Registers the routes above. `stopping` is polled by open streams, which end (cleanly, so
/// a drain is not held up) once it returns true. `hub` must outlive the server.
void register_ui_routes(httplib::Server& svr, dashboard::EventHub& hub,
                        std::function<bool()> stopping);

/// Whether `path` is one of the dashboard's (/ui or below).
bool is_ui_path(std::string_view path);

/// The API key a dashboard request carries in its `api_key` query parameter ("" if none).
std::string_view ui_query_api_key(const httplib::Request& req);

}  // namespace llmserve
