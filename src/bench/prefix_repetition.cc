#include "bench/prefix_repetition.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace llmserve::bench {

Status check_prefix_repetition_options(const PrefixRepetitionOptions& o, bool bos) {
  if (o.num_prompts < 1 || o.num_prompts > kMaxNumPrompts)
    return InvalidArgument("--num-prompts must be in [1, {}], got {}", kMaxNumPrompts,
                           o.num_prompts);
  const int32_t min_prefix = bos ? 2 : 1;
  if (o.prefix_len < min_prefix)
    return InvalidArgument("--prefix-repetition-prefix-len must be >= {}{}, got {}", min_prefix,
                           bos ? " (BOS and at least one random token)" : "", o.prefix_len);
  if (o.suffix_len < 0)
    return InvalidArgument("--prefix-repetition-suffix-len must be >= 0, got {}", o.suffix_len);
  if (o.num_prefixes < 1)
    return InvalidArgument("--prefix-repetition-num-prefixes must be >= 1, got {}",
                           o.num_prefixes);
  if (o.num_prefixes > o.num_prompts)
    return InvalidArgument("--prefix-repetition-num-prefixes {} is more than --num-prompts {} "
                           "(every prefix needs a request)", o.num_prefixes, o.num_prompts);
  if (o.output_len < 1)
    return InvalidArgument("--prefix-repetition-output-len must be >= 1, got {}", o.output_len);
  return Status::Ok();
}

namespace {

/// `n` ids from `ids`: distinct as long as `ids` has enough (a partial Fisher-Yates shuffle),
/// the rest drawn with replacement.
std::vector<int32_t> distinct_draws(std::mt19937_64& rng, const std::vector<int32_t>& ids,
                                    size_t n) {
  std::vector<int32_t> pool = ids, out;
  out.reserve(n);
  const size_t distinct = std::min(n, pool.size());
  for (size_t i = 0; i < distinct; ++i) {
    std::uniform_int_distribution<size_t> pick(i, pool.size() - 1);
    std::swap(pool[i], pool[pick(rng)]);
    out.push_back(pool[i]);
  }
  std::uniform_int_distribution<size_t> any(0, ids.size() - 1);
  while (out.size() < n) out.push_back(ids[any(rng)]);
  return out;
}

/// Appends uniform random ids from `ids` until `v` holds `len` tokens.
void fill_random(std::mt19937_64& rng, const std::vector<int32_t>& ids, int32_t len,
                 std::vector<int32_t>& v) {
  std::uniform_int_distribution<size_t> any(0, ids.size() - 1);
  while (static_cast<int32_t>(v.size()) < len) v.push_back(ids[any(rng)]);
}

}  // namespace

Expected<std::vector<BenchRequest>> make_prefix_repetition_dataset(
    const PrefixRepetitionOptions& o, const VocabInfo& vocab, std::vector<int32_t>* groups) {
  const bool bos = vocab.bos_id >= 0;
  LLMS_RETURN_IF_ERROR(check_prefix_repetition_options(o, bos));
  const std::vector<int32_t> ids = sampleable_ids(vocab);
  if (ids.empty()) return InvalidArgument("vocabulary of {} has no sampleable token", vocab.vocab_size);
  std::mt19937_64 rng(o.seed);
  const std::vector<int32_t> first_of_prefix =
      distinct_draws(rng, ids, static_cast<size_t>(o.num_prefixes));
  std::vector<BenchRequest> reqs;
  std::vector<int32_t> group_of;
  reqs.reserve(static_cast<size_t>(o.num_prompts));
  const int32_t base = o.num_prompts / o.num_prefixes, extra = o.num_prompts % o.num_prefixes;
  for (int32_t g = 0; g < o.num_prefixes; ++g) {
    std::vector<int32_t> prefix;
    prefix.reserve(static_cast<size_t>(o.prefix_len));
    if (bos) prefix.push_back(vocab.bos_id);
    prefix.push_back(first_of_prefix[static_cast<size_t>(g)]);
    fill_random(rng, ids, o.prefix_len, prefix);
    const int32_t size = base + (g < extra ? 1 : 0);
    const std::vector<int32_t> first_of_suffix =
        o.suffix_len > 0 ? distinct_draws(rng, ids, static_cast<size_t>(size))
                         : std::vector<int32_t>();
    for (int32_t j = 0; j < size; ++j) {
      BenchRequest r;
      r.prompt_len = o.prefix_len + o.suffix_len;
      r.output_len = o.output_len;
      r.prompt_token_ids = prefix;
      r.prompt_token_ids.reserve(static_cast<size_t>(r.prompt_len));
      if (o.suffix_len > 0) r.prompt_token_ids.push_back(first_of_suffix[static_cast<size_t>(j)]);
      fill_random(rng, ids, r.prompt_len, r.prompt_token_ids);
      reqs.push_back(std::move(r));
      group_of.push_back(g);
    }
  }
  // vLLM shuffles the requests (random.shuffle); here a seeded permutation.
  std::vector<size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (size_t i = order.size(); i > 1; --i) {
    std::uniform_int_distribution<size_t> pick(0, i - 1);
    std::swap(order[i - 1], order[pick(rng)]);
  }
  std::vector<BenchRequest> out;
  out.reserve(reqs.size());
  if (groups) groups->clear();
  for (size_t i : order) {
    out.push_back(std::move(reqs[i]));
    if (groups) groups->push_back(group_of[i]);
  }
  return out;
}

}  // namespace llmserve::bench
