// Paged attention: one interface, several backends ("naive" reference, "flash" tiled).
// Queries of a batch are packed by sequence; K/V are read through per-sequence block tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/dtype.h"
#include "common/status.h"
#include "common/thread_pool.h"

namespace llmserve {

/// One layer's KV cache: K and V each [num_blocks, block_size, n_kv_heads, head_dim] in
/// `dtype` (f32, bf16 or f16: --kv-cache-dtype). Element (slot, kv_head, d) sits at
/// (slot * n_kv_heads + kv_head) * head_dim + d, slot = block_id * block_size + offset.
/// MLA (DeepSeek-V2) caches one latent row [c_kv (kv_lora_rank) | k_rope] per slot and sets
/// v == k: attention then reads V as each K row's values, and the model uses only the first
/// kv_lora_rank output values (FlashMLA's layout).
struct KVCacheLayer {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
};

/// Converts n float32 values to `dtype` (round to nearest even) and stores them at element
/// offset `offset` of `base` (a KV cache tensor). Used by write_kv and by the QKV-projection
/// epilogue that writes K/V straight from the GEMM tile.
void store_kv_values(void* base, DType dtype, int64_t offset, const float* src, int64_t n);

/// Batch layout for attention (built by the model runner, plain arrays it owns).
struct AttentionMetadata {
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;               // total query tokens in the batch
  const int32_t* query_start_loc = nullptr;  // [num_seqs + 1]: seq s owns tokens
                                             // [query_start_loc[s], query_start_loc[s+1])
  const int32_t* seq_lens = nullptr;    // [num_seqs]: context length incl. this step's tokens;
                                        // query j of seq s sits at position
                                        // seq_lens[s] - num_query(s) + j
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq], padded rows
  int32_t max_blocks_per_seq = 0;
  const int64_t* slot_mapping = nullptr;  // [num_tokens]: block_id * block_size + offset
  int32_t block_size = 0;
};

struct AttentionShape {
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;  // query head h reads KV head h / (n_heads / n_kv_heads)
  int32_t head_dim = 0;
  float scale = 0;         // usually 1 / sqrt(head_dim)
  /// Sliding-window attention (Beltagy et al. 2020; Mistral 7B, Jiang et al. 2023): a query
  /// at position p attends to positions max(0, p - window + 1)..p, i.e. p - j < window, as
  /// transformers' sliding_window mask and llama.cpp's LLAMA_SWA_TYPE_STANDARD; 0 = every
  /// position. Backends never read the cache rows before a query's window (their blocks may
  /// have been returned to the pool).
  int32_t window = 0;
  /// Attention logit soft-capping (Gemma 2's attn_logit_softcapping): each score
  /// s = (q.k) * scale becomes softcap * tanh(s / softcap) before the causal / window mask and
  /// the softmax, as transformers' Gemma2 eager attention and llama.cpp's attn_soft_cap;
  /// 0 = off (any value <= 0 is off).
  float softcap = 0;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual const char* name() const = 0;

  /// Writes this step's keys/values k,v [num_tokens, n_kv_heads, head_dim] into the cache
  /// at meta.slot_mapping (vLLM's reshape_and_cache).
  virtual void write_kv(const AttentionMetadata& meta, const AttentionShape& shape,
                        const float* k, const float* v, KVCacheLayer cache) const = 0;

  /// out[num_tokens, n_heads, head_dim] = causal softmax(q·K^T·scale)·V per sequence, each
  /// query attending to positions 0..its own position of its sequence (after write_kv); with
  /// shape.window / shape.softcap as documented there.
  virtual void forward(const AttentionMetadata& meta, const AttentionShape& shape,
                       const float* q, KVCacheLayer cache, float* out,
                       ThreadPool* pool) const = 0;
};

/// --attention-backend:
///  "naive" (alias "reference"): per sequence and head, materialises the score matrix
///    S = Q·K^T and probabilities P = softmax(S) in memory, then O = P·V (the textbook
///    five-kernel path: gather, matmul, mask, softmax, matmul). The oracle for tests.
///  "flash" (default): FlashAttention-style (Dao et al. 2022, alg. 1; FlashAttention-2
///    work partitioning) tiles over query rows and KV blocks with an online softmax (running
///    max and sum); K/V are read through block tables and each KV head is loaded once for all
///    query heads of its GQA group; no N x N matrix exists. Extra memory O(tile) per thread.
///    Batch-invariant: a query row's output bits depend only on its own q, context and
///    position, never on the other sequences of the step or on how a prompt was chunked
///    (decode tokens run through the same kernel as prompt tokens; docs/batch_invariance.md).
///  "flash-split" (opt-in): "flash" with a dedicated decode kernel and flash-decoding context
///    splits when few sequences decode; faster for a few long decodes, NOT batch-invariant
///    (the split count depends on the batch and the thread count).
/// Errors: InvalidArgument for an unknown name.
Expected<std::unique_ptr<AttentionBackend>> make_attention_backend(const std::string& name);

}  // namespace llmserve
