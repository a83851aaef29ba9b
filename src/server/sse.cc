#include "server/sse.h"

namespace llmserve {

std::string sse_event(const nlohmann::json& payload) {
  std::string out = "data: ";
  out += payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += "\n\n";
  return out;
}

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<std::string> events;
  size_t start = 0;
  for (size_t nl; (nl = buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(buffer_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {  // blank line: end of event
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
      continue;
    }
    if (line.front() == ':') continue;  // comment
    const size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    if (field != "data") continue;
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  buffer_.erase(0, start);
  return events;
}

}  // namespace llmserve
