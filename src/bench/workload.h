// Benchmark workloads: which prompts are sent, how many tokens each must generate, and when
// each request arrives. Mirrors vLLM's `bench serve` (random dataset, gamma arrivals); the
// shared-prefix dataset is in prefix_repetition.h, multi-turn conversations in multi_turn.h.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/status.h"

namespace llmserve {

class Tokenizer;

namespace bench {

/// Upper bound for --num-prompts (each request holds its token ids in memory up front).
inline constexpr int64_t kMaxNumPrompts = 10000000;

/// One request of a workload.
struct BenchRequest {
  std::vector<int32_t> prompt_token_ids;  // BOS included; empty when only `prompt_text` is known
  std::string prompt_text;                // file datasets: the text (bench serve sends it)
  int32_t prompt_len = 0;                 // tokens (0 = unknown until the server reports it)
  int32_t output_len = 0;                 // tokens to generate (max_tokens, ignore_eos)
  double arrival_offset_s = 0;            // seconds after the benchmark start
  /// A follow-up turn (multi_turn.h): the index of the request whose reply must have finished
  /// before this one is sent (-1: none; the request is sent at arrival_offset_s, which a
  /// follow-up ignores). A follow-up's prompt is built when it is sent: the earlier request's
  /// whole prompt, then its reply, then this request's own prompt_token_ids (in-process) or
  /// prompt_text (bench serve), the new user turn.
  int64_t follows = -1;
  int32_t conversation = -1;  // multi-turn: conversation index (-1 outside multi-turn)
  int32_t turn = -1;          // multi-turn: 0-based turn index (-1 outside multi-turn)
};

/// `--dataset random`: vLLM's RandomDataset.
struct RandomDatasetOptions {
  int32_t num_prompts = 100;
  int32_t input_len = 128;    // tokens, BOS included
  int32_t output_len = 128;   // tokens
  double range_ratio = 0.0;   // lengths uniform in [L*(1-R), L*(1+R)], 0 <= R < 1
  uint64_t seed = 0;
};

/// What the random dataset needs to know of the vocabulary.
struct VocabInfo {
  int32_t vocab_size = 512;
  int32_t bos_id = 1;                   // -1: no BOS
  std::vector<int32_t> special_ids;     // never sampled (BOS, EOS, unk, control tokens)
};

/// The ids random prompts are drawn from: 0..vocab_size-1 minus the special ids and BOS,
/// ascending.
std::vector<int32_t> sampleable_ids(const VocabInfo& vocab);

/// Vocabulary facts from a tokenizer: BOS/EOS plus control-looking pieces ("<s>", "<unk>",
/// anything "<...>" that is not a "<0xNN>" byte piece) are special.
VocabInfo vocab_info(const Tokenizer& tokenizer);

/// Inclusive integer bounds [floor(L*(1-R)), ceil(L*(1+R))], clamped to >= `min_len`.
struct LengthRange {
  int32_t lo = 0, hi = 0;
};
LengthRange length_range(int32_t len, double range_ratio, int32_t min_len);

/// make_random_dataset's checks of `options` alone (no vocabulary needed), e.g. before a
/// model loads: num_prompts in [1, kMaxNumPrompts], lengths >= 1, range_ratio in [0, 1).
Status check_random_options(const RandomDatasetOptions& options);

/// Random prompts: BOS first, then uniform ids from the vocabulary minus the special ids.
/// Deterministic in `options.seed`. Arrival offsets are left at 0.
/// Errors (InvalidArgument): num_prompts < 1, lengths < 1, range_ratio outside [0, 1),
/// no sampleable token ids.
Expected<std::vector<BenchRequest>> make_random_dataset(const RandomDatasetOptions& options,
                                                        const VocabInfo& vocab);

/// A dataset file: JSONL with one {"prompt": "...", "output_len": N} per line, or one JSON
/// list of such objects. `tokenizer` (may be null) fills prompt_token_ids (BOS added) and
/// prompt_len. `num_prompts` > 0 keeps the first num_prompts entries, cycling through the file
/// when it has fewer. Errors: NotFound, InvalidArgument naming the line and field.
Expected<std::vector<BenchRequest>> load_dataset_file(const std::string& path,
                                                      const Tokenizer* tokenizer,
                                                      int32_t num_prompts);

/// Arrival schedule.
struct ArrivalOptions {
  /// Requests per second; infinity = every request at t = 0.
  double request_rate = std::numeric_limits<double>::infinity();
  /// Gamma shape of the inter-arrival times (1 = Poisson; < 1 burstier, > 1 more regular).
  double burstiness = 1.0;
  uint64_t seed = 0;
};

/// Offsets in seconds, non-decreasing, the first at 0: gamma inter-arrivals with shape
/// `burstiness` and mean 1/request_rate (vLLM's get_request). Errors: rate <= 0, burstiness
/// <= 0, n < 0, a rate that spreads the n arrivals over more than a week (a typo).
Expected<std::vector<double>> make_arrival_offsets(int32_t n, const ArrivalOptions& options);

/// make_arrival_offsets' checks that need no request count: rate > 0 (or inf), burstiness
/// positive and finite.
Status check_arrival_options(const ArrivalOptions& options);

/// Sets requests[i].arrival_offset_s from make_arrival_offsets.
Status assign_arrivals(std::vector<BenchRequest>& requests, const ArrivalOptions& options);

}  // namespace bench
}  // namespace llmserve
