// The request policy: every top-level field a client may send to the JSON endpoints, with its
// fate — honoured (protocol.cc reads it) or refused (a 400 whose `param` names it and whose
// message says what to use instead) — and the rule for everything else: a field in no schema
// we know is a 400 "Unrecognized request argument supplied: <name>", as OpenAI's API answers,
// unless the server runs with --ignore-unknown-fields (then it is ignored, logged once per
// name, and listed in the X-LLMServe-Ignored-Fields response header).
//
// Sources of the schemas: OpenAI's API reference (CreateCompletionRequest,
// CreateChatCompletionRequest), vLLM's protocol.py extras (CompletionRequest,
// ChatCompletionRequest, TokenizeRequest) and llama.cpp's server README. docs/api.md keeps one
// row per field of kRequestFields, and a test checks that the two agree.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace llmserve {

/// The JSON endpoints, as bits so that a field can belong to several.
enum Endpoint : uint8_t {
  kEndpointCompletions = 1,  // POST /v1/completions
  kEndpointChat = 2,         // POST /v1/chat/completions
  kEndpointTokenize = 4,     // POST /tokenize
  kEndpointDetokenize = 8,   // POST /detokenize
};

/// What happens to a field that is present and not null.
enum class FieldFate : uint8_t {
  /// Read and acted on by protocol.cc / OpenAIServing (its own value checks apply).
  kHonoured,
  /// Honoured for some values, refused for others (e.g. response_format "text" only); the
  /// check lives in check_request_fields.
  kPartly,
  /// Always a 400, except for the value that asks for nothing (`neutral`, e.g. best_of 1),
  /// which is accepted as the no-op it is.
  kRefused,
};

/// One top-level request field.
struct RequestField {
  std::string_view name;
  uint8_t endpoints;        // Endpoint bits
  std::string_view origin;  // "OpenAI", "vLLM" or "llama.cpp": whose schema defines it
  FieldFate fate;
  /// kRefused: JSON text of the values accepted as no-ops, separated by '|' (empty = none).
  std::string_view neutral;
  /// kRefused / kPartly: why, and what to use instead (the 400's message after the name).
  std::string_view why;
};

/// Every known field (one entry per name; endpoints say where it applies).
std::span<const RequestField> request_fields();

/// The entry for `name`, or null when no schema we know has it.
const RequestField* find_request_field(std::string_view name);

/// Applies the policy to a parsed body for `endpoint`: the first unknown field (or a known
/// field sent to an endpoint it does not belong to) is a 400 "Unrecognized request argument
/// supplied: <name>" with param = name (and a "did you mean" hint for near misses), unless
/// `ignore_unknown`, in which case the names are appended to `ignored` instead; a refused
/// field (not null, not its neutral value) is a 400 naming it; kPartly fields are checked
/// value by value. Honoured fields are left to the endpoint's parser.
std::optional<ApiError> check_request_fields(const nlohmann::json& body, Endpoint endpoint,
                                             bool ignore_unknown,
                                             std::vector<std::string>* ignored);

/// The keys of `stream_options` the server honours ("include_usage",
/// "continuous_usage_stats"); others are unknown (a 400 naming "stream_options").
std::optional<ApiError> check_stream_options_keys(const nlohmann::json& stream_options);

}  // namespace llmserve
