#include "server/responses.h"

#include <chrono>
#include <random>

#include <fmt/format.h>

namespace llmserve {

using nlohmann::json;

std::string make_response_id(ApiKind kind) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}", kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-", rng(),
                     rng());
}

int64_t unix_time_now() {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

json finish_reason_json(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone: break;
  }
  return nullptr;
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

namespace {

json envelope(const ResponseMeta& meta, const char* object, json choices) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", std::move(choices)}};
}

const char* chunk_object(ApiKind kind) {
  return kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
}

}  // namespace

json full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& results,
                   const Usage& usage) {
  json choices = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    json choice = {{"index", i}};
    if (meta.kind == ApiKind::kChat)
      choice["message"] = {{"role", "assistant"}, {"content", results[i].text}};
    else
      choice["text"] = results[i].text;
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason_json(results[i].finish_reason);
    choices.push_back(std::move(choice));
  }
  json body = envelope(
      meta, meta.kind == ApiKind::kChat ? "chat.completion" : "text_completion",
      std::move(choices));
  body["usage"] = usage_json(usage);
  return body;
}

json full_response(const ResponseMeta& meta, const std::string& text, FinishReason finish_reason,
                   const Usage& usage) {
  return full_response(meta, std::vector<ChoiceResult>{{text, finish_reason}}, usage);
}

std::optional<json> opening_chunk(const ResponseMeta& meta, bool include_usage, int32_t index) {
  if (meta.kind != ApiKind::kChat) return std::nullopt;
  json choice = {{"index", index},
                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  json chunk = envelope(meta, chunk_object(meta.kind), json::array({std::move(choice)}));
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json delta_chunk(const ResponseMeta& meta, const std::string& text, FinishReason finish_reason,
                 bool include_usage, int32_t index) {
  json choice = {{"index", index}};
  if (meta.kind == ApiKind::kChat) {
    json delta = json::object();
    if (!text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_json(finish_reason);
  json chunk = envelope(meta, chunk_object(meta.kind), json::array({std::move(choice)}));
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json chunk = envelope(meta, chunk_object(meta.kind), json::array());
  chunk["usage"] = usage_json(usage);
  return chunk;
}

}  // namespace llmserve
