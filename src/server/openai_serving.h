// The OpenAI endpoints on top of AsyncEngine: request -> tokens -> engine -> response body or
// SSE stream. http_server.cc owns the transport (routes, threads, errors) and calls in here.
//
// Tokenization runs on the HTTP thread (arrival_time is taken before it); model code never
// does: requests go to AsyncEngine::submit and the thread waits on the RequestStream.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/async_engine.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/engine_bridge.h"
#include "chat_template/chat_template.h"
#include "server/metrics.h"
#include "server/protocol.h"

namespace llmserve {

/// Polled while a request waits on the engine; true = give up (client gone, server stopping).
/// Called from the thread serving the request, including from a streaming content provider.
using CancelCheck = std::function<bool()>;

/// Writes `error` as the response (status + OpenAI error JSON).
void set_error_response(const ApiError& error, httplib::Response* res);

class OpenAIServing {
 public:
  /// `served_model_name` is the only accepted "model" value and the one reported back.
  /// `chat_template` renders chat messages (see resolve_chat_template).
  /// `ignore_unknown_fields` (serve --ignore-unknown-fields): request fields in no schema we
  /// know are ignored (a warning per name, once; the names in the X-LLMServe-Ignored-Fields
  /// header) instead of being a 400 (request_policy.h).
  /// `chat_output`: --tool-call-parser / --reasoning-parser (names checked by the caller);
  /// without --tool-call-parser the format is detected from the chat template.
  OpenAIServing(AsyncEngine& engine, ServerMetrics& metrics, std::string served_model_name,
                ChatTemplate chat_template, bool ignore_unknown_fields = false,
                ChatOutputConfig chat_output = {});

  /// POST /v1/completions.
  void completions(const httplib::Request& req, httplib::Response* res,
                   const CancelCheck& should_cancel);
  /// POST /v1/chat/completions: messages rendered with the chat template, tokenized with
  /// special tokens parsed and none added (vLLM), then generated like a completion.
  void chat_completions(const httplib::Request& req, httplib::Response* res,
                        const CancelCheck& should_cancel);
  /// POST /tokenize (vLLM): {"prompt": text, "add_special_tokens": true} or {"messages": [...],
  /// "add_generation_prompt", "continue_final_message", "chat_template_kwargs", "tools",
  /// "add_special_tokens": false}; "return_token_strs". Responds {"count", "max_model_len",
  /// "tokens", "token_strs"}.
  void tokenize(const httplib::Request& req, httplib::Response* res);
  /// POST /detokenize (vLLM): {"tokens": [ids]} -> {"prompt": text}. Ids outside the vocabulary
  /// are a 400.
  void detokenize(const httplib::Request& req, httplib::Response* res);
  /// GET /v1/models body.
  nlohmann::json models() const;
  /// GET /v1/models/{id} (OpenAI's retrieve): the model card, or a 404 naming `id`.
  void model(const std::string& id, httplib::Response* res) const;
  /// GET /metrics body.
  std::string metrics_page() const;

  const std::string& served_model_name() const { return served_model_name_; }

 private:
  struct Generation;  // one prepared request, see openai_serving.cc

  std::optional<ApiError> check_model(const std::optional<std::string>& model) const;
  /// check_model on an optional "model" field of a /tokenize or /detokenize body (absent or
  /// null = the served model; not a string = a 400 naming "model").
  std::optional<ApiError> check_model_field(const nlohmann::json& body) const;
  /// The request policy for `endpoint` (request_policy.h); with --ignore-unknown-fields the
  /// ignored names go to the log (once per name) and the X-LLMServe-Ignored-Fields header.
  std::optional<ApiError> check_fields(const nlohmann::json& body, uint8_t endpoint,
                                       httplib::Response* res);
  nlohmann::json model_card() const;
  /// Renders a validated chat body (`messages`) with the chat template and tokenizes it.
  /// `rendered` (if not null) receives the rendered text.
  std::optional<ApiError> chat_prompt_ids(const std::string& raw_body,
                                          const std::vector<ChatMessage>& messages,
                                          bool add_special, std::vector<int32_t>* ids,
                                          std::string* rendered = nullptr) const;
  /// Structured outputs and tool calls (openai_serving_tools.cc): reads the request's
  /// constraint fields and tool_choice from `raw_body` (key order kept), compiles the
  /// constraint (cached) into gen->request.grammar, and for chat (`rendered_prompt` not null)
  /// sets gen->parsing and the grammar's start after the reasoning span. Errors: a 400 naming
  /// the field (a refused schema keyword included).
  std::optional<ApiError> prepare_output(const std::string& raw_body,
                                         const std::string* rendered_prompt,
                                         Generation* gen) const;
  /// Default max_tokens when a request sends none (both endpoints): the rest of the context
  /// window after a prompt of prompt_len tokens, capped by the KV pool, at least 1.
  int32_t context_room(size_t prompt_len) const;
  /// Sets params->max_tokens (options.max_tokens, else context_room) and checks the request
  /// as the engine would, but with the offending field as `param`: SamplingParams::validate,
  /// top_k (when sent) <= vocabulary size, prompt ids in the vocabulary and non-empty,
  /// prompt < max_model_len tokens (one generated token must fit), prompt + max_tokens <=
  /// max_model_len and within the KV pool. `prompt_param` names the prompt's field
  /// ("prompt" or "messages"). The engine's own check still runs at submit.
  std::optional<ApiError> finish_params(const GenerationOptions& options,
                                        const std::vector<int32_t>& prompt_ids,
                                        const char* prompt_param, SamplingParams* params) const;
  /// n, stream, usage and logprobs output options; user ids to the access-log record.
  static void set_output_options(const GenerationOptions& options, Generation* gen);
  void generate(Generation gen, httplib::Response* res, const CancelCheck& should_cancel);
  /// One InflightRequest per sample ("n"), in choice-index order.
  using InflightList = std::vector<std::unique_ptr<InflightRequest>>;
  void respond_whole(Generation gen, InflightList inflight, httplib::Response* res,
                     const CancelCheck& should_cancel);
  void respond_stream(Generation gen, InflightList inflight, httplib::Response* res,
                      const CancelCheck& should_cancel);

  AsyncEngine& engine_;
  ServerMetrics& metrics_;
  std::string served_model_name_;
  ChatTemplate chat_template_;
  int64_t created_ = 0;  // server start, Unix seconds (the model's "created")
  bool ignore_unknown_fields_ = false;
  ChatOutputConfig chat_output_;
  /// The tool-call format of tool_choice "auto": --tool-call-parser, else the one the chat
  /// template's text shows (detect_tool_parser), else "" (then "auto" is a 400).
  std::string tool_parser_;
  std::mutex warned_mu_;
  std::set<std::string> warned_fields_;  // unknown field names already logged
};

}  // namespace llmserve
