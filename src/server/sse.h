// Server-sent events (text/event-stream) as OpenAI streams them: each event is one line
// "data: <compact JSON>" followed by a blank line, and the stream ends with "data: [DONE]".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmserve {

/// "data: <payload as compact JSON>\n\n". Invalid UTF-8 in strings becomes U+FFFD.
std::string sse_event(const nlohmann::json& payload);

/// The terminating event of an OpenAI stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

/// Client side (tests, benchmarks): splits an SSE byte stream, fed in arbitrary pieces, into
/// the data payloads of complete events. Comment lines (":...") and fields other than "data"
/// are skipped; several data lines of one event are joined with "\n".
class SseParser {
 public:
  /// Adds bytes; returns the payloads of the events completed by them, in order.
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string buffer_;   // bytes after the last complete line
  std::string data_;     // data of the event being read
  bool has_data_ = false;
};

}  // namespace llmserve
