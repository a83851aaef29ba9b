// SchedulerOutput: what the scheduler hands the model runner each step. Plain data that
// borrows the scheduler's arrays for the duration of one step.
#pragma once

#include <cstdint>
#include <vector>

namespace llmserve {

enum class LogitsMode : uint8_t {
  kNone,  // partial prefill chunk: nothing to sample yet
  kLast,  // logits of the last scheduled token (to sample the next token)
  kAll,   // logits of every scheduled token (llmserve logits)
};

struct ScheduledSequence {
  int64_t request_id = 0;
  const int32_t* token_ids = nullptr;  // all of the sequence's tokens (prompt + generated)
  int32_t num_computed_tokens = 0;     // tokens whose K/V are already in the cache
  int32_t num_scheduled_tokens = 0;    // tokens to compute now: [computed, computed + sched)
  const int32_t* block_table = nullptr;  // covers num_computed + num_scheduled tokens
  int32_t num_blocks = 0;
  /// Hybrid KV: the sliding-window layers' block table (same length rules; null entries,
  /// KVCacheManager::kNullBlock, before the window), or null when every layer uses block_table.
  const int32_t* sliding_block_table = nullptr;
  int32_t num_sliding_blocks = 0;
  LogitsMode logits_mode = LogitsMode::kNone;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> seqs;
  int32_t total_num_scheduled_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

}  // namespace llmserve
