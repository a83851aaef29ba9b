// The quantized GEMM's driver (the recipe and the layout: qgemm.h): kernel selection,
// activation quantization, work items and threads, mixed-type parts, SwiGLU, accumulation
// and epilogues.
//
// Work items are (row block of about kRowBlock rows in whole micro-kernel calls) x (group of
// tiles: 16-column units, as many as the epilogue's column alignment needs), handed to the
// pool's threads in contiguous shares (ThreadPool::parallel_items). For each tile of an item, every chunk's record is decoded once into an L1
// buffer of int16 weights and then multiplied into all rows of the block, MR rows at a time;
// the float accumulators of the block's rows x 16 columns live in a per-thread buffer. A row's
// result does not depend on the block, the item or the thread (qgemm.h), so all of these are
// free choices for speed.
#include "kernels/quant/qgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/ops.h"
#include "kernels/quant/gemm_quant_ref.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve {
namespace {

using namespace qgemm;

/// Rows per work item, about (row_block): each tile of an item is decoded once per row block,
/// so longer blocks spread that over more rows (256 vs 128: m = 512 calls 2-8 % faster in
/// bench_qgemm, VNNI; 512 no better); a tile's float accumulators take 16 KiB.
constexpr int64_t kRowBlock = 256;
/// How far ahead (at least; two records for large ones) few-row calls prefetch W.
constexpr int64_t kPrefetchBytes = 4096;

/// prepare_quantized's result (WeightMatrix::packed with kPackedQuant): the repacked parts
/// with their first row; for SwiGLU exactly {gate, up}, each of F rows.
struct QPackedSet {
  struct Part {
    std::shared_ptr<const QPacked> packed;
    int64_t row0 = 0;
  };
  std::vector<Part> parts;
  bool silu = false;
};

std::atomic<const QKernels*> g_override{nullptr};

const QKernels& kernels() { return active_kernels(); }

/// Rows per row block of an m-row call: m split into ceil(m / kRowBlock) near-equal blocks,
/// each rounded up to whole micro-kernel calls (chunk_mr rows), so only the last block can end
/// in a partial call (512 rows at chunk_mr 6: 258, 254; blocks of 256 rows each would end in a
/// 4-row call).
int64_t row_block(int64_t m) {
  const int64_t mr = kernels().chunk_mr;
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t per = (m + blocks - 1) / blocks;
  return (per + mr - 1) / mr * mr;
}

int64_t row_blocks(int64_t m) {
  const int64_t rb = row_block(m);
  return (m + rb - 1) / rb;
}

/// Grow-only 64-byte-aligned scratch.
template <typename T>
class Buffer {
 public:
  T* get(int64_t n) {
    if (n > cap_) {
      const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
      ptr_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (!ptr_) throw std::bad_alloc();
      cap_ = n;
    }
    return ptr_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> ptr_;
  int64_t cap_ = 0;
};

/// Runs fn(i) for i in [0, items) on the pool (ThreadPool::parallel_items: each thread
/// takes a contiguous range of items, i.e. adjacent tiles, so its weight reads are one forward
/// stream that the hardware prefetchers and the kernels' software prefetch, a fixed distance
/// ahead of the current record, follow). A shared counter handed the threads alternate items:
/// two threads then streamed a decode GEMM at 40-50 % of the read bandwidth where one thread
/// alone reached 70 % (Zen 5, Q4_K, M = 1: 22 -> 32-46 GB/s with contiguous ranges). Which
/// thread runs an item never changes its result (qgemm.h).
template <typename Fn>
void for_items(ThreadPool* pool, int64_t items, const Fn& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || items <= 1) {
    for (int64_t i = 0; i < items; ++i) fn(i);
    return;
  }
  pool->parallel_items(items, [&](int64_t i) { fn(i); });
}

/// The activations of one call, quantized for `qmax` (per calling thread).
/// `slot` picks one of the calling thread's buffer sets, so several calls' results can be
/// alive at once (gate and up of a SwiGLU: 0 and 1; a grouped call: two per problem).
QActs quantize_activations(const QKernels& kr, const float* x, int64_t m, int64_t k, DType type,
                           ThreadPool* pool, int slot = 0) {
  const int qmax = quant_traits(type).act_qmax;
  struct Buffers {
    Buffer<int16_t> q, split;
    Buffer<int8_t> bytes;
    Buffer<float> s;
    Buffer<int32_t> b;
  };
  thread_local std::vector<std::unique_ptr<Buffers>> sets;  // stable addresses as it grows
  while (static_cast<int>(sets.size()) <= slot) sets.push_back(std::make_unique<Buffers>());
  Buffers& set = *sets[slot];
  Buffer<int16_t>& qbuf = set.q;
  Buffer<int16_t>& splitbuf = set.split;
  Buffer<float>& sbuf = set.s;
  Buffer<int32_t>& bbuf = set.b;
  QActs a;
  a.m = m;
  a.k = k;
  a.chunks = (k + kChunk - 1) / kChunk;
  a.qmax = qmax;
  a.q = qbuf.get(m * k);
  a.s = sbuf.get(m * a.chunks);
  a.bsum16 = bbuf.get(std::max<int64_t>(1, m * (k / 16)));
  const int min_sub = quant_traits(type).min_sub;
  const bool split = qgemm::stored_mins(type);
  if (split) a.bsplit = splitbuf.get(m * a.chunks * 32);
  constexpr int64_t kRowsPerItem = 8;
  if (m >= 2 * kRowsPerItem && pool != nullptr) {
    for_items(pool, (m + kRowsPerItem - 1) / kRowsPerItem, [&](int64_t i) {
      const int64_t r0 = i * kRowsPerItem, r1 = std::min(m, (i + 1) * kRowsPerItem);
      kr.quantize(x, r0, r1, a);
      if (split) split_min_sums(a, min_sub, r0, r1);
    });
  } else {
    kr.quantize(x, 0, m, a);
    if (split) split_min_sums(a, min_sub, 0, m);
  }
  // The fused few-row path of kernels that read the codes as bytes.
  if (m <= kr.max_mr && kr.split != nullptr && kr.split_type(type)) {
    a.split = set.bytes.get(2 * m * k);
    kr.split(a, 0, m);
  }
  return a;
}

/// Per-thread buffers of one item (two tiles' worth).
struct ItemScratch {
  Buffer<int16_t> wbuf[2];
  Buffer<float> d[2], dm[2], facc[2], facc_up[2];
  Buffer<int16_t> mins[2];
};

/// facc[i][rows][16] = rows [m0, m1) x tile `tile + i` (i < nt, nt 1 or 2) of one packed part,
/// all of K.
void tile_product(const QKernels& kr, const QPacked& p, const QActs& a, int64_t tile, int nt,
                  int64_t m0, int64_t m1, ItemScratch& s, float* const* facc) {
  for (int i = 0; i < nt; ++i)
    std::memset(facc[i], 0, static_cast<size_t>(m1 - m0) * kTileCols * sizeof(float));
  if (m1 - m0 <= kr.max_mr) {  // fused micro-kernel calls: decode in registers
    const uint8_t* end = p.data.get() + p.tiles * p.tile_bytes;
    // The 256-element chunks in one call, then a shorter last chunk (its own layout).
    const int64_t full = p.k % kChunk == 0 ? p.chunks : p.chunks - 1;
    for (int i = 0; i < nt; ++i)
      for (int64_t c = 0, run; c < p.chunks; c += run) {
        run = c < full ? full - c : 1;
        // Software prefetch of the record kPrefetchBytes (at least two records) ahead, issued
        // by the fused kernel a few lines per unit: the stream prefetcher alone left few-row
        // calls at ~40 % of the read bandwidth (a record's regions are read out of order:
        // planes, then scales, then mins), and one burst of prefetches per record stalled on
        // full fill buffers (perf: a third of decode time on the prefetch instructions).
        const uint8_t* rec = p.record(tile + i, c);
        const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 2 * p.layout(c).bytes);
        kr.fused(p.type, static_cast<int>(m1 - m0), a, m0, c * kChunk, p.chunk_elems(c), rec,
                 p.layout(c), facc[i], rec + ahead, end, run);
      }
    return;
  }
  TileBufs tb[2];
  for (int i = 0; i < nt; ++i)
    tb[i] = {s.wbuf[i].get(kChunk / 2 * kLanes), s.d[i].get(8 * kTileCols),
             s.dm[i].get(8 * kTileCols), s.mins[i].get(8 * kLanes), facc[i]};
  for (int64_t c = 0; c < p.chunks; ++c) {
    const int64_t e = p.chunk_elems(c);
    for (int i = 0; i < nt; ++i)
      kr.decode(p.type, p.record(tile + i, c), p.layout(c), e, const_cast<int16_t*>(tb[i].wbuf),
                const_cast<float*>(tb[i].d), const_cast<float*>(tb[i].dm),
                const_cast<int16_t*>(tb[i].mins));
    // The block's rows in as few micro-kernel calls as chunk_mr allows, split evenly
    // (8 rows at chunk_mr 6: 4 + 4, not 6 + 2).
    const int64_t calls = (m1 - m0 + kr.chunk_mr - 1) / kr.chunk_mr;
    for (int64_t call = 0, r = m0; call < calls; ++call) {
      const int64_t left = calls - call;
      const int mr = static_cast<int>((m1 - r + left - 1) / left);
      TileBufs at[2];
      for (int i = 0; i < nt; ++i) {
        at[i] = tb[i];
        at[i].facc = facc[i] + (r - m0) * kTileCols;
      }
      kr.chunk(p.type, mr, nt, a, r, c * kChunk, e, at);
      r += mr;
    }
  }
}

int64_t lcm64(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

/// Tiles per work item of run_part: the epilogue's alignment, and at least 2 (the chunk kernel
/// pairs tiles).
int64_t part_group(const GemmEpilogue* epilogue) {
  const int64_t align = epilogue != nullptr ? std::max<int64_t>(1, epilogue->column_alignment()) : 1;
  return std::max<int64_t>(2, lcm64(kTileCols, align) / kTileCols);
}

/// Work items of run_part over m rows.
int64_t part_items(const QPacked& p, int64_t m, const GemmEpilogue* epilogue) {
  const int64_t group = part_group(epilogue);
  return (p.tiles + group - 1) / group * row_blocks(m);
}

/// Work item `item` of run_part: one row block x `group` tiles.
void run_part_item(const QKernels& kr, const QPacked& p, const QActs& a, int64_t m, float* y,
                   int64_t ldy, int64_t col0, GemmOutput mode, const GemmEpilogue* epilogue,
                   int64_t item) {
  thread_local ItemScratch scratch;
  ItemScratch& s = scratch;
  const int64_t group = part_group(epilogue);
  const int64_t groups = (p.tiles + group - 1) / group;
  const int64_t mb = item / groups, g = item % groups;
  const int64_t rb = row_block(m);
  const int64_t m0 = mb * rb, m1 = std::min(m, m0 + rb);
  const int64_t t0 = g * group, t1 = std::min(p.tiles, t0 + group);
  float* facc[2] = {s.facc[0].get(rb * kTileCols), s.facc[1].get(rb * kTileCols)};
  for (int64_t t = t0; t < t1; t += 2) {
    const int nt = t + 1 < t1 ? 2 : 1;
    tile_product(kr, p, a, t, nt, m0, m1, s, facc);
    for (int i = 0; i < nt; ++i) {
      const int64_t c0 = (t + i) * kTileCols, cols = std::min<int64_t>(kTileCols, p.n - c0);
      for (int64_t r = m0; r < m1; ++r) {
        float* dst = y + r * ldy + col0 + c0;
        const float* src = facc[i] + (r - m0) * kTileCols;
        if (mode == GemmOutput::kAccumulate) {
          for (int64_t j = 0; j < cols; ++j) dst[j] += src[j];
        } else {
          std::memcpy(dst, src, static_cast<size_t>(cols) * sizeof(float));
        }
      }
    }
  }
  if (epilogue != nullptr)
    epilogue->apply(m0, m1, col0 + t0 * kTileCols, col0 + std::min(p.n, t1 * kTileCols), y, ldy);
}

/// Work item `item` of gemm_silu_mul_quant: one row block x a pair of tiles of gate and up.
void silu_item(const QKernels& kr, const QPacked& gate, const QPacked& up, const QActs& ag,
               const QActs& au, int64_t m, float* out, int64_t item) {
  thread_local ItemScratch scratch;
  ItemScratch& s = scratch;
  const int64_t f = gate.n;
  const int64_t pairs = (gate.tiles + 1) / 2;
  const int64_t mb = item / pairs, t = 2 * (item % pairs);
  const int nt = t + 1 < gate.tiles ? 2 : 1;
  const int64_t rb = row_block(m);
  const int64_t m0 = mb * rb, m1 = std::min(m, m0 + rb);
  float* fg[2] = {s.facc[0].get(rb * kTileCols), s.facc[1].get(rb * kTileCols)};
  float* fu[2] = {s.facc_up[0].get(rb * kTileCols), s.facc_up[1].get(rb * kTileCols)};
  tile_product(kr, gate, ag, t, nt, m0, m1, s, fg);
  tile_product(kr, up, au, t, nt, m0, m1, s, fu);
  for (int i = 0; i < nt; ++i) {
    const int64_t c0 = (t + i) * kTileCols, cols = std::min<int64_t>(kTileCols, f - c0);
    for (int64_t r = m0; r < m1; ++r)
      silu_mul(fg[i] + (r - m0) * kTileCols, fu[i] + (r - m0) * kTileCols, out + r * f + c0, cols);
  }
}

int64_t silu_items(const QPacked& gate, int64_t m) {
  return (gate.tiles + 1) / 2 * row_blocks(m);
}

const QPackedSet* packed_set(const WeightMatrix& w) {
  return w.packed_format == kPackedQuant ? static_cast<const QPackedSet*>(w.packed.get())
                                         : nullptr;
}

std::shared_ptr<const QPacked> pack_rows(const WeightMatrix& w, int64_t row0, int64_t rows) {
  const auto* base = static_cast<const uint8_t*>(w.data) + row0 * dtype_row_bytes(w.dtype, w.cols);
  return repack(w.dtype, base, rows, w.cols);
}

/// Runs fn(problem, item) for every work item of every problem as one pool job (for_items
/// over the problems' items in problem order): items[i] = problem i's count.
template <typename Fn>
void for_grouped_items(ThreadPool* pool, const std::vector<int64_t>& items, const Fn& fn) {
  std::vector<int64_t> start(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) start[i + 1] = start[i] + items[i];
  for_items(pool, start.back(), [&](int64_t it) {
    const size_t p = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), it) - start.begin()) - 1;
    fn(p, it - start[p]);
  });
}

}  // namespace

void prepare_quantized(WeightMatrix& w, WeightUse use) {
  if (w.packed_format == kPackedQuant || w.rows <= 0 || w.cols <= 0) return;
  if (!(is_quantized(w.dtype) || w.parts != nullptr)) return;
  auto set = std::make_shared<QPackedSet>();
  // The matrices making up W, each single-typed, with their first row.
  std::vector<std::pair<const WeightMatrix*, int64_t>> pieces;
  if (w.parts != nullptr) {
    int64_t row = 0;
    for (const WeightMatrix& part : *w.parts) {
      if (!is_quantized(part.dtype) || part.data == nullptr) return;  // float parts: reference
      pieces.emplace_back(&part, row);
      row += part.rows;
    }
  } else {
    if (w.data == nullptr) return;
    pieces.emplace_back(&w, 0);
  }
  if (use == WeightUse::kSiluMul) {
    // {gate, up}: the halves of one matrix, or two parts of F rows each.
    const int64_t f = w.rows / 2;
    if (w.rows % 2 != 0) return;
    set->silu = true;
    if (pieces.size() == 1) {
      set->parts.push_back({pack_rows(w, 0, f), 0});
      set->parts.push_back({pack_rows(w, f, f), f});
    } else if (pieces.size() == 2 && pieces[0].first->rows == f) {
      set->parts.push_back({pack_rows(*pieces[0].first, 0, f), 0});
      set->parts.push_back({pack_rows(*pieces[1].first, 0, f), f});
    } else {
      return;  // an unusual stacking: left to the reference path
    }
  } else {
    for (const auto& [part, row0] : pieces)
      set->parts.push_back({pack_rows(*part, 0, part->rows), row0});
  }
  w.packed = std::shared_ptr<const void>(set, set.get());
  w.packed_format = kPackedQuant;
}

bool quant_gemm_ready(const WeightMatrix& w) { return packed_set(w) != nullptr; }

void gemm_quant(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
                GemmOutput mode, const GemmEpilogue* epilogue) {
  const QPackedSet* set = packed_set(w);
  LLMS_CHECK(set != nullptr && !set->silu, "gemm_quant: W was not prepared for gemm");
  if (m <= 0) return;
  const int64_t align = epilogue != nullptr ? std::max<int64_t>(1, epilogue->column_alignment()) : 1;
  for (const QPackedSet::Part& part : set->parts)
    if (part.row0 % align != 0)  // an epilogue tile would straddle two parts
      return gemm_quant_ref(x, m, w, y, pool, mode, epilogue);
  const QKernels& kr = kernels();
  // Every part's items (one part, or a Q4_K_M file's Q4_K q/k with a Q6_K v) as one pool
  // job, so a step pays one dispatch per matrix, not one per part. Parts of one type share
  // their activation codes.
  std::vector<QActs> acts;
  std::vector<int64_t> items;
  for (size_t i = 0; i < set->parts.size(); ++i) {
    const QPacked& p = *set->parts[i].packed;
    size_t same = 0;
    while (same < i && set->parts[same].packed->type != p.type) ++same;
    acts.push_back(same < i ? acts[same]
                            : quantize_activations(kr, x, m, p.k, p.type, pool, static_cast<int>(i)));
    items.push_back(part_items(p, m, epilogue));
  }
  for_grouped_items(pool, items, [&](size_t i, int64_t item) {
    const QPackedSet::Part& part = set->parts[i];
    run_part_item(kr, *part.packed, acts[i], m, y, w.rows, part.row0, mode, epilogue, item);
  });
}

void gemm_silu_mul_quant(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                         ThreadPool* pool) {
  const QPackedSet* set = packed_set(gate_up);
  LLMS_CHECK(set != nullptr && set->silu && set->parts.size() == 2,
             "gemm_silu_mul_quant: W was not prepared for SwiGLU");
  if (m <= 0) return;
  const QKernels& kr = kernels();
  const QPacked& gate = *set->parts[0].packed;
  const QPacked& up = *set->parts[1].packed;
  const QActs ag = quantize_activations(kr, x, m, gate.k, gate.type, pool);
  // The up part may need other activation codes (another type): a second buffer set.
  const QActs au = up.type == gate.type ? ag
                                        : quantize_activations(kr, x, m, up.k, up.type, pool, 1);
  for_items(pool, silu_items(gate, m), [&](int64_t item) { silu_item(kr, gate, up, ag, au, m, out, item); });
}

bool quant_grouped_ready(std::span<const GemmProblem> problems, bool silu) {
  for (const GemmProblem& g : problems) {
    const QPackedSet* set = packed_set(*g.w);
    if (set == nullptr || set->silu != silu || set->parts.size() != (silu ? 2u : 1u)) return false;
  }
  return true;
}

void gemm_quant_grouped(std::span<const GemmProblem> problems, ThreadPool* pool) {
  LLMS_CHECK(quant_grouped_ready(problems, false), "gemm_quant_grouped: a weight is not one prepared part");
  const QKernels& kr = kernels();
  std::vector<QActs> acts;
  std::vector<int64_t> items;
  for (size_t i = 0; i < problems.size(); ++i) {
    const QPacked& p = *packed_set(*problems[i].w)->parts[0].packed;
    acts.push_back(problems[i].m > 0 ? quantize_activations(kr, problems[i].x, problems[i].m, p.k, p.type, pool,
                                                            static_cast<int>(i))
                                     : QActs{});
    items.push_back(problems[i].m > 0 ? part_items(p, problems[i].m, nullptr) : 0);
  }
  for_grouped_items(pool, items, [&](size_t i, int64_t item) {
    const GemmProblem& g = problems[i];
    const QPacked& p = *packed_set(*g.w)->parts[0].packed;
    run_part_item(kr, p, acts[i], g.m, g.y, g.w->rows, 0, GemmOutput::kStore, nullptr, item);
  });
}

void gemm_silu_mul_quant_grouped(std::span<const GemmProblem> problems, ThreadPool* pool) {
  LLMS_CHECK(quant_grouped_ready(problems, true), "gemm_silu_mul_quant_grouped: a weight is not prepared for SwiGLU");
  const QKernels& kr = kernels();
  std::vector<QActs> ag, au;
  std::vector<int64_t> items;
  for (size_t i = 0; i < problems.size(); ++i) {
    const QPackedSet& set = *packed_set(*problems[i].w);
    const QPacked& gate = *set.parts[0].packed;
    const QPacked& up = *set.parts[1].packed;
    const int slot = 2 * static_cast<int>(i);
    const int64_t m = problems[i].m;
    ag.push_back(m > 0 ? quantize_activations(kr, problems[i].x, m, gate.k, gate.type, pool, slot) : QActs{});
    au.push_back(m <= 0 || up.type == gate.type ? ag.back()
                                                : quantize_activations(kr, problems[i].x, m, up.k, up.type, pool, slot + 1));
    items.push_back(problems[i].m > 0 ? silu_items(gate, problems[i].m) : 0);
  }
  for_grouped_items(pool, items, [&](size_t i, int64_t item) {
    const QPackedSet& set = *packed_set(*problems[i].w);
    silu_item(kr, *set.parts[0].packed, *set.parts[1].packed, ag[i], au[i], problems[i].m, problems[i].y, item);
  });
}

const char* quant_gemm_isa() { return kernels().name; }

}  // namespace llmserve

namespace llmserve::qgemm {

const QKernels& active_kernels() {
  if (const QKernels* k = g_override.load(std::memory_order_relaxed)) return *k;
  if (cpu_isa() >= CpuIsa::kAvx512)
    return cpu_has_avx512_vnni() ? qkernels_avx512vnni() : qkernels_avx512();
  return cpu_has_avx_vnni() ? qkernels_avxvnni() : qkernels_avx2();
}

void set_kernels_for_testing(const QKernels* kernels) {
  g_override.store(kernels, std::memory_order_relaxed);
}

}  // namespace llmserve::qgemm
