#include "server/api_error.h"

#include <array>
#include <string_view>

namespace llmserve {

nlohmann::json ApiError::to_json() const {
  nlohmann::json err = {
      {"message", message},
      {"type", type},
      {"param", param ? nlohmann::json(*param) : nlohmann::json(nullptr)},
      {"code", http_status},
  };
  return {{"error", std::move(err)}};
}

ApiError bad_request(std::string message, std::optional<std::string> param) {
  return ApiError{400, "BadRequestError", std::move(message), std::move(param)};
}

ApiError not_found(std::string message, std::optional<std::string> param) {
  return ApiError{404, "NotFoundError", std::move(message), std::move(param)};
}

ApiError internal_error(std::string message) {
  return ApiError{500, "InternalServerError", std::move(message), std::nullopt};
}

ApiError too_many_requests(std::string message) {
  return ApiError{429, "RateLimitError", std::move(message), std::nullopt};
}

ApiError service_unavailable(std::string message) {
  return ApiError{503, "ServiceUnavailableError", std::move(message), std::nullopt};
}

ApiError payload_too_large(std::string message) {
  return ApiError{413, "RequestEntityTooLarge", std::move(message), std::nullopt};
}

ApiError unauthorized(std::string message) {
  return ApiError{401, "AuthenticationError", std::move(message), std::nullopt};
}

namespace {

// Request fields whose name may open a validation message. Longest first so that
// "stop_token_ids" wins over "stop".
constexpr std::array<std::string_view, 18> kParamNames = {
    "allowed_token_ids", "repetition_penalty", "frequency_penalty", "presence_penalty",
    "prompt_logprobs", "stop_token_ids", "top_logprobs", "temperature", "logit_bias",
    "max_tokens", "min_tokens", "logprobs", "min_p", "top_p", "top_k", "seed", "stop", "n"};

std::optional<std::string> leading_param(std::string_view message) {
  for (std::string_view name : kParamNames) {
    if (message.substr(0, name.size()) != name) continue;
    // The name must end there: "top_p must", "stop_token_ids:", not "stopped".
    if (message.size() == name.size()) return std::string(name);
    const char next = message[name.size()];
    if (next == ' ' || next == ':' || next == '=') return std::string(name);
  }
  return std::nullopt;
}

}  // namespace

ApiError api_error_from_status(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted:
      return bad_request(status.message(), leading_param(status.message()));
    case StatusCode::kUnavailable:
      return too_many_requests(status.message());
    case StatusCode::kNotFound:
      return not_found(status.message());
    case StatusCode::kUnimplemented:
      return ApiError{501, "NotImplementedError", status.message(), std::nullopt};
    default:
      return internal_error(status.message().empty() ? "internal error" : status.message());
  }
}

}  // namespace llmserve
