// OpenAI-style error responses: an HTTP status plus
//   {"error": {"message": ..., "type": ..., "param": ... | null, "code": <http status>}}
// Type names follow vLLM ("BadRequestError", "NotFoundError", ...).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace llmserve {

/// One error answer to an HTTP request.
struct ApiError {
  int http_status = 400;
  std::string type = "BadRequestError";
  std::string message;
  std::optional<std::string> param;  // the offending request field, if one is to blame

  /// {"error": {"message", "type", "param", "code"}}; code is http_status.
  nlohmann::json to_json() const;
};

/// 400 BadRequestError.
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
/// 404 NotFoundError.
ApiError not_found(std::string message, std::optional<std::string> param = std::nullopt);
/// 500 InternalServerError.
ApiError internal_error(std::string message);
/// 429 RateLimitError: the request queue is full (see --max-waiting); retry later.
ApiError too_many_requests(std::string message);
/// 503 ServiceUnavailableError: the server is shutting down (draining).
ApiError service_unavailable(std::string message);
/// 413 RequestEntityTooLarge: the body is over --max-request-body-bytes.
ApiError payload_too_large(std::string message);
/// 401 AuthenticationError: missing or wrong API key.
ApiError unauthorized(std::string message);

/// Maps an engine/library Status to an HTTP error: InvalidArgument and ResourceExhausted ->
/// 400 (the request can never fit), Unavailable -> 429 (busy now, retry later; the HTTP layer
/// adds Retry-After), NotFound -> 404, Unimplemented -> 501, anything else -> 500. The message is kept
/// verbatim. When the message starts with a request field name ("temperature must be ...",
/// "stop_token_ids: ..."), that field becomes `param` (SamplingParams::validate's messages
/// are written that way).
ApiError api_error_from_status(const Status& status);

}  // namespace llmserve
