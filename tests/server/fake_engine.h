// A deterministic stand-in for LLMEngine, so the HTTP server can be tested without a model.
//
// FakeTokenizer: one token per byte, id = byte + 3; 0 = <unk>, 1 = BOS, 2 = EOS.
// FakeEngine generation rule (tests recompute it independently, see expected_fake_text):
//   the k-th generated token (k = 0, 1, ...) is the letter 'a' + (S + k) % 26, where S is the
//   sum of the prompt token ids; so the output of a prompt is a run of consecutive letters.
//   - max_tokens, stop strings (earliest match; text before it is returned), stop_token_ids
//     (the token ends generation, its text is not returned) and abort are honoured;
//   - a prompt whose last token is '.' makes the fake emit EOS as generated token number
//     options.eos_after (1-based) unless ignore_eos.
// Every step generates one token for each running request (up to max_num_seqs run at once,
// the rest wait). KV "blocks" are counted (ceil(tokens / block_size) per running request) so
// tests can check that aborted requests give them back.
// Timestamps come from the wall clock, or, with FakeEngineOptions::timing, from a script
// (exact values for latency-metric tests).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/llm_engine.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::testing {

class FakeTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kVocabSize = 259;  // 3 specials + 256 bytes

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  /// parse_special: "<s>" / "</s>" in the text become BOS / EOS; add_special prepends BOS
  /// unless the ids already start with it.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override;
  std::string decode_token(int32_t prev_id, int32_t id) const override;
  int32_t vocab_size() const override { return kVocabSize; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  std::string piece(int32_t id) const override {
    return id == 1 ? "<s>" : id == 2 ? "</s>" : decode_token(-1, id);
  }

  static int32_t byte_token(char c) { return static_cast<unsigned char>(c) + 3; }
};

/// A scripted engine clock. Each request's timestamps are fixed by the script instead of read
/// from the wall clock, so latency metrics are exact (use binary fractions for exact sums).
/// `queue_s` and `prefill_s` are indexed by the request's add order (0, 1, ...), `itl_s` by
/// the token (gap k is between output tokens k and k + 1); each list wraps around.
struct FakeTimingScript {
  double arrival_time = 1024;       // every request's arrival_time (replaces the server's)
  std::vector<double> queue_s{0};   // first_scheduled_time = arrival_time + queue_s
  std::vector<double> prefill_s{0}; // first_token_time = first_scheduled_time + prefill_s
  std::vector<double> itl_s{0};     // next token time = previous token time + itl_s
  double finish_s = 0;              // finished_time = last token time + finish_s
  int32_t num_preemptions = 0;      // num_preemptions reported from a request's first token on
};

struct FakeEngineOptions {
  std::string served_model_name = "fake-model";
  int32_t max_model_len = 256;
  int32_t block_size = 4;
  int32_t num_blocks = 1 << 16;
  int32_t max_num_seqs = 256;
  int32_t eos_after = 4;
  /// Simulated model time per step (so that clients can disconnect mid-generation).
  std::chrono::microseconds step_delay{0};
  /// Scripted timestamps; unset = wall clock.
  std::optional<FakeTimingScript> timing;
};

class FakeEngine : public LLMEngine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {});

  Status add_request(int64_t request_id, EngineRequest request) override;
  Status check_request(const EngineRequest& request) const override;
  void abort_request(int64_t request_id) override;
  std::vector<RequestOutput> step() override;
  bool has_unfinished_requests() const override;
  const StepRecord& last_step() const override { return last_step_; }
  EngineStats stats() const override;

  const ModelConfig& model_config() const override { return model_config_; }
  const EngineConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  int32_t max_model_len() const override { return options_.max_model_len; }
  const std::string& served_model_name() const override { return options_.served_model_name; }

  // Observers for tests; safe from any thread.
  int32_t blocks_in_use() const { return blocks_in_use_.load(); }
  int64_t num_aborted() const { return num_aborted_.load(); }
  int64_t num_added() const { return num_added_.load(); }
  /// The most recently added request (params and prompt as the server built them).
  EngineRequest last_request() const;

 private:
  struct Seq {
    int64_t id = 0;
    EngineRequest req;
    int32_t prompt_sum = 0;
    int32_t num_generated = 0;
    int32_t num_blocks = 0;
    std::string text;        // generated text so far (stop strings not yet cut)
    size_t num_emitted = 0;  // bytes of `text` already sent
    int64_t ordinal = 0;     // add order, 0-based (indexes FakeTimingScript lists)
    RequestTiming timing;
  };

  bool admit(Seq& seq);
  /// Generates one token; returns true when the sequence finished.
  bool advance(Seq& seq, RequestOutput* out);
  void release(Seq& seq);
  int32_t blocks_for(int64_t num_tokens) const;

  FakeEngineOptions options_;
  FakeTokenizer tokenizer_;
  ModelConfig model_config_;
  EngineConfig config_;

  std::deque<Seq> waiting_;
  std::vector<Seq> running_;
  std::vector<RequestOutput> pending_aborts_;  // reported by the next step()
  int32_t num_free_blocks_;
  EngineStats totals_;
  StepRecord last_step_;

  std::atomic<int32_t> blocks_in_use_{0};
  std::atomic<int64_t> num_aborted_{0};
  std::atomic<int64_t> num_added_{0};
  mutable std::mutex last_mu_;
  EngineRequest last_request_;
};

}  // namespace llmserve::testing
