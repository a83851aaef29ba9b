#include "bench/multi_turn.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace llmserve::bench {

namespace {

/// Common short English words (TinyStories-like text, so small vocabularies such as
/// stories260K's also tokenize them into few pieces).
constexpr std::array<const char*, 160> kWords = {
    "the",    "a",      "and",    "to",     "was",    "he",     "she",    "it",     "they",
    "in",     "on",     "with",   "for",    "of",     "said",   "day",    "one",    "big",
    "little", "happy",  "sad",    "friend", "play",   "park",   "tree",   "ball",   "cat",
    "dog",    "bird",   "fish",   "sun",    "moon",   "star",   "sky",    "red",    "blue",
    "green",  "box",    "toy",    "car",    "boat",   "house",  "door",   "room",   "bed",
    "mom",    "dad",    "girl",   "boy",    "baby",   "name",   "time",   "once",   "upon",
    "there",  "lived",  "went",   "saw",    "found",  "made",   "ran",    "jumped", "looked",
    "wanted", "liked",  "loved",  "helped", "asked",  "smiled", "laughed", "cried", "told",
    "gave",   "took",   "came",   "home",   "water",  "food",   "cake",   "apple",  "milk",
    "book",   "story",  "song",   "game",   "hat",    "shoe",   "bag",    "flower", "garden",
    "rain",   "snow",   "wind",   "hill",   "river",  "road",   "town",   "school", "teacher",
    "best",   "good",   "nice",   "kind",   "brave",  "small",  "tall",   "fast",   "slow",
    "new",    "old",    "warm",   "cold",   "soft",   "loud",   "quiet",  "bright", "dark",
    "every",  "all",    "many",   "some",   "too",    "very",   "then",   "when",   "after",
    "before", "again",  "away",   "up",     "down",   "out",    "back",   "near",   "far",
    "fun",    "hug",    "help",   "share",  "learn",  "try",    "see",    "look",   "run",
    "walk",   "sit",    "sleep",  "dream",  "wish",   "hope",   "bear",   "bunny",  "duck",
    "frog",   "lion",   "mouse",  "pig",    "sheep",  "horse",  "cow"};

}  // namespace

Status check_multi_turn_options(const MultiTurnOptions& o) {
  if (o.conversations < 1 || o.conversations > kMaxNumPrompts)
    return InvalidArgument("--multi-turn-conversations must be in [1, {}], got {}",
                           kMaxNumPrompts, o.conversations);
  if (o.turns < 1) return InvalidArgument("--multi-turn-turns must be >= 1, got {}", o.turns);
  if (int64_t{o.conversations} * o.turns > kMaxNumPrompts)
    return InvalidArgument("--multi-turn-conversations {} x --multi-turn-turns {} requests is "
                           "more than {}", o.conversations, o.turns, kMaxNumPrompts);
  if (o.new_tokens < 1)
    return InvalidArgument("--multi-turn-new-tokens must be >= 1, got {}", o.new_tokens);
  if (o.output_len < 1) return InvalidArgument("--output-len must be >= 1, got {}", o.output_len);
  return Status::Ok();
}

std::string random_words(int32_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
  std::string out;
  for (int32_t i = 0; i < n; ++i) {
    if (i > 0) out += ' ';
    out += kWords[pick(rng)];
  }
  return out;
}

int64_t multi_turn_prompt_len(const MultiTurnOptions& o, int32_t turn, bool bos) {
  return (bos ? 1 : 0) + int64_t{turn + 1} * o.new_tokens + int64_t{turn} * o.output_len;
}

Expected<std::vector<BenchRequest>> make_multi_turn_workload(const MultiTurnOptions& o,
                                                             const VocabInfo& vocab,
                                                             bool as_text) {
  LLMS_RETURN_IF_ERROR(check_multi_turn_options(o));
  const std::vector<int32_t> ids = sampleable_ids(vocab);
  if (!as_text && ids.empty())
    return InvalidArgument("vocabulary of {} has no sampleable token", vocab.vocab_size);
  const bool bos = vocab.bos_id >= 0;
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<size_t> pick(0, ids.empty() ? 0 : ids.size() - 1);
  std::vector<BenchRequest> reqs(static_cast<size_t>(o.conversations) * o.turns);
  for (int32_t c = 0; c < o.conversations; ++c) {
    for (int32_t t = 0; t < o.turns; ++t) {
      const size_t i = static_cast<size_t>(c) * o.turns + t;
      BenchRequest& r = reqs[i];
      r.conversation = c;
      r.turn = t;
      r.output_len = o.output_len;
      if (t > 0) r.follows = static_cast<int64_t>(i) - 1;
      if (as_text) {
        r.prompt_text = (t > 0 ? " " : "") + random_words(o.new_tokens, rng);
        continue;
      }
      r.prompt_len = static_cast<int32_t>(
          std::min<int64_t>(multi_turn_prompt_len(o, t, bos), INT32_MAX));
      if (t == 0 && bos) r.prompt_token_ids.push_back(vocab.bos_id);
      for (int32_t k = 0; k < o.new_tokens; ++k) r.prompt_token_ids.push_back(ids[pick(rng)]);
    }
  }
  return reqs;
}

}  // namespace llmserve::bench
