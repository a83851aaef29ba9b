#include "runner/model_runner.h"

#include <algorithm>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/check.h"

namespace llmserve {

int64_t ModelRunner::kv_bytes_per_block(const ModelConfig& c, int32_t block_size,
                                        DType kv_dtype) {
  return int64_t{block_size} * c.n_layers * c.kv_bytes_per_token_per_layer(kv_dtype);
}

Expected<std::unique_ptr<ModelRunner>> ModelRunner::create(
    std::unique_ptr<Model> model, std::unique_ptr<AttentionBackend> attention, int32_t num_blocks,
    int32_t block_size, DType kv_dtype, ThreadPool* pool, int32_t num_sliding_blocks) {
  if (is_quantized(kv_dtype))
    return InvalidArgument("KV cache dtype {} is not supported (f32, bf16 or f16)",
                           dtype_name(kv_dtype));
  std::unique_ptr<ModelRunner> runner(new ModelRunner(std::move(model), std::move(attention),
                                                      num_blocks, block_size, kv_dtype, pool));
  runner->num_sliding_blocks_ = num_sliding_blocks;
  LLMS_RETURN_IF_ERROR(runner->allocate_kv_cache());
  return runner;
}

ModelRunner::ModelRunner(std::unique_ptr<Model> model, std::unique_ptr<AttentionBackend> attention,
                         int32_t num_blocks, int32_t block_size, DType kv_dtype,
                         ThreadPool* pool)
    : model_(std::move(model)), attention_(std::move(attention)), num_blocks_(num_blocks),
      block_size_(block_size), kv_dtype_(kv_dtype), pool_(pool) {}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

/// Anonymous mapping of `bytes` (zero pages, committed lazily), aligned to 2 MiB and marked for
/// transparent huge pages: KV rows never straddle cache lines and the TLB covers long
/// contexts (measured in bench_attention: f32 paged decode 17.4 -> 18.7-20.7 GB/s).
/// Returns the aligned pointer and the whole mapping in `map_base`/`map_bytes` for munmap.
void* map_kv_tensor(size_t bytes, void** map_base, size_t* map_bytes) {
  const size_t total = bytes + kHugePage;
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1);
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // advisory; errors ignored
  *map_base = base;
  *map_bytes = total;
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

Status ModelRunner::allocate_kv_cache() {
  const ModelConfig& c = model_->config();
  const KvCacheSpec spec = c.kv_cache_spec();
  const int num_tensors = spec.v_shares_k ? 1 : 2;  // MLA: one latent tensor per layer
  for (int32_t l = 0; l < c.n_layers; ++l) {
    // Hybrid KV: a sliding-window layer's tensors hold the sliding pool's blocks.
    const int32_t blocks = num_sliding_blocks_ > 0 && c.layer_window(l) > 0 ? num_sliding_blocks_ : num_blocks_;
    const size_t per_layer = size_t(blocks) * block_size_ * size_t(spec.num_heads) * spec.head_size;
    void* tensors[2] = {nullptr, nullptr};
    for (int kv = 0; kv < num_tensors; ++kv) {
      void* map_base = nullptr;
      size_t map_bytes = 0;
      void* p = map_kv_tensor(per_layer * dtype_size(kv_dtype_), &map_base, &map_bytes);
      if (p == nullptr)
        return ResourceExhausted("cannot allocate the KV cache: {} blocks need {:.2f} GiB",
                                 blocks,
                                 double(num_tensors) * c.n_layers * per_layer *
                                     dtype_size(kv_dtype_) / (1 << 30));
      kv_mappings_.push_back({map_base, map_bytes});
      tensors[kv] = p;
    }
    kv_layers_.push_back({tensors[0], spec.v_shares_k ? tensors[0] : tensors[1], kv_dtype_});
  }
  return Status::Ok();
}

int64_t ModelRunner::prefault_kv_cache(int32_t num_blocks) {
  const ModelConfig& c = model_->config();
  const KvCacheSpec spec = c.kv_cache_spec();
  const size_t block_bytes = size_t(block_size_) * spec.num_heads * spec.head_size * dtype_size(kv_dtype_);
  // Pieces of at most one huge page, so the threads share the faults evenly.
  std::vector<std::pair<char*, size_t>> pieces;
  int64_t total = 0;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const int32_t pool_blocks = num_sliding_blocks_ > 0 && c.layer_window(l) > 0 ? num_sliding_blocks_ : num_blocks_;
    const size_t bytes = size_t(std::clamp(num_blocks, 0, pool_blocks)) * block_bytes;
    const KVCacheLayer& kv = kv_layers_[l];
    const int tensors = kv.v == kv.k ? 1 : 2;  // MLA: one latent tensor
    for (int i = 0; i < tensors; ++i) {
      char* t = static_cast<char*>(i == 0 ? kv.k : kv.v);
      for (size_t off = 0; off < bytes; off += kHugePage)
        pieces.push_back({t + off, std::min(kHugePage, bytes - off)});
      total += static_cast<int64_t>(bytes);
    }
  }
  auto touch = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::memset(pieces[i].first, 0, pieces[i].second);
  };
  const auto n = static_cast<int64_t>(pieces.size());
  if (pool_ != nullptr) pool_->parallel_for(n, touch);
  else touch(0, n);
  return total;
}

ModelRunner::~ModelRunner() {
  for (const auto& [base, bytes] : kv_mappings_) munmap(base, bytes);
}

void ModelRunner::build_batch(const SchedulerOutput& out) {
  const int32_t num_seqs = static_cast<int32_t>(out.seqs.size());
  int32_t max_blocks = 1;
  bool hybrid = false;
  for (const auto& s : out.seqs) {
    max_blocks = std::max(max_blocks, s.num_blocks);
    hybrid |= s.sliding_block_table != nullptr;
  }
  LLMS_CHECK(!hybrid || num_sliding_blocks_ > 0, "sliding block tables for a runner without a sliding pool");
  sliding_slot_mapping_.clear();
  sliding_block_tables_.assign(hybrid ? size_t(num_seqs) * max_blocks : 0, 0);
  token_ids_.clear();
  positions_.clear();
  slot_mapping_.clear();
  logits_indices_.clear();
  query_start_loc_.assign(1, 0);
  seq_lens_.clear();
  block_tables_.assign(size_t(num_seqs) * max_blocks, 0);
  step_logits_.logits_row_start.assign(num_seqs, -1);

  for (int32_t si = 0; si < num_seqs; ++si) {
    const ScheduledSequence& s = out.seqs[si];
    const int32_t end = s.num_computed_tokens + s.num_scheduled_tokens;
    LLMS_CHECK(int64_t{s.num_blocks} * block_size_ >= end,
               "block table of request {} covers {} tokens, needs {}", s.request_id,
               int64_t{s.num_blocks} * block_size_, end);
    std::copy_n(s.block_table, s.num_blocks, &block_tables_[size_t(si) * max_blocks]);
    if (hybrid) {
      LLMS_CHECK(s.sliding_block_table != nullptr && s.num_sliding_blocks == s.num_blocks,
                 "request {}: no sliding block table of {} blocks", s.request_id, s.num_blocks);
      std::copy_n(s.sliding_block_table, s.num_sliding_blocks, &sliding_block_tables_[size_t(si) * max_blocks]);
      for (int32_t p = s.num_computed_tokens; p < end; ++p) {
        const int32_t id = s.sliding_block_table[p / block_size_];
        LLMS_CHECK(id >= 0, "request {}: position {} falls in a freed sliding block", s.request_id, p);
        sliding_slot_mapping_.push_back(int64_t{id} * block_size_ + p % block_size_);
      }
    }
    const int32_t first_row = static_cast<int32_t>(token_ids_.size());
    for (int32_t p = s.num_computed_tokens; p < end; ++p) {
      token_ids_.push_back(s.token_ids[p]);
      positions_.push_back(p);
      slot_mapping_.push_back(int64_t{s.block_table[p / block_size_]} * block_size_ +
                              p % block_size_);
    }
    query_start_loc_.push_back(static_cast<int32_t>(token_ids_.size()));
    seq_lens_.push_back(end);
    if (s.logits_mode == LogitsMode::kNone) continue;
    step_logits_.logits_row_start[si] = static_cast<int32_t>(logits_indices_.size());
    const int32_t from = s.logits_mode == LogitsMode::kAll ? first_row
                                                           : first_row + s.num_scheduled_tokens - 1;
    for (int32_t r = from; r < first_row + s.num_scheduled_tokens; ++r)
      logits_indices_.push_back(r);
  }

  batch_.num_tokens = static_cast<int32_t>(token_ids_.size());
  batch_.token_ids = token_ids_.data();
  batch_.positions = positions_.data();
  batch_.logits_indices = logits_indices_.data();
  batch_.num_logits = static_cast<int32_t>(logits_indices_.size());
  AttentionMetadata& a = batch_.attn;
  a.num_seqs = num_seqs;
  a.num_tokens = batch_.num_tokens;
  a.query_start_loc = query_start_loc_.data();
  a.seq_lens = seq_lens_.data();
  a.block_tables = block_tables_.data();
  a.max_blocks_per_seq = max_blocks;
  a.slot_mapping = slot_mapping_.data();
  a.block_size = block_size_;
  batch_.attn_sliding = nullptr;
  if (hybrid) {
    sliding_attn_ = a;
    sliding_attn_.block_tables = sliding_block_tables_.data();
    sliding_attn_.slot_mapping = sliding_slot_mapping_.data();
    batch_.attn_sliding = &sliding_attn_;
  }
}

const StepLogits& ModelRunner::execute(const SchedulerOutput& out) {
  build_batch(out);
  const int32_t vocab = model_->config().vocab_size;
  logits_.resize(size_t(std::max(1, batch_.num_logits)) * vocab);
  if (batch_.num_tokens > 0)
    model_->forward(batch_, kv_layers_.data(), *attention_, pool_, logits_.data());
  step_logits_.data = logits_.data();
  step_logits_.vocab_size = vocab;
  return step_logits_;
}

}  // namespace llmserve
