// The OpenAI endpoints on top of AsyncEngine: request -> tokens -> engine -> response body or
// SSE stream. http_server.cc owns the transport (routes, threads, errors) and calls in here.
//
// Tokenization runs on the HTTP thread (arrival_time is taken before it); model code never
// does: requests go to AsyncEngine::submit and the thread waits on the RequestStream.
#pragma once

#include <functional>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/async_engine.h"
#include "server/api_error.h"
#include "server/metrics.h"

namespace llmserve {

/// Polled while a request waits on the engine; true = give up (client gone, server stopping).
/// Called from the thread serving the request, including from a streaming content provider.
using CancelCheck = std::function<bool()>;

/// Writes `error` as the response (status + OpenAI error JSON).
void set_error_response(const ApiError& error, httplib::Response* res);

class OpenAIServing {
 public:
  /// `served_model_name` is the only accepted "model" value and the one reported back.
  OpenAIServing(AsyncEngine& engine, ServerMetrics& metrics, std::string served_model_name);

  /// POST /v1/completions.
  void completions(const httplib::Request& req, httplib::Response* res,
                   const CancelCheck& should_cancel);
  /// POST /v1/chat/completions (built-in chat template, see builtin_chat_template.h).
  void chat_completions(const httplib::Request& req, httplib::Response* res,
                        const CancelCheck& should_cancel);
  /// GET /v1/models body.
  nlohmann::json models() const;
  /// GET /metrics body.
  std::string metrics_page() const;

  const std::string& served_model_name() const { return served_model_name_; }

 private:
  struct Generation;  // one prepared request, see openai_serving.cc

  std::optional<ApiError> check_model(const std::optional<std::string>& model) const;
  std::optional<ApiError> finish_params(std::optional<int32_t> max_tokens,
                                        int32_t default_max_tokens, SamplingParams* params) const;
  void generate(Generation gen, httplib::Response* res, const CancelCheck& should_cancel);
  void respond_whole(Generation gen, std::shared_ptr<RequestStream> stream,
                     httplib::Response* res, const CancelCheck& should_cancel);
  void respond_stream(Generation gen, std::shared_ptr<RequestStream> stream,
                      httplib::Response* res, const CancelCheck& should_cancel);

  AsyncEngine& engine_;
  ServerMetrics& metrics_;
  std::string served_model_name_;
  int64_t created_ = 0;  // server start, Unix seconds (the model's "created")
};

}  // namespace llmserve
