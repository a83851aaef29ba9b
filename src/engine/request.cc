#include "engine/request.h"

namespace llmserve {

Request::Request(int64_t id, EngineRequest req, const Tokenizer& tokenizer, uint64_t default_seed)
    : request_id(id),
      token_ids(std::move(req.prompt_token_ids)),
      num_prompt_tokens(static_cast<int32_t>(token_ids.size())),
      params(std::move(req.params)),
      rng(params.seed ? *params.seed
                      : default_seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(id))),
      detokenizer(tokenizer, token_ids.empty() ? -1 : token_ids.back(),
                  params.skip_special_tokens) {
  timing.arrival_time = req.arrival_time;
  priority = req.priority;
  cache_salt = std::move(req.cache_salt);
  use_prefix_cache = req.use_prefix_cache;
  if (req.grammar)
    grammar = std::make_unique<GrammarState>(std::move(req.grammar),
                                             std::move(req.grammar_start_after_ids),
                                             std::move(req.grammar_reasoning_open_ids));
}

}  // namespace llmserve

namespace llmserve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kNone: break;
  }
  return "";
}

}  // namespace llmserve
