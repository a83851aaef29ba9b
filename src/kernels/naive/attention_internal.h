// Helpers shared by the attention backends (naive, flash): the KV write both use, and the
// scalar KV-row load used by the naive path.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/attention.h"

namespace llmserve::attention_internal {

/// vLLM's reshape_and_cache: token t's K and V rows ([n_kv_heads * head_dim] each) go to
/// slot meta.slot_mapping[t], converted to the cache dtype.
inline void write_kv_slots(const AttentionMetadata& meta, const AttentionShape& shape,
                           const float* k, const float* v, KVCacheLayer cache) {
  const int64_t row = static_cast<int64_t>(shape.n_kv_heads) * shape.head_dim;
  for (int32_t t = 0; t < meta.num_tokens; ++t) {
    const int64_t slot = meta.slot_mapping[t];
    store_kv_values(cache.k, cache.dtype, slot * row, k + t * row, row);
    store_kv_values(cache.v, cache.dtype, slot * row, v + t * row, row);
  }
}

/// Cache slot of position p of a sequence whose block-table row is `block_table`.
inline int64_t slot_of(const int32_t* block_table, int32_t block_size, int32_t p) {
  return static_cast<int64_t>(block_table[p / block_size]) * block_size + p % block_size;
}

/// Backend constructors (the registry, kernels/cpu/attention_registry.cc, maps names to them).
std::unique_ptr<AttentionBackend> make_naive_attention();
/// split_decode = false: "flash" (batch-invariant); true: "flash-split" (dedicated decode
/// kernel with flash-decoding splits, faster for few long decodes, not batch-invariant).
std::unique_ptr<AttentionBackend> make_flash_attention(bool split_decode);

/// Reads n values at element offset `offset` of a cache tensor in `dtype` as float32.
void load_kv_values(const void* base, DType dtype, int64_t offset, float* dst, int64_t n);

}  // namespace llmserve::attention_internal
