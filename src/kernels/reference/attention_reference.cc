// The reference paged-attention backend: scalar loops, one (token, head) pair at a time,
// materialising that query's score row (length = its context). Obviously correct by design;
// faster backends are tested against it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/ops.h"

namespace llmserve {
namespace {

class ReferenceAttention final : public AttentionBackend {
 public:
  const char* name() const override { return "reference"; }

  void write_kv(const AttentionMetadata& meta, const AttentionShape& shape, const float* k,
                const float* v, KVCacheLayer cache) const override {
    const int64_t row = static_cast<int64_t>(shape.n_kv_heads) * shape.head_dim;
    for (int32_t t = 0; t < meta.num_tokens; ++t) {
      const int64_t slot = meta.slot_mapping[t];
      std::copy_n(k + t * row, row, static_cast<float*>(cache.k) + slot * row);
      std::copy_n(v + t * row, row, static_cast<float*>(cache.v) + slot * row);
    }
  }

  void forward(const AttentionMetadata& meta, const AttentionShape& shape, const float* q,
               KVCacheLayer cache, float* out, ThreadPool* pool) const override {
    // Flatten (token, head) work items; find each token's sequence once.
    std::vector<int32_t> token_seq(meta.num_tokens);
    for (int32_t s = 0; s < meta.num_seqs; ++s)
      for (int32_t t = meta.query_start_loc[s]; t < meta.query_start_loc[s + 1]; ++t)
        token_seq[t] = s;
    const int64_t items = static_cast<int64_t>(meta.num_tokens) * shape.n_heads;
    auto body = [&](int64_t begin, int64_t end) {
      std::vector<float> scores;
      for (int64_t it = begin; it < end; ++it) {
        const int32_t t = static_cast<int32_t>(it / shape.n_heads);
        const int32_t h = static_cast<int32_t>(it % shape.n_heads);
        attend_one(meta, shape, token_seq[t], t, h, q, cache, out, scores);
      }
    };
    if (pool) {
      pool->parallel_for(items, body, 8);
    } else {
      body(0, items);
    }
  }

 private:
  static void attend_one(const AttentionMetadata& meta, const AttentionShape& shape, int32_t s,
                         int32_t t, int32_t h, const float* q, KVCacheLayer cache, float* out,
                         std::vector<float>& scores) {
    const int32_t hd = shape.head_dim;
    const int32_t group = shape.n_heads / shape.n_kv_heads;
    const int32_t kv_h = h / group;
    const int32_t num_query = meta.query_start_loc[s + 1] - meta.query_start_loc[s];
    const int32_t pos = meta.seq_lens[s] - num_query + (t - meta.query_start_loc[s]);
    const int32_t* block_table = meta.block_tables + static_cast<int64_t>(s) * meta.max_blocks_per_seq;
    const int64_t kv_row = static_cast<int64_t>(shape.n_kv_heads) * hd;
    auto slot_of = [&](int32_t p) {
      return static_cast<int64_t>(block_table[p / meta.block_size]) * meta.block_size +
             p % meta.block_size;
    };
    const float* qv = q + (static_cast<int64_t>(t) * shape.n_heads + h) * hd;
    scores.resize(pos + 1);
    float max_score = -INFINITY;
    for (int32_t p = 0; p <= pos; ++p) {
      const float* kv = static_cast<const float*>(cache.k) + slot_of(p) * kv_row + static_cast<int64_t>(kv_h) * hd;
      float dot = 0.0f;
      for (int32_t d = 0; d < hd; ++d) dot += qv[d] * kv[d];
      scores[p] = dot * shape.scale;
      max_score = std::max(max_score, scores[p]);
    }
    float sum = 0.0f;
    for (int32_t p = 0; p <= pos; ++p) {
      scores[p] = std::exp(scores[p] - max_score);
      sum += scores[p];
    }
    float* o = out + (static_cast<int64_t>(t) * shape.n_heads + h) * hd;
    std::fill_n(o, hd, 0.0f);
    for (int32_t p = 0; p <= pos; ++p) {
      const float w = scores[p] / sum;
      const float* vv = static_cast<const float*>(cache.v) + slot_of(p) * kv_row + static_cast<int64_t>(kv_h) * hd;
      for (int32_t d = 0; d < hd; ++d) o[d] += w * vv[d];
    }
  }
};

}  // namespace

Expected<std::unique_ptr<AttentionBackend>> make_attention_backend(const std::string& name) {
  if (name == "reference" || name == "naive")
    return std::unique_ptr<AttentionBackend>(new ReferenceAttention());
  return InvalidArgument("unknown --attention-backend '{}' (available: reference)", name);
}

}  // namespace llmserve
