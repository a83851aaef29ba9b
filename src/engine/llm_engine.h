// LLMEngine: the synchronous engine core. add_request() queues a tokenized request; step()
// runs one iteration (schedule -> one batched forward pass -> sample -> update) and returns
// what each touched request produced. Single-threaded: call from one thread only (AsyncEngine
// wraps it in an engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/engine_config.h"
#include "config/model_config.h"
#include "engine/kv_snapshot.h"
#include "engine/request_output.h"

namespace llmserve {

class Tokenizer;

class LLMEngine {
 public:
  /// Loads the model and tokenizer, sizes and allocates the KV block pool once.
  /// Errors: bad config (InvalidArgument), missing/corrupt model or tokenizer files (NotFound /
  /// DataLoss, naming the file), KV budget smaller than one sequence (ResourceExhausted).
  static Expected<std::unique_ptr<LLMEngine>> create(const EngineConfig& config);
  virtual ~LLMEngine() = default;

  /// Validates and queues a request under the caller-chosen unique id.
  /// Errors (InvalidArgument): empty prompt, token id out of range, invalid sampling params,
  /// prompt_len > max_model_len, prompt_len + max_tokens > max_model_len, or more KV blocks
  /// than the whole pool holds. The message names the numbers.
  virtual Status add_request(int64_t request_id, EngineRequest request) = 0;
  /// Same checks as add_request without queueing.
  virtual Status check_request(const EngineRequest& request) const = 0;

  /// Aborts a waiting or running request; its blocks are freed immediately and the next
  /// step() reports it finished with FinishReason::kAbort. Unknown ids are ignored.
  virtual void abort_request(int64_t request_id) = 0;

  /// One engine iteration. Returns one RequestOutput per request that produced tokens, text
  /// or finished during this step (aborts included).
  virtual std::vector<RequestOutput> step() = 0;

  virtual bool has_unfinished_requests() const = 0;
  /// What the most recent step() scheduled (empty record before the first step; engines
  /// that do not record steps, such as test fakes, return an empty record).
  virtual const StepRecord& last_step() const {
    static const StepRecord kEmpty;
    return kEmpty;
  }
  virtual EngineStats stats() const = 0;
  /// The KV block pool now (engine/kv_snapshot.h), for the dashboard; nullopt from engines
  /// without a paged cache (test fakes). Engine thread only, between steps.
  virtual std::optional<KvSnapshot> kv_snapshot() const { return std::nullopt; }

  virtual const ModelConfig& model_config() const = 0;
  virtual const EngineConfig& config() const = 0;  // with defaults resolved
  virtual const Tokenizer& tokenizer() const = 0;
  /// Effective max_model_len (tokens) after defaults and overrides.
  virtual int32_t max_model_len() const = 0;
  /// KV blocks a request of `total_tokens` tokens (prompt + max_tokens) holds at most at once:
  /// all of them, or, with a sliding window in every layer, the window plus one step of up to
  /// --max-num-batched-tokens (KVCacheManager::blocks_held; the scheduler frees the rest).
  virtual int64_t kv_blocks_needed(int64_t total_tokens) const {
    const int64_t bs = config().cache.block_size;
    return bs > 0 ? (total_tokens + bs - 1) / bs : 0;
  }
  virtual const std::string& served_model_name() const = 0;
  /// Sampling parameters a request starts from before its own fields apply: the generation
  /// config's temperature / top_p / top_k / min_p / repetition_penalty (the checkpoint's
  /// generation_config.json, or --generation-config's; none under --generation-config vllm),
  /// else SamplingParams' defaults.
  virtual SamplingParams default_sampling_params() const { return {}; }
  /// The generation config's max_new_tokens (vLLM: the default max_tokens of requests that
  /// send none, capped by the context's room), or nullopt.
  virtual std::optional<int32_t> default_max_tokens() const { return std::nullopt; }
  /// Whether the generation config sets a default temperature (default_sampling_params()'s
  /// is then that one, not SamplingParams' 1.0).
  virtual bool has_default_temperature() const { return false; }
  /// The model's Jinja chat template (GGUF tokenizer.chat_template, HF chat_template.jinja or
  /// tokenizer_config.json; --tokenizer's first), or nullopt when it ships none.
  virtual const std::optional<std::string>& chat_template() const {
    static const std::optional<std::string> none;
    return none;
  }
};

}  // namespace llmserve
