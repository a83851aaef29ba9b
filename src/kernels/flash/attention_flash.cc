// The flash attention backend (FlashAttention, Dao et al. 2022, with FlashAttention-2's work
// partitioning), the driver around the per-ISA kernels of flash_kernels_impl.h.
//
// "flash" (default) is batch-invariant: every query row (token x head) is computed by the
// same prefill kernel whatever else shares the step, so its output bits depend only on its
// own q, its own context and its position (docs/batch_invariance.md):
//  - work items (sequence, KV head, query tile); a tile holds ceil(rows / group) tokens x all
//    `group` query heads of that KV head, so each K/V row is loaded once for the whole GQA
//    group; the kernel walks the causal context in KV tiles of 64 tokens at fixed absolute
//    positions (0, 64, 128, ...) through the block table with an online softmax. A row's
//    reductions (q.k over head_dim, the tile max and sum, P.V) run in the same order whether
//    the prompt arrives in one chunk or many, and whether the row is a prompt token or a
//    decode token (a decode token is a 1-token tile), so a sequence's bits do not depend on
//    the batch, on chunked prefill or on preemption-recompute.
//  - a decode token's item covers several (usually all) KV heads of its sequence, walked one
//    after another on each KV tile, so the cache rows of a slot are used while in cache;
//    with few decoding sequences an item gets fewer heads so every thread has work.
//  - no flash-decoding split: splitting the context and merging partial states reassociates
//    the softmax sum (and the split count depended on the batch and the threads).
// "flash-split" (opt-in, not batch-invariant) keeps the dedicated decode kernel: one item
// per decode sequence covering all KV heads, and when there are too few sequences to occupy
// the threads the context is split (flash-decoding) and the partial (m, l, O) states merged.
// Items are handed out dynamically (an atomic counter, largest first) so causal tiles of
// very different cost balance across threads; which thread runs an item never changes its
// result. Scratch is per thread, kept and grown across calls (O(tile)); the split partial states
// are O(num_heads x head_dim x splits).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/flash/flash_kernels.h"
#include "kernels/naive/attention_internal.h"

namespace llmserve {
namespace {

using flash_detail::DecodeTask;
using flash_detail::FlashKernels;
using flash_detail::KvSource;
using flash_detail::PrefillTile;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int32_t kMinSplitTokens = 256;  // smallest context piece worth a decode split
// Below this many q.k multiply-adds per call, waking the pool costs more than it saves
// (tiny models, very short contexts): the calling thread does all items. bench_attention's
// one-sequence decode at context 128 (16 / 4 heads, hd 64: 131k multiply-adds) took 47 us
// (AVX-512) and 33 us (AVX2) on one thread, 29 and 24 us on two; it was 2^18, which kept such
// decodes, i.e. every layer of a short chat, on one thread.
constexpr int64_t kMinParallelWork = int64_t{1} << 14;

struct Item {
  int64_t cost;
  int32_t seq;
  int32_t kind;   // 0: prefill tile, 1: decode (whole context), 2: decode split
  int32_t a;      // prefill: kv head; decode split: split index
  int32_t b;      // prefill: first query index in the sequence; split: kv_begin
  int32_t c;      // prefill: tokens in the tile; split: kv_end
  int64_t part;   // split: offset of its partial state
  int32_t heads = 1;  // prefill tile: KV heads a, a + 1, ..., a + heads - 1
};

class FlashAttention final : public AttentionBackend {
 public:
  /// split_decode: the dedicated (faster, not batch-invariant) decode kernel with
  /// flash-decoding splits ("flash-split").
  explicit FlashAttention(bool split_decode) : split_decode_(split_decode) {}
  const char* name() const override { return split_decode_ ? "flash-split" : "flash"; }

  void write_kv(const AttentionMetadata& meta, const AttentionShape& shape, const float* k,
                const float* v, KVCacheLayer cache) const override {
    attention_internal::write_kv_slots(meta, shape, k, v, cache);
  }

  void forward(const AttentionMetadata& meta, const AttentionShape& shape, const float* q,
               KVCacheLayer cache, float* out, ThreadPool* pool) const override {
    const FlashKernels& K = cpu_isa() >= CpuIsa::kAvx512 ? flash_detail::flash_kernels_avx512()
                                                         : flash_detail::flash_kernels_avx2();
    const int32_t G = shape.n_heads / shape.n_kv_heads;
    const int32_t hd = shape.head_dim;
    const int64_t q_stride = static_cast<int64_t>(shape.n_heads) * hd;
    const int32_t tile_tokens = std::max<int32_t>(1, (K.prefill_rows + G - 1) / G);
    const int threads = pool ? pool->num_threads() : 1;
    // A decode query at position ctx - 1 sees [window_start(ctx), ctx).
    auto window_start = [&](int32_t ctx) { return shape.window > 0 ? std::max(0, ctx - shape.window) : 0; };

    // Work items.
    std::vector<Item> items;
    int32_t n_decode = 0, max_tile_tokens = 0;
    int64_t n_prefill = 0;
    // "flash": a single-token query (decode) is a 1-token prefill tile covering several KV
    // heads (all of them when there are enough such sequences to occupy the threads), so the
    // cache rows of a slot are used together: about one item per thread (bench_attention, one
    // sequence at context 4096 on 2 threads: 2 items of 2 heads 0.33-0.36 ms, 4 items of one
    // head 0.36-0.51; bench-250m decode at context 4000, TPOT 9.1-9.2 -> 7.8-8.6 ms, and
    // 23.5-24.9 -> 21.5-22.9 ms with another process on one core). Grouping heads only decides
    // who computes which rows, never how: every row gets the same bits whatever the grouping.
    int32_t n_single = 0;
    int64_t single_work = 0;  // multiply-adds of q.k over the single-token queries
    for (int32_t s = 0; s < meta.num_seqs; ++s) {
      if (meta.query_start_loc[s + 1] - meta.query_start_loc[s] != 1) continue;
      ++n_single;
      single_work += static_cast<int64_t>(meta.seq_lens[s]) * shape.n_heads * hd;
    }
    int32_t single_heads = shape.n_kv_heads;  // KV heads per single-token item
    if (n_single > 0 && single_work >= kMinParallelWork) {
      const int32_t groups =
          std::clamp<int32_t>((threads + n_single - 1) / n_single, 1, shape.n_kv_heads);
      single_heads = (shape.n_kv_heads + groups - 1) / groups;
    }
    int32_t max_heads = 1;
    for (int32_t s = 0; s < meta.num_seqs; ++s) {
      const int32_t nq = meta.query_start_loc[s + 1] - meta.query_start_loc[s];
      const int32_t ctx = meta.seq_lens[s];
      if (nq <= 0) continue;
      if (nq == 1 && split_decode_) {
        ++n_decode;
        continue;
      }
      if (nq == 1) {
        max_tile_tokens = std::max(max_tile_tokens, 1);
        for (int32_t kh = 0; kh < shape.n_kv_heads; kh += single_heads) {
          const int32_t nh = std::min(single_heads, shape.n_kv_heads - kh);
          max_heads = std::max(max_heads, nh);
          items.push_back({static_cast<int64_t>(G) * nh * ctx, s, 0, kh, 0, 1, 0, nh});
          ++n_prefill;
        }
        continue;
      }
      for (int32_t t0 = 0; t0 < nq; t0 += tile_tokens) {
        const int32_t nt = std::min(tile_tokens, nq - t0);
        max_tile_tokens = std::max(max_tile_tokens, nt);
        const int64_t last = ctx - nq + t0 + nt;  // KV positions this tile reads
        for (int32_t kh = 0; kh < shape.n_kv_heads; ++kh) {
          items.push_back({static_cast<int64_t>(nt) * G * last, s, 0, kh, t0, nt, 0});
          ++n_prefill;
        }
      }
    }
    // Decode: split contexts when there are too few sequences to occupy every thread.
    int32_t splits = 1;
    if (n_decode > 0 && n_prefill == 0 && threads > 1 && n_decode < 2 * threads)
      splits = (2 * threads + n_decode - 1) / n_decode;
    const int64_t part_floats = static_cast<int64_t>(shape.n_heads) * (hd + 2);
    int64_t part_total = 0;
    for (int32_t s = 0; s < meta.num_seqs; ++s) {
      const int32_t nq = meta.query_start_loc[s + 1] - meta.query_start_loc[s];
      if (nq != 1 || !split_decode_) continue;
      const int32_t end = meta.seq_lens[s], begin = window_start(end), ctx = end - begin;
      const int32_t ns = std::max(1, std::min(splits, ctx / kMinSplitTokens));
      const int64_t cost = static_cast<int64_t>(shape.n_heads) * ctx;
      if (ns == 1) {
        items.push_back({cost, s, 1, 0, begin, end, 0});
        continue;
      }
      const int32_t piece = (ctx + ns - 1) / ns;
      for (int32_t i = 0; i < ns; ++i) {
        const int32_t b = begin + i * piece, e = std::min(end, b + piece);
        if (b >= e) break;
        items.push_back({cost * (e - b) / ctx, s, 2, i, b, e, part_total});
        part_total += part_floats;
      }
    }
    if (items.empty()) return;
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& x, const Item& y) { return x.cost > y.cost; });
    std::vector<float> parts(part_total);

    const int64_t scratch_floats =
        std::max({n_prefill > 0 ? K.prefill_scratch_floats(max_tile_tokens * G, hd, 1) : 0,
                  n_single > 0 && !split_decode_ ? K.prefill_scratch_floats(G, hd, max_heads) : 0,
                  n_decode > 0 ? K.decode_scratch_floats(shape.n_kv_heads, G, hd) : 0});
    const float scale_log2 = shape.scale * kLog2e;
    // Soft-capping in the log2 domain of the scores (AttentionShape::softcap; 0: off).
    const float softcap_log2 = shape.softcap > 0 ? shape.softcap * kLog2e : 0.0f;
    const int64_t n_items = static_cast<int64_t>(items.size());
    std::atomic<int64_t> next{0};
    auto worker = [&](int64_t, int64_t) {
      // Per-thread scratch that only grows: allocating and zeroing it per call cost ~2 us of
      // bench_attention's one-sequence decode at context 128 (25 -> 23 us), every layer.
      thread_local std::vector<float> buf;
      if (static_cast<int64_t>(buf.size()) < scratch_floats + 16) buf.resize(scratch_floats + 16);
      float* scratch = buf.data() + ((64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64) / 4;
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
        const Item& it = items[i];
        const int32_t s = it.seq;
        const int32_t q0 = meta.query_start_loc[s];
        const int32_t nq = meta.query_start_loc[s + 1] - q0;
        KvSource kv;
        kv.k = cache.k;
        kv.v = cache.v;
        kv.dtype = cache.dtype;
        kv.block_table = meta.block_tables + static_cast<int64_t>(s) * meta.max_blocks_per_seq;
        kv.block_size = meta.block_size;
        kv.slot_stride = static_cast<int64_t>(shape.n_kv_heads) * hd;
        if (it.kind == 0) {
          PrefillTile t;
          t.kv = kv;
          t.kv_head = it.a;
          t.num_kv_heads = it.heads;
          const int64_t row0 = (q0 + it.b) * q_stride + static_cast<int64_t>(it.a) * G * hd;
          t.q = q + row0;
          t.out = out + row0;
          t.q_stride = q_stride;
          t.num_tokens = it.c;
          t.group = G;
          t.head_dim = hd;
          t.first_pos = meta.seq_lens[s] - nq + it.b;
          t.scale_log2 = scale_log2;
          t.window = shape.window;
          t.softcap_log2 = softcap_log2;
          K.prefill(t, scratch);
        } else {
          DecodeTask t;
          t.kv = kv;
          t.n_kv_heads = shape.n_kv_heads;
          t.group = G;
          t.head_dim = hd;
          t.q = q + q0 * q_stride;
          t.scale_log2 = scale_log2;
          t.softcap_log2 = softcap_log2;
          t.kv_begin = it.kind == 1 ? window_start(meta.seq_lens[s]) : it.b;
          t.kv_end = it.kind == 1 ? meta.seq_lens[s] : it.c;
          if (it.kind == 1) {
            t.out = out + q0 * q_stride;
          } else {
            t.part = parts.data() + it.part;
          }
          K.decode(t, scratch);
        }
      }
    };
    int64_t total_work = 0;  // q.k multiply-adds, roughly
    for (const Item& it : items) total_work += it.cost * hd;
    if (pool != nullptr && threads > 1 && n_items > 1 && total_work >= kMinParallelWork) {
      pool->parallel_for(std::min<int64_t>(threads, n_items), worker);
    } else {
      worker(0, 1);
    }

    // Merge split decode states: O = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s.
    if (part_total == 0) return;
    for (int32_t s = 0; s < meta.num_seqs; ++s) {
      const Item* first = nullptr;
      int32_t count = 0;
      for (const Item& it : items) {
        if (it.kind == 2 && it.seq == s) {
          if (first == nullptr || it.part < first->part) first = &it;
          ++count;
        }
      }
      if (first == nullptr) continue;
      const float* p0 = parts.data() + first->part;  // splits of a sequence are contiguous
      float* o = out + meta.query_start_loc[s] * q_stride;
      for (int32_t h = 0; h < shape.n_heads; ++h) {
        float mx = -INFINITY;
        for (int32_t i = 0; i < count; ++i) mx = std::max(mx, p0[i * part_floats + h * (hd + 2)]);
        float l = 0.0f;
        float* oh = o + static_cast<int64_t>(h) * hd;
        std::fill_n(oh, hd, 0.0f);
        for (int32_t i = 0; i < count; ++i) {
          const float* ps = p0 + i * part_floats + h * (hd + 2);
          const float w = std::exp2(ps[0] - mx);
          l += w * ps[1];
          for (int32_t d = 0; d < hd; ++d) oh[d] += w * ps[2 + d];
        }
        const float inv = 1.0f / l;
        for (int32_t d = 0; d < hd; ++d) oh[d] *= inv;
      }
    }
  }

 private:
  bool split_decode_;
};

}  // namespace

namespace attention_internal {
std::unique_ptr<AttentionBackend> make_flash_attention(bool split_decode) {
  return std::make_unique<FlashAttention>(split_decode);
}
}  // namespace attention_internal

}  // namespace llmserve
