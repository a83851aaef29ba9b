// OpenAI response bodies: full (non-streaming) responses and streamed chunks for
// /v1/completions ("text_completion") and /v1/chat/completions ("chat.completion[.chunk]").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_output.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

/// Which endpoint a response belongs to; decides the JSON shapes.
enum class ApiKind { kCompletion, kChat };

/// Identity of one response, repeated in every chunk of a stream.
struct ResponseMeta {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;        // "cmpl-<hex>" or "chatcmpl-<hex>"
  int64_t created = 0;   // Unix time, seconds
  std::string model;     // served model name
};

/// Token counts reported as "usage".
struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  /// Prompt tokens served from the prefix cache (the first sample's, for n > 1):
  /// usage.prompt_tokens_details.cached_tokens, OpenAI's field.
  int32_t cached_tokens = 0;
};

/// The response id: "cmpl-" (completion) or "chatcmpl-" (chat) + `request_id` (the HTTP
/// request's X-Request-Id, as vLLM does), or + 32 random hex digits when it is empty.
std::string make_response_id(ApiKind kind, std::string_view request_id = {});
/// Seconds since the Unix epoch (the "created" field).
int64_t unix_time_now();

/// "stop" / "length" / "abort", or JSON null for FinishReason::kNone (still running).
nlohmann::json finish_reason_json(FinishReason reason);
/// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json usage_json(const Usage& usage);

/// One finished choice of a non-streaming response.
struct ChoiceResult {
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  nlohmann::json logprobs;  // null unless requested (see LogprobsBuilder)
  /// vLLM's prompt_logprobs (prompt_logprobs_json) when requested, else discarded (no key).
  nlohmann::json prompt_logprobs = nlohmann::json(nlohmann::json::value_t::discarded);
  /// vLLM's return_token_ids: the generated and the prompt token ids, else discarded.
  nlohmann::json token_ids = nlohmann::json(nlohmann::json::value_t::discarded);
  nlohmann::json prompt_token_ids = nlohmann::json(nlohmann::json::value_t::discarded);
  /// Chat with output parsing (server/chat_output.h): `text` is the message content; the
  /// reasoning span goes to "reasoning_content" (and vLLM's "reasoning"); `tool_calls` (an
  /// array of OpenAI tool calls) makes "content" null when text is empty.
  bool parsed = false;
  bool reasoning = false;  // a reasoning parser ran: reasoning_content is sent (null if empty)
  std::string reasoning_content;
  nlohmann::json tool_calls = nlohmann::json::array();
};

/// The token string of `id` after `prev_id` in logprobs: its detokenized text (special tokens
/// as their text), or "token_id:<id>" with vLLM's return_tokens_as_token_ids.
std::string logprob_token_text(const Tokenizer& tokenizer, int32_t prev_id, int32_t id,
                               bool as_token_ids);

/// vLLM's prompt_logprobs: one entry per prompt token, the first null, entry i an object
/// {"<token id>": {"logprob", "rank", "decoded_token"}} holding prompt token i (with its rank:
/// how many tokens are at least as likely) and the `k` most likely tokens at position i (ranks
/// 1..k). `lps` has one entry per prompt token from the second on (missing ones are null).
nlohmann::json prompt_logprobs_json(const Tokenizer& tokenizer,
                                    std::span<const int32_t> prompt_ids,
                                    const std::vector<TokenLogprobs>& lps, int32_t k,
                                    bool as_token_ids);

/// Builds one choice's "logprobs" JSON token by token, in OpenAI's shapes: chat
/// {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]},
/// completions {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
/// Token strings are the detokenized text of each token after its predecessor (special tokens
/// as their text); -inf logprobs are written as -9999.0 (vLLM), JSON having no infinity.
/// text_offset indexes into the choice's text (bytes): each token's start there, a token whose
/// text is not in it (a special token skipped, the BOS the server adds to a prompt string)
/// taking the offset where it would sit, with length 0.
class LogprobsBuilder {
 public:
  /// `as_token_ids`: vLLM's return_tokens_as_token_ids (tokens written "token_id:<id>").
  /// `skip_special`: the generated text skips special tokens (skip_special_tokens).
  LogprobsBuilder(ApiKind kind, const Tokenizer* tokenizer, int32_t prev_id,
                  bool as_token_ids = false, bool skip_special = true)
      : kind_(kind), tokenizer_(tokenizer), prev_id_(prev_id), as_token_ids_(as_token_ids),
        skip_special_(skip_special) {}
  void add(int32_t id, const TokenLogprobs& lp);
  /// Completions echo + logprobs: the prompt's tokens first, the first one with null logprob
  /// and top_logprobs (OpenAI/vLLM), each with at most `k` alternatives. `lps` has one entry
  /// per prompt token from the second on (RequestOutput::prompt_logprobs; missing entries,
  /// e.g. after an abort, are null too). `echo_skips_special`: the echoed prompt text holds
  /// no special token (a prompt string as sent, or ids decoded with skip_special_tokens).
  void add_prompt(std::span<const int32_t> prompt_ids, const std::vector<TokenLogprobs>& lps,
                  int32_t k, bool echo_skips_special = true);
  bool empty() const { return count_ == 0; }
  /// The JSON of the tokens added since the last take() (empty lists when none).
  nlohmann::json take();

 private:
  std::string token_text(int32_t id) const;
  /// Records the offset of token `id` (after `prev`) and advances past its text in the
  /// choice's text (special tokens skipped when `skip_special`).
  void add_offset(int32_t prev, int32_t id, bool skip_special);
  ApiKind kind_;
  const Tokenizer* tokenizer_;
  int32_t prev_id_;
  bool as_token_ids_;
  bool skip_special_;
  int32_t count_ = 0;
  int64_t text_offset_ = 0;
  nlohmann::json content_ = nlohmann::json::array();                 // chat
  nlohmann::json tokens_ = nlohmann::json::array(), token_logprobs_ = nlohmann::json::array(),
                 top_ = nlohmann::json::array(), offsets_ = nlohmann::json::array();  // completions
};

/// The non-streaming body: one choice per sample (index = position), plus usage.
nlohmann::json full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                             const Usage& usage);
/// The same with one choice holding the whole text.
nlohmann::json full_response(const ResponseMeta& meta, const std::string& text,
                             FinishReason finish_reason, const Usage& usage);

/// The chunk that opens a stream for choice `index`: chat sends delta {"role": "assistant",
/// "content": ""}; completions have none (nullopt). include_usage adds "usage": null, as
/// OpenAI does, or the running totals `*running_usage` when given (vLLM's
/// stream_options.continuous_usage_stats).
std::optional<nlohmann::json> opening_chunk(const ResponseMeta& meta, bool include_usage,
                                            int32_t index = 0,
                                            const Usage* running_usage = nullptr);

/// One streamed piece of text of choice `index`. finish_reason is null unless
/// `finish_reason` != kNone (the choice's last chunk). Chat puts the text in delta.content
/// (omitted when empty). Usage as in opening_chunk.
/// `chat_delta` (chat only, when not null) is the whole delta object instead of {"content":
/// text} (chat_delta_json: reasoning and tool-call deltas).
nlohmann::json delta_chunk(const ResponseMeta& meta, const std::string& text,
                           FinishReason finish_reason, bool include_usage, int32_t index = 0,
                           nlohmann::json logprobs = nullptr,
                           const Usage* running_usage = nullptr,
                           nlohmann::json chat_delta = nullptr);

/// The usage-only chunk sent last when stream_options.include_usage: "choices": [] + usage.
nlohmann::json usage_chunk(const ResponseMeta& meta, const Usage& usage);

}  // namespace llmserve
