// `--dataset prefix_repetition`: vLLM's PrefixRepetitionRandomDataset, the workload of
// automatic prefix caching. A few random prefixes, each shared by a group of requests that
// append their own random suffix, so every request after the first of its group finds the
// prefix's full KV blocks cached.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/workload.h"
#include "common/status.h"

namespace llmserve::bench {

/// vLLM's flags and defaults (--prefix-repetition-prefix-len 256, -suffix-len 256,
/// -num-prefixes 10, -output-len 128).
struct PrefixRepetitionOptions {
  int32_t num_prompts = 100;
  int32_t prefix_len = 256;   // shared tokens, BOS included (as --input-len counts it)
  int32_t suffix_len = 256;   // tokens after the prefix, random per request (0 = none)
  int32_t num_prefixes = 10;  // distinct prefixes (groups)
  int32_t output_len = 128;   // tokens to generate per request
  uint64_t seed = 0;
};

/// Prompts of prefix_len + suffix_len tokens: request i belongs to group g; the requests of a
/// group share exactly their first prefix_len tokens (BOS, then the group's random ids), and
/// differ from each other at token prefix_len (the first suffix token is drawn without
/// replacement within the group while the vocabulary allows it). Different groups share only
/// the BOS (their first random token is distinct likewise). Groups take num_prompts /
/// num_prefixes requests each, the first num_prompts % num_prefixes groups one more (vLLM
/// drops the remainder; here every request asked for is sent), and the requests are shuffled
/// (vLLM's default order). Deterministic in `seed`; arrival offsets are left at 0.
/// The option checks of make_prefix_repetition_dataset (`bos`: the vocabulary has a BOS), for
/// a command line to refuse bad values before loading a model.
Status check_prefix_repetition_options(const PrefixRepetitionOptions& options, bool bos);

/// `groups` (may be null) receives each returned request's group (prefix index).
/// Errors (InvalidArgument, naming the flag): num_prompts outside [1, kMaxNumPrompts],
/// prefix_len < 1 (< 2 with a BOS: the prefix must hold a random token), suffix_len < 0,
/// num_prefixes < 1 or > num_prompts (vLLM's rule), output_len < 1, no sampleable token ids.
Expected<std::vector<BenchRequest>> make_prefix_repetition_dataset(
    const PrefixRepetitionOptions& options, const VocabInfo& vocab,
    std::vector<int32_t>* groups = nullptr);

}  // namespace llmserve::bench
