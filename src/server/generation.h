// OpenAIServing's internal record of one prepared request (shared by openai_serving.cc and
// openai_serving_tools.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "server/chat_output.h"
#include "server/openai_serving.h"
#include "server/responses.h"

namespace llmserve {

/// One request ready for the engine, plus what its response needs.
struct OpenAIServing::Generation {
  ResponseMeta meta;
  EngineRequest request;
  int32_t num_prompt_tokens = 0;
  int32_t n = 1;  // independent samples (choices)
  bool logprobs = false;        // request.params.logprobs >= 0
  int32_t last_prompt_token = -1;  // detokenization context of the first generated token
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;  // stream_options.continuous_usage_stats
  /// "echo": prepended to every choice's text (streaming: to its first chunk).
  std::optional<std::string> echo_text;
  bool echo_logprobs = false;  // completions echo + logprobs: the prompt's entries come first
  /// echo_text holds no special token: the prompt string as sent (the BOS the server adds is
  /// not in it), or the prompt ids decoded with skip_special_tokens.
  bool echo_skips_special = true;
  /// The prompt_logprobs field (vLLM's shape in the response), when sent.
  std::optional<int32_t> prompt_logprobs;
  bool tokens_as_ids = false;  // return_tokens_as_token_ids
  bool token_ids = false;      // return_token_ids
  /// Chat: reasoning / tool-call parsing of every choice's text (server/chat_output.h).
  ChatParsing parsing;
};

}  // namespace llmserve
