#include "server/responses.h"

#include <chrono>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace llmserve {

using nlohmann::json;

std::string make_response_id(ApiKind kind, std::string_view request_id) {
  const char* prefix = kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-";
  if (!request_id.empty()) return fmt::format("{}{}", prefix, request_id);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
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
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kNone: break;
  }
  return nullptr;
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
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
    if (meta.kind == ApiKind::kChat) {
      const ChoiceResult& r = results[i];
      json message = {{"role", "assistant"}, {"content", r.text}};
      if (r.parsed) {
        const bool calls = !r.tool_calls.empty();
        if (calls && r.text.empty()) message["content"] = nullptr;  // OpenAI's shape
        if (r.reasoning) {
          message["reasoning_content"] =
              r.reasoning_content.empty() ? json(nullptr) : json(r.reasoning_content);
          message["reasoning"] = message["reasoning_content"];
        }
        if (calls) message["tool_calls"] = r.tool_calls;
      }
      choice["message"] = std::move(message);
    }
    else
      choice["text"] = results[i].text;
    choice["logprobs"] = results[i].logprobs;
    choice["finish_reason"] = finish_reason_json(results[i].finish_reason);
    // vLLM: completions carry prompt_logprobs per choice, chat once at the top level.
    if (meta.kind == ApiKind::kCompletion && !results[i].prompt_logprobs.is_discarded())
      choice["prompt_logprobs"] = results[i].prompt_logprobs;
    if (meta.kind == ApiKind::kCompletion && !results[i].prompt_token_ids.is_discarded())
      choice["prompt_token_ids"] = results[i].prompt_token_ids;
    if (!results[i].token_ids.is_discarded()) choice["token_ids"] = results[i].token_ids;
    choices.push_back(std::move(choice));
  }
  json body = envelope(
      meta, meta.kind == ApiKind::kChat ? "chat.completion" : "text_completion",
      std::move(choices));
  if (meta.kind == ApiKind::kChat && !results.empty() &&
      !results[0].prompt_logprobs.is_discarded())
    body["prompt_logprobs"] = results[0].prompt_logprobs;
  if (meta.kind == ApiKind::kChat && !results.empty() &&
      !results[0].prompt_token_ids.is_discarded())
    body["prompt_token_ids"] = results[0].prompt_token_ids;
  body["usage"] = usage_json(usage);
  return body;
}

json full_response(const ResponseMeta& meta, const std::string& text, FinishReason finish_reason,
                   const Usage& usage) {
  ChoiceResult choice;
  choice.text = text;
  choice.finish_reason = finish_reason;
  return full_response(meta, std::vector<ChoiceResult>{std::move(choice)}, usage);
}

std::optional<json> opening_chunk(const ResponseMeta& meta, bool include_usage, int32_t index,
                                  const Usage* running_usage) {
  if (meta.kind != ApiKind::kChat) return std::nullopt;
  json choice = {{"index", index},
                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  json chunk = envelope(meta, chunk_object(meta.kind), json::array({std::move(choice)}));
  if (include_usage) chunk["usage"] = running_usage ? usage_json(*running_usage) : json(nullptr);
  return chunk;
}

json delta_chunk(const ResponseMeta& meta, const std::string& text, FinishReason finish_reason,
                 bool include_usage, int32_t index, json logprobs, const Usage* running_usage,
                 json chat_delta) {
  json choice = {{"index", index}};
  if (meta.kind == ApiKind::kChat) {
    if (!chat_delta.is_null()) {
      choice["delta"] = std::move(chat_delta);
    } else {
      json delta = json::object();
      if (!text.empty()) delta["content"] = text;
      choice["delta"] = std::move(delta);
    }
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason_json(finish_reason);
  json chunk = envelope(meta, chunk_object(meta.kind), json::array({std::move(choice)}));
  if (include_usage) chunk["usage"] = running_usage ? usage_json(*running_usage) : json(nullptr);
  return chunk;
}

namespace {
double finite_logprob(float v) { return std::isfinite(v) ? v : -9999.0; }
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}
}  // namespace

std::string logprob_token_text(const Tokenizer& tokenizer, int32_t prev_id, int32_t id,
                               bool as_token_ids) {
  if (as_token_ids) return fmt::format("token_id:{}", id);
  return tokenizer.decode_token(prev_id, id, /*skip_special=*/false);
}

json prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                          const std::vector<TokenLogprobs>& lps, int32_t k, bool as_token_ids) {
  json out = json::array();
  int32_t prev = -1;
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    if (i == 0 || i - 1 >= lps.size()) {
      out.push_back(nullptr);
    } else {
      const TokenLogprobs& lp = lps[i - 1];
      json entry = json::object();
      auto put = [&](int32_t id, float logprob, int32_t rank) {
        entry[std::to_string(id)] = {
            {"logprob", finite_logprob(logprob)},
            {"rank", rank},
            {"decoded_token", logprob_token_text(tokenizer, prev, id, as_token_ids)}};
      };
      put(prompt_ids[i], lp.logprob, lp.rank);
      for (size_t j = 0; j < lp.top.size() && j < static_cast<size_t>(std::max(k, 0)); ++j)
        if (lp.top[j].first != prompt_ids[i])
          put(lp.top[j].first, lp.top[j].second, static_cast<int32_t>(j + 1));
      out.push_back(std::move(entry));
    }
    prev = prompt_ids[i];
  }
  return out;
}

std::string LogprobsBuilder::token_text(int32_t id) const {
  return logprob_token_text(*tokenizer_, prev_id_, id, as_token_ids_);
}

void LogprobsBuilder::add(int32_t id, const TokenLogprobs& lp) {
  const std::string text = token_text(id);
  if (kind_ == ApiKind::kChat) {
    json top = json::array();
    for (const auto& [alt, alt_lp] : lp.top) {
      const std::string t = token_text(alt);
      top.push_back({{"token", t}, {"logprob", finite_logprob(alt_lp)}, {"bytes", bytes_of(t)}});
    }
    content_.push_back({{"token", text},
                        {"logprob", finite_logprob(lp.logprob)},
                        {"bytes", bytes_of(text)},
                        {"top_logprobs", std::move(top)}});
  } else {
    json top = json::object();
    for (const auto& [alt, alt_lp] : lp.top) top[token_text(alt)] = finite_logprob(alt_lp);
    tokens_.push_back(text);
    token_logprobs_.push_back(finite_logprob(lp.logprob));
    top_.push_back(std::move(top));
    add_offset(prev_id_, id, skip_special_);
  }
  prev_id_ = id;
  ++count_;
}

void LogprobsBuilder::add_offset(int32_t prev, int32_t id, bool skip_special) {
  offsets_.push_back(text_offset_);
  // What the token adds to the text (not its token string: "<s>" or "token_id:1" may not be
  // there at all).
  text_offset_ += static_cast<int64_t>(tokenizer_->decode_token(prev, id, skip_special).size());
}

void LogprobsBuilder::add_prompt(std::span<const int32_t> prompt_ids,
                                 const std::vector<TokenLogprobs>& lps, int32_t k,
                                 bool echo_skips_special) {
  int32_t prev = -1;
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    const std::string text = logprob_token_text(*tokenizer_, prev, prompt_ids[i], as_token_ids_);
    tokens_.push_back(text);
    if (i >= 1 && i - 1 < lps.size()) {
      const TokenLogprobs& lp = lps[i - 1];
      json top = json::object();
      for (size_t j = 0; j < lp.top.size() && j < static_cast<size_t>(std::max(k, 0)); ++j)
        top[logprob_token_text(*tokenizer_, prev, lp.top[j].first, as_token_ids_)] =
            finite_logprob(lp.top[j].second);
      token_logprobs_.push_back(finite_logprob(lp.logprob));
      top_.push_back(std::move(top));
    } else {
      token_logprobs_.push_back(nullptr);
      top_.push_back(nullptr);
    }
    add_offset(prev, prompt_ids[i], echo_skips_special);
    prev = prompt_ids[i];
    ++count_;
  }
}

json LogprobsBuilder::take() {
  json out;
  if (kind_ == ApiKind::kChat) {
    out = {{"content", std::move(content_)}};
    content_ = json::array();
  } else {
    out = {{"tokens", std::move(tokens_)},
           {"token_logprobs", std::move(token_logprobs_)},
           {"top_logprobs", std::move(top_)},
           {"text_offset", std::move(offsets_)}};
    tokens_ = json::array();
    token_logprobs_ = json::array();
    top_ = json::array();
    offsets_ = json::array();
  }
  count_ = 0;
  return out;
}

json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json chunk = envelope(meta, chunk_object(meta.kind), json::array());
  chunk["usage"] = usage_json(usage);
  return chunk;
}

}  // namespace llmserve
