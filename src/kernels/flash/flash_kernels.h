// Private to the flash attention backend: the per-ISA kernels (flash_avx2.cc, flash_avx512.cc)
// behind one function table, and the work descriptions the driver (attention_flash.cc) hands
// them. Kernels never allocate: the driver passes per-thread scratch of the size they ask for.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llmserve::flash_detail {

/// KV tile length (tokens) of the prefill kernel, and of one decode chunk.
constexpr int32_t kPrefillKvTile = 64;

/// Where one sequence's K/V live: element (slot, kv_head, d) of a cache tensor sits at
/// slot * slot_stride + kv_head * head_dim + d, slot = block_table[p / block_size] *
/// block_size + p % block_size.
struct KvSource {
  const void* k = nullptr;
  const void* v = nullptr;
  DType dtype = DType::kF32;
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  int64_t slot_stride = 0;  // n_kv_heads * head_dim
};

/// One prefill work item: `num_tokens` consecutive query tokens of one sequence (positions
/// first_pos, first_pos + 1, ...) times the `group` query heads of each of the KV heads
/// kv_head .. kv_head + num_kv_heads - 1, i.e. num_tokens * group rows per KV head, attending
/// causally to positions 0..their own (with a window, the last `window` of them). The heads are walked one after another on each KV
/// tile; a row's result does not depend on num_kv_heads or num_tokens.
struct PrefillTile {
  KvSource kv;
  int32_t kv_head = 0;
  int32_t num_kv_heads = 1;
  const float* q = nullptr;  // row (token 0, head kv_head * group); tokens q_stride apart
  float* out = nullptr;      // same layout as q
  int64_t q_stride = 0;      // n_heads * head_dim
  int32_t num_tokens = 0;
  int32_t group = 1;
  int32_t head_dim = 0;
  int32_t first_pos = 0;
  float scale_log2 = 0;      // scale * log2(e): scores live in the log2 domain
  int32_t window = 0;        // AttentionShape::window (0: causal only)
  float softcap_log2 = 0;    // AttentionShape::softcap * log2(e) (0: no soft-capping)
};

/// One decode work item: a single query token (all n_kv_heads * group heads) against the
/// context positions [kv_begin, kv_end) of its sequence (all visible to it). Each KV row is
/// loaded once for the whole GQA group. Writes either the normalised output or, for a split
/// of the context (flash-decoding), the unnormalised partial state to merge.
struct DecodeTask {
  KvSource kv;
  int32_t n_kv_heads = 0;
  int32_t group = 1;
  int32_t head_dim = 0;
  const float* q = nullptr;  // [n_kv_heads * group, head_dim]
  float scale_log2 = 0;
  float softcap_log2 = 0;  // AttentionShape::softcap * log2(e) (0: no soft-capping)
  int32_t kv_begin = 0;
  int32_t kv_end = 0;
  float* out = nullptr;   // non-null: [n_heads, head_dim] = softmax-weighted V
  float* part = nullptr;  // else per head: {m (log2 domain), l, O[head_dim]} (head_dim + 2)
};

struct FlashKernels {
  const char* isa;
  int32_t lanes;
  int32_t prefill_rows;  // target query rows (tokens x group) per prefill tile
  /// Scratch of a prefill item of `rows` rows per KV head and `heads` KV heads.
  int64_t (*prefill_scratch_floats)(int32_t rows, int32_t head_dim, int32_t heads);
  void (*prefill)(const PrefillTile& tile, float* scratch);
  int64_t (*decode_scratch_floats)(int32_t n_kv_heads, int32_t group, int32_t head_dim);
  void (*decode)(const DecodeTask& task, float* scratch);
  /// y[i] = tanh(x[i]), the vector tanh behind soft-capping (exposed for its accuracy test);
  /// y may alias x.
  void (*tanh)(const float* x, float* y, int64_t n);
};

const FlashKernels& flash_kernels_avx2();
const FlashKernels& flash_kernels_avx512();  // only after cpu_isa() >= CpuIsa::kAvx512

}  // namespace llmserve::flash_detail
