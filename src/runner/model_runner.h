// ModelRunner: owns the model, the KV cache tensors (allocated once) and the attention
// backend; turns a SchedulerOutput into batch arrays (input ids, positions, slot mapping,
// block tables, seq lens), runs one forward pass and returns logits.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "common/thread_pool.h"
#include "kernels/attention.h"
#include "models/model.h"
#include "runner/scheduler_output.h"

namespace llmserve {

/// Logits of one step: rows[logits_row_start[s] ...] belong to sequence s of the
/// SchedulerOutput (-1 when it asked for none); each row is vocab_size floats.
struct StepLogits {
  const float* data = nullptr;  // [num_rows, vocab_size]
  int32_t vocab_size = 0;
  std::vector<int32_t> logits_row_start;  // [num_seqs]
  const float* row(int32_t r) const { return data + int64_t{r} * vocab_size; }
};

class ModelRunner {
 public:
  /// Allocates the KV cache: per layer K and V of [num_blocks, block_size, spec.num_heads,
  /// spec.head_size] (ModelConfig::kv_cache_spec; MLA: one latent tensor, v == k) in kv_dtype, each an anonymous 2 MiB-aligned mapping (transparent huge pages
  /// requested; zero pages are committed lazily, so untouched blocks cost no RSS).
  /// Hybrid KV (num_sliding_blocks > 0): the sliding-window layers' tensors hold
  /// num_sliding_blocks blocks instead, addressed by ScheduledSequence::sliding_block_table.
  /// Errors: ResourceExhausted when the allocation fails (naming the bytes).
  static Expected<std::unique_ptr<ModelRunner>> create(std::unique_ptr<Model> model,
                                                       std::unique_ptr<AttentionBackend> attention,
                                                       int32_t num_blocks, int32_t block_size,
                                                       DType kv_dtype, ThreadPool* pool,
                                                       int32_t num_sliding_blocks = 0);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  /// KV bytes one block takes across all layers (K and V, or MLA's latent) in kv_dtype.
  static int64_t kv_bytes_per_block(const ModelConfig& c, int32_t block_size, DType kv_dtype);

  /// Writes zeros over blocks [0, num_blocks) of every layer's KV tensors (a sliding pool's:
  /// at most its own count), split over the pool's threads, so their pages are committed now
  /// rather than on first use (CacheConfig::kv_cache_prefault). The contents stay zero, as
  /// the fresh mapping's. Returns the bytes written.
  int64_t prefault_kv_cache(int32_t num_blocks);

  /// One forward pass over every scheduled token. The returned logits stay valid until the
  /// next call.
  const StepLogits& execute(const SchedulerOutput& out);

  const ModelConfig& model_config() const { return model_->config(); }

 private:
  ModelRunner(std::unique_ptr<Model> model, std::unique_ptr<AttentionBackend> attention,
              int32_t num_blocks, int32_t block_size, DType kv_dtype, ThreadPool* pool);
  Status allocate_kv_cache();
  void build_batch(const SchedulerOutput& out);

  std::unique_ptr<Model> model_;
  std::unique_ptr<AttentionBackend> attention_;
  int32_t num_blocks_, block_size_;
  int32_t num_sliding_blocks_ = 0;  // hybrid KV: the sliding layers' pool, else 0
  DType kv_dtype_;
  ThreadPool* pool_;
  std::vector<std::pair<void*, size_t>> kv_mappings_;  // mmap regions to unmap
  std::vector<KVCacheLayer> kv_layers_;      // [n_layers]
  // Batch arrays, reused across steps.
  std::vector<int32_t> token_ids_, positions_, query_start_loc_, seq_lens_, block_tables_;
  std::vector<int64_t> slot_mapping_;
  std::vector<int32_t> sliding_block_tables_;  // hybrid KV: the sliding layers' tables
  std::vector<int64_t> sliding_slot_mapping_;
  AttentionMetadata sliding_attn_;
  std::vector<int32_t> logits_indices_;
  std::vector<float> logits_;
  ForwardBatch batch_;
  StepLogits step_logits_;
};

}  // namespace llmserve
