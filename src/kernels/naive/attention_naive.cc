// The naive attention backend, the oracle for tests: the textbook "five kernel" path, one
// (sequence, query head) pair at a time:
//   1. gather that head's K and V for the whole context (converted to float32),
//   2. S = Q·K^T·scale                       [num_query, ctx] (materialised), soft-capped
//      (S = softcap * tanh(S / softcap)) when AttentionShape::softcap > 0,
//   3. causal mask: S[i][j] = -inf for j > position of query i (and, with a sliding window,
//      for j <= position - window),
//   4. P = softmax(S) row by row             [num_query, ctx] (its own array),
//   5. O = P·V.
// Plain loops, float32 (exp in double for the softmax), no tiling: obviously correct, and
// deliberately O(N^2) in memory so benchmarks can show what the flash backend avoids.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/naive/attention_internal.h"

namespace llmserve {
namespace {

using attention_internal::load_kv_values;
using attention_internal::slot_of;

class NaiveAttention final : public AttentionBackend {
 public:
  const char* name() const override { return "naive"; }

  void write_kv(const AttentionMetadata& meta, const AttentionShape& shape, const float* k,
                const float* v, KVCacheLayer cache) const override {
    attention_internal::write_kv_slots(meta, shape, k, v, cache);
  }

  void forward(const AttentionMetadata& meta, const AttentionShape& shape, const float* q,
               KVCacheLayer cache, float* out, ThreadPool* pool) const override {
    const int64_t items = static_cast<int64_t>(meta.num_seqs) * shape.n_heads;
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t it = begin; it < end; ++it)
        attend_head(meta, shape, static_cast<int32_t>(it / shape.n_heads),
                    static_cast<int32_t>(it % shape.n_heads), q, cache, out);
    };
    if (pool) {
      pool->parallel_for(items, body);
    } else {
      body(0, items);
    }
  }

 private:
  static void attend_head(const AttentionMetadata& meta, const AttentionShape& shape, int32_t s,
                          int32_t h, const float* q, KVCacheLayer cache, float* out) {
    const int64_t hd = shape.head_dim;
    const int32_t group = shape.n_heads / shape.n_kv_heads;
    const int32_t kv_h = h / group;
    const int32_t q0 = meta.query_start_loc[s];
    const int64_t nq = meta.query_start_loc[s + 1] - q0;
    const int64_t ctx = meta.seq_lens[s];
    if (nq <= 0) return;
    const int32_t* table = meta.block_tables + static_cast<int64_t>(s) * meta.max_blocks_per_seq;
    const int64_t kv_row = static_cast<int64_t>(shape.n_kv_heads) * hd;

    // 1. Gather K and V of this KV head: [ctx, hd] each (with a sliding window only from the
    // first query's window start: earlier blocks may have been freed; those rows stay zero
    // and are masked below).
    const int64_t first_visible = shape.window > 0 ? std::max<int64_t>(0, ctx - nq - shape.window + 1) : 0;
    std::vector<float> k(ctx * hd), v(ctx * hd);
    for (int64_t p = first_visible; p < ctx; ++p) {
      const int64_t off = slot_of(table, meta.block_size, static_cast<int32_t>(p)) * kv_row + kv_h * hd;
      load_kv_values(cache.k, cache.dtype, off, &k[p * hd], hd);
      load_kv_values(cache.v, cache.dtype, off, &v[p * hd], hd);
    }
    // 2. S = Q·K^T·scale over the whole context.
    std::vector<float> scores(nq * ctx);
    for (int64_t i = 0; i < nq; ++i) {
      const float* qi = q + ((q0 + i) * shape.n_heads + h) * hd;
      for (int64_t j = 0; j < ctx; ++j) {
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qi[d] * k[j * hd + d];
        scores[i * ctx + j] = dot * shape.scale;
      }
    }
    // 2b. Logit soft-capping (Gemma 2): s -> softcap * tanh(s / softcap), before the masks.
    if (shape.softcap > 0)
      for (float& sc : scores) sc = shape.softcap * std::tanh(sc / shape.softcap);
    // 3. Causal mask: query i sits at position ctx - nq + i.
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = ctx - nq + i + 1; j < ctx; ++j) scores[i * ctx + j] = -INFINITY;
    // 3b. Sliding window: query i sees only positions j with (ctx - nq + i) - j < window.
    if (shape.window > 0)
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j <= ctx - nq + i - shape.window && j < ctx; ++j) scores[i * ctx + j] = -INFINITY;
    // 4. P = softmax(S), row by row.
    std::vector<float> probs(nq * ctx);
    for (int64_t i = 0; i < nq; ++i) {
      const float* srow = &scores[i * ctx];
      float mx = -INFINITY;
      for (int64_t j = 0; j < ctx; ++j) mx = std::fmax(mx, srow[j]);
      double sum = 0.0;
      for (int64_t j = 0; j < ctx; ++j) sum += std::exp(static_cast<double>(srow[j]) - mx);
      for (int64_t j = 0; j < ctx; ++j)
        probs[i * ctx + j] = static_cast<float>(std::exp(static_cast<double>(srow[j]) - mx) / sum);
    }
    // 5. O = P·V.
    for (int64_t i = 0; i < nq; ++i) {
      float* o = out + ((q0 + i) * shape.n_heads + h) * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] = 0.0f;
      for (int64_t j = 0; j < ctx; ++j) {
        const float w = probs[i * ctx + j];
        for (int64_t d = 0; d < hd; ++d) o[d] += w * v[j * hd + d];
      }
    }
  }
};

}  // namespace

namespace attention_internal {

void load_kv_values(const void* base, DType dtype, int64_t offset, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(base) + offset;
  switch (dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<const float*>(base)[offset + i];
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
    default:
      LLMS_CHECK(false, "load_kv_values: {} is not a KV cache dtype", dtype_name(dtype));
  }
}

}  // namespace attention_internal

namespace attention_internal {
std::unique_ptr<AttentionBackend> make_naive_attention() {
  return std::make_unique<NaiveAttention>();
}

}  // namespace attention_internal

}  // namespace llmserve
