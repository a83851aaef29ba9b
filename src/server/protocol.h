// OpenAI request bodies -> plain structs. The shape and types of fields are checked here, plus
// the ranges that are the API's own contract rather than the engine's (n, logprobs,
// temperature in OpenAI's [0, 2], non-empty prompt); the other value ranges (top_p in (0, 1],
// penalties, ...) are SamplingParams::validate's job, and prompt-length limits are checked by
// OpenAIServing before the engine sees the request. Which fields exist at all, and which are
// refused, is the request policy's decision (request_policy.h), applied before these parsers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "sampling/sampling_params.h"
#include "server/api_error.h"

namespace llmserve {

/// Largest accepted "n" (choices per request); more is a 400 naming "n".
inline constexpr int32_t kMaxN = 16;
/// Most stop strings a request may send (OpenAI allows 4, vLLM any number). They are matched
/// on the engine thread after every token, so thousands of them would slow every request in
/// the batch (measured: 100000 stop strings of 80 bytes, 3-5 ms per token).
inline constexpr size_t kMaxStopStrings = 64;
/// Most chat messages a request may carry. Rendering time grows faster than linearly with the
/// message count (QA: 20k empty messages 0.5 s, 200k 94 s of one core before the template's
/// step limit stopped it), and /tokenize needs no API key; 4096 messages render in well under
/// 0.1 s, and no context this server holds fits more than a few thousand real turns.
inline constexpr size_t kMaxMessages = 4096;
/// Most keys one JSON object of a request body may hold (more is a 400). Real requests hold
/// tens; tool schemas and chat_template_kwargs a few hundred at most.
inline constexpr size_t kMaxObjectKeys = 4096;

/// Whether `tool` has OpenAI's function-tool shape: {"type": "function", "function": {"name":
/// <non-empty string>, ...}} (the only kind of tool OpenAI's chat API takes). Any JSON type.
template <class Json>
bool is_function_tool(const Json& tool) {
  if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function") return false;
  if (!tool.contains("function") || !tool["function"].is_object()) return false;
  const auto& f = tool["function"];
  return f.contains("name") && f["name"].is_string() &&
         !f["name"].template get_ref<const std::string&>().empty();
}
/// Largest accepted "temperature" (OpenAI's documented range is [0, 2]; the engine itself
/// accepts any finite value >= 0, e.g. from the CLI).
inline constexpr float kMaxApiTemperature = 2.0f;

/// Fields shared by /v1/completions and /v1/chat/completions.
struct GenerationOptions {
  std::optional<std::string> model;   // "model"; when given it must name the served model
  /// temperature, top_p, top_k, seed, stop, stop_token_ids, ignore_eos as sent (defaults
  /// otherwise). params.max_tokens is left at its default; see max_tokens.
  SamplingParams params;
  /// "max_tokens" (chat: "max_completion_tokens" wins over it). Absent: endpoint default.
  std::optional<int32_t> max_tokens;
  /// The field that set max_tokens ("max_tokens", "max_completion_tokens" or "n_predict"),
  /// named by length errors.
  std::string max_tokens_param = "max_tokens";
  /// "n": independent samples (choices) of the same prompt, 1..kMaxN.
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t priority = 0;        // --scheduling-policy priority: lower runs first
  /// "top_k" was sent (OpenAIServing then bounds it by the vocabulary size).
  bool top_k_sent = false;
  /// "user" / "safety_identifier": an end-user id (OpenAI's abuse-monitoring fields); written
  /// to the request's access-log line.
  std::optional<std::string> user;
  std::optional<std::string> safety_identifier;
  /// vLLM's cache_salt (a non-empty string): requests with different salts never share a
  /// prefix-cached KV block. OpenAI's prompt_cache_key: accepted (the cache here is automatic
  /// and shared whatever the key). llama.cpp's cache_prompt: false computes the whole prompt
  /// (no prefix-cache lookup).
  std::optional<std::string> cache_salt;
  std::optional<std::string> prompt_cache_key;
  bool cache_prompt = true;
  /// stream_options.continuous_usage_stats (vLLM): running usage in every chunk; only with
  /// include_usage.
  bool continuous_usage_stats = false;
  /// vLLM's truncate_prompt_tokens: keep only the last N prompt tokens (-1 = max_model_len).
  std::optional<int32_t> truncate_prompt_tokens;
  /// vLLM's prompt_logprobs field (0..kMaxLogprobs alternatives); params.prompt_logprobs is
  /// the larger of it and what echo + logprobs needs.
  std::optional<int32_t> prompt_logprobs;
  /// vLLM's return_tokens_as_token_ids: logprobs tokens written "token_id:<id>".
  bool return_tokens_as_token_ids = false;
  /// vLLM's return_token_ids: the prompt's and each choice's token ids in the response.
  bool return_token_ids = false;
  /// "echo". Completions: the reply text starts with the prompt (as sent, or the detokenized
  /// token ids); with logprobs the prompt tokens' logprobs come first (params.prompt_logprobs
  /// is set). Chat (vLLM): when the last message has the reply's role ("assistant"), the
  /// reply's content starts with that message's content.
  bool echo = false;
  /// Completions: add the tokenizer's BOS/EOS around a text prompt (vLLM, default true);
  /// special-token text in the prompt is never parsed as special tokens.
  bool add_special_tokens = true;
};

/// POST /v1/completions. Exactly one of prompt_text / prompt_token_ids holds the prompt.
struct CompletionRequest {
  GenerationOptions options;
  std::optional<std::string> prompt_text;  // "prompt": "..." or ["..."]
  std::vector<int32_t> prompt_token_ids;   // "prompt": [1, 2, 3] or [[1, 2, 3]]
};

/// One chat message; a list of {"type": "text", "text": ...} parts is joined with "\n".
struct ChatMessage {
  std::string role;
  std::string content;
};

/// POST /v1/chat/completions.
struct ChatCompletionRequest {
  GenerationOptions options;
  std::vector<ChatMessage> messages;  // at least one
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

/// Parses an HTTP body that must be a JSON object (valid UTF-8, nested <= 64 levels).
/// Errors: 400 with the parser's message (position included) and param null; a number that
/// overflows a double (1e400) names its top-level field as param.
std::optional<ApiError> parse_json_object(std::string_view body, nlohmann::json* out);

/// Reads a /v1/completions body. Returns a 400 error naming the field (param) and the
/// offending value for missing or wrong-typed fields, an empty prompt ("" or []), batched
/// prompts, logprobs / top_logprobs outside 0..20, n outside
/// 1..kMaxN, more than kMaxStopStrings stop strings and temperature outside
/// [0, kMaxApiTemperature] (NaN / infinity included).
std::optional<ApiError> parse_completion_request(const nlohmann::json& body,
                                                 CompletionRequest* out);

/// Reads a /v1/chat/completions body; errors as parse_completion_request.
std::optional<ApiError> parse_chat_request(const nlohmann::json& body,
                                           ChatCompletionRequest* out);

/// The chat-template inputs of a request body (chat completions, /tokenize with messages),
/// read from the body parsed with its key order kept (`ordered_body`; tool schemas and message
/// fields reach the template's tojson in the client's order): every message object as sent
/// except that a list of text parts becomes one string joined with "\n" (vLLM's "string"
/// content format; `messages` are the already-validated messages), "tools" and "documents"
/// (lists or null), "chat_template_kwargs" (an object), "add_generation_prompt" and
/// "continue_final_message". bos_token / eos_token are left for the caller.
/// Errors: 400 naming the field; both add_generation_prompt and continue_final_message set.
std::optional<ApiError> read_chat_template_inputs(const nlohmann::ordered_json& ordered_body,
                                                  const std::vector<ChatMessage>& messages,
                                                  ChatTemplateInputs* out);

/// Validates "messages" of a body (as for chat completions) into `out`.
std::optional<ApiError> parse_messages(const nlohmann::json& body, std::vector<ChatMessage>* out);

}  // namespace llmserve
