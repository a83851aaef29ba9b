// GEMM drivers: weight concatenation and preparation, path selection, blocking, threading and
// epilogues. The arithmetic lives in the per-ISA kernel tables (gemm_avx2.cc,
// gemm_avx512.cc), chosen at run time from cpu_isa(); all of it is float32 FMA (16-bit
// weights are widened in registers, which on this CPU beats vdpbf16ps, and keeps activations
// in float32).
//
// Prepared W (prepare_weight: [ceil(N/32)][K][32] panels in the file dtype, the model's case):
//  - M <= 128 (decode batches: bandwidth-bound; bf16 costs one shuffle per 16 columns): the
//    microkernel reads the panels in place, so each thread streams its share of W exactly
//    once, sequentially, with software prefetch.
//  - larger M (prefill, compute-bound): each K block (kc = 256) of a column block's panels is
//    widened to float32 once and reused by every row of the row block (GotoBLAS/BLIS order:
//    W micro-panel in L1, x block in L2).
// Row-major W (not prepared; e.g. a tied embedding used as lm_head): dot-product tiles (4 W
// rows x up to 6 x rows, 16-lane partial sums reduced at the end) with prefetch of the next
// tiles' rows, for every M (a 32-column unit of W stays in cache while all row tiles use it).
//
// Batch invariance (docs/batch_invariance.md): row i of y has the same bits whatever M is and
// whatever the other rows are: the path is chosen from W alone, each element's K reduction
// is the same chain (panel path: one FMA chain per kc block, blocks added in order; dot
// path: the same lane partial sums and reduction tree) for any tile shape, and threads only
// decide who computes a tile, never how.
// x is packed once per call into [M/mr][K][mr] (mr <= 14 on AVX-512, balanced: M = 32 -> 3 x
// 11). Work items (row block x column block, columns aligned to the epilogue) are taken from
// a shared counter by every pool thread, so a thread whose core is busy elsewhere takes fewer.
// The epilogue runs once per finished item; SwiGLU computes matching gate and up panels in
// the same item and writes silu(g) * u.
//
// Quantized W (any ggml block type, or parts of mixed types from concat_rows) never reaches
// the float machinery below: gemm() and gemm_silu_mul() hand it to the quantized-weight
// kernels chosen in quant_gemm() (today the reference, kernels/quant/gemm_quant_ref.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <vector>

#include "common/check.h"
#include "common/weight_alloc.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/gemm.h"
#include "kernels/quant/gemm_quant_ref.h"
#include "kernels/quant/qgemm.h"

namespace llmserve {
namespace {

using gemm_detail::GemmKernels;
using gemm_detail::kDotRows;

const GemmKernels& kernels() {
  return cpu_isa() >= CpuIsa::kAvx512 ? gemm_detail::gemm_kernels_avx512()
                                      : gemm_detail::gemm_kernels_avx2();
}

/// The GEMMs for quantized (or mixed-part) weights. The dispatch point for faster quantized
/// kernels: pick them here (by cpu_isa(), as kernels() does); the reference stays their test
/// oracle.
struct QuantGemm {
  void (*gemm)(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
               GemmOutput mode, const GemmEpilogue* epilogue);
  void (*gemm_silu_mul)(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                        ThreadPool* pool);
};

const QuantGemm& quant_gemm() {
  static constexpr QuantGemm kReference{gemm_quant_ref, gemm_silu_mul_quant_ref};
  return kReference;
}

/// Whether W takes the quantized path: a block-quantized dtype, or stacked parts of mixed types.
bool is_quantized_weight(const WeightMatrix& w) { return is_quantized(w.dtype) || w.parts; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/// Grow-only 64-byte-aligned float scratch (one per thread).
class Scratch {
 public:
  float* get(int64_t n) {
    if (n > cap_) {
      const int64_t bytes = round_up(n * static_cast<int64_t>(sizeof(float)), 64);
      buf_.reset(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes))));
      if (!buf_) throw std::bad_alloc();
      cap_ = bytes / static_cast<int64_t>(sizeof(float));
    }
    return buf_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> buf_;
  int64_t cap_ = 0;
};

using gemm_detail::kPackedPanels;
using gemm_detail::kPanel;

const gemm_detail::GemmTuning& tuning() { return gemm_detail::gemm_tuning(); }

constexpr int64_t kDotUnit = 32;  // columns per work unit on the small-M dot path
constexpr int64_t kMinParallelWork = int64_t{1} << 17;  // multiply-adds

int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

/// One GEMM (or gate/up SwiGLU GEMM) call.
struct Job {
  const GemmKernels* kr;
  const float* x;
  int64_t m, k;
  const void* w;        // row-major W
  const void* panels;   // prepare_weight's panels (null: use w)
  DType dtype;
  int64_t n;          // output columns (N, or F for SwiGLU)
  int64_t up_offset;  // SwiGLU: W row of the first `up` row (F); 0 for plain GEMM
  bool silu;
  float* y;  // [m, n], row stride n
  bool accumulate;
  const GemmEpilogue* epilogue;
  int64_t align;  // epilogue column alignment (1 without epilogue)

  int64_t esize() const { return static_cast<int64_t>(dtype_size(dtype)); }
  const void* w_row(int64_t r) const {
    return static_cast<const uint8_t*>(w) + r * k * esize();
  }
  /// Prepared panel holding W row r (r a multiple of kPanel), at K offset k0.
  const void* panel(int64_t r, int64_t k0) const {
    return static_cast<const uint8_t*>(panels) + ((r / kPanel) * k + k0) * kPanel * esize();
  }
};

/// Calls body(i0, i1) over disjoint ranges of at most `grain` items covering [0, items),
/// with a pool through ThreadPool::parallel_items (each thread streams a contiguous part of
/// W; a thread whose core is busy elsewhere ends up with fewer ranges).
void run(const Job& job, ThreadPool* pool, int64_t items, int64_t grain,
         const std::function<void(int64_t, int64_t)>& body) {
  grain = std::max<int64_t>(1, grain);
  const int64_t groups = ceil_div(items, grain);
  if (pool == nullptr || pool->num_threads() <= 1 || groups <= 1 ||
      job.m * job.n * job.k * (job.silu ? 2 : 1) < kMinParallelWork) {
    body(0, items);
    return;
  }
  pool->parallel_items(groups, [&](int64_t g) { body(g * grain, std::min(items, (g + 1) * grain)); });
}

// ------------------------------------------------------------------------------------------
// Small-M path on row-major W.

void dot_columns(const Job& job, int64_t c0, int64_t c1, float* up_tmp) {
  const GemmKernels& kr = *job.kr;
  const int64_t m = job.m, k = job.k, n = job.n, width = c1 - c0;
  const int64_t pf = tuning().pf_rows * k;
  float res[6 * kDotRows];
  const void* rows[kDotRows];
  for (int pass = 0; pass < (job.silu ? 2 : 1); ++pass) {
    // SwiGLU: pass 0 writes gate values into y, pass 1 up values into up_tmp [m][width].
    const int64_t row_offset = pass == 0 ? 0 : job.up_offset;
    for (int64_t nb = c0; nb < c1; nb += kDotRows) {
      const int64_t nv = std::min<int64_t>(kDotRows, c1 - nb);
      for (int r = 0; r < kDotRows; ++r) {
        rows[r] = job.w_row(row_offset + nb + std::min<int64_t>(r, nv - 1));
      }
      for (int64_t i0 = 0; i0 < m; i0 += kr.dot_max_mb) {
        const int mb = static_cast<int>(std::min<int64_t>(kr.dot_max_mb, m - i0));
        kr.dot(job.dtype, mb, job.x + i0 * k, k, rows, k, pf, res);
        for (int i = 0; i < mb; ++i) {
          const float* ri = res + i * kDotRows;
          if (pass == 1) {
            float* dst = up_tmp + (i0 + i) * width + (nb - c0);
            for (int64_t r = 0; r < nv; ++r) dst[r] = ri[r];
          } else {
            float* dst = job.y + (i0 + i) * n + nb;
            if (job.accumulate) {
              for (int64_t r = 0; r < nv; ++r) dst[r] += ri[r];
            } else {
              for (int64_t r = 0; r < nv; ++r) dst[r] = ri[r];
            }
          }
        }
      }
    }
  }
  if (job.silu) {
    for (int64_t i = 0; i < m; ++i) {
      float* g = job.y + i * n + c0;
      kr.silu_mul(g, up_tmp + i * width, g, width);
    }
  }
}

void gemm_dot(const Job& job, ThreadPool* pool) {
  const int64_t unit = round_up(kDotUnit, job.align);
  const int64_t units = ceil_div(job.n, unit);
  run(job, pool, units, 8, [&](int64_t u0, int64_t u1) {
    thread_local Scratch up_scratch;
    float* up_tmp = job.silu ? up_scratch.get(job.m * unit) : nullptr;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t c0 = u * unit, c1 = std::min(job.n, c0 + unit);
      dot_columns(job, c0, c1, up_tmp);
      if (job.epilogue != nullptr) job.epilogue->apply(0, job.m, c0, c1, job.y, job.n);
    }
  });
}

// ------------------------------------------------------------------------------------------
// Panel path: x packed once per call into [M/mr][K][mr]; output blocks of (rows x columns)
// computed by the mr x nr microkernel over K blocks of kc, with W micro-panels (kc x kPanel)
// either read in place from prepare_weight's panels (direct: small M, W streamed once) or
// converted/packed to float32 per K block (amortised over all rows of the block).

struct Plan {
  int64_t mr, mpanels;            // x panels of mr rows (balanced: mr <= kernels' mr)
  int64_t mblocks, panels_per_mblock;
  int64_t unit, units, units_per_block;  // columns: work units (aligned) and blocking
  int64_t kc;
  bool direct;  // micro reads prepared panels in the file dtype
};

/// Rows [m0, m1) x columns [c0, c1) (c0 and c1 multiples of the unit, or c1 = n).
void panel_block(const Job& job, const Plan& plan, const float* xpacked, int64_t m0, int64_t m1,
                 int64_t c0, int64_t c1) {
  const GemmKernels& kr = *job.kr;
  const int64_t k = job.k, mr = plan.mr;
  const int64_t width = c1 - c0, rows = m1 - m0;
  const int64_t qpanels = ceil_div(width, kPanel);
  const int64_t sets = job.silu ? 2 : 1;  // SwiGLU: gate panels then up panels
  thread_local Scratch wscratch, cscratch;
  float* wbuf = plan.direct || (job.panels != nullptr && job.dtype == DType::kF32)
                    ? nullptr
                    : wscratch.get(sets * qpanels * kPanel * plan.kc);
  // Output target: y directly, or for SwiGLU a [rows][2 * width] gate|up tile.
  float* c = job.y + m0 * job.n + c0;
  int64_t ldc = job.n;
  if (job.silu) {
    ldc = 2 * width;
    c = cscratch.get(rows * ldc);
  }
  // One microkernel call per (x panel, mr) over W micro-panel wp (row stride kPanel).
  auto tile = [&](const void* wp, DType wtype, int64_t pc, int64_t kc, int64_t s, int64_t q,
                  bool acc, int64_t pf) {
    for (int sub = 0; sub * kr.nr < kPanel; ++sub) {
      const int64_t n_valid = std::min<int64_t>(kr.nr, width - q * kPanel - sub * kr.nr);
      if (n_valid <= 0) break;
      float* cq = c + s * width + q * kPanel + sub * kr.nr;
      for (int64_t i = m0; i < m1; i += mr) {
        const float* xp = xpacked + (i / mr) * k * mr + pc * mr;
        kr.micro(wtype, static_cast<int>(mr), xp, wp, sub, kPanel, kc, cq + (i - m0) * ldc, ldc,
                 static_cast<int>(std::min(mr, m1 - i)), static_cast<int>(n_valid), acc, pf);
      }
    }
  };
  if (plan.direct) {
    // Prepared panels read in place, each panel's K sequentially: one stream through W
    // (two streams, two panels at a time, for M <= 3: see micro2).
    const int64_t pf = tuning().panel_pf;
    const bool pairs = mr <= 3;
    const int64_t full = width / kPanel;  // panels whose columns are all valid
    const int64_t panel_stride = k * kPanel * job.esize();
    for (int64_t s = 0; s < sets; ++s) {
      int64_t q0 = 0;
      for (; pairs && q0 + 2 <= full; q0 += 2) {
        const int64_t row = s * job.up_offset + c0 + q0 * kPanel;
        for (int64_t pc = 0; pc < k; pc += plan.kc) {
          const int64_t kc = std::min(plan.kc, k - pc);
          const bool acc = pc > 0 || (job.accumulate && !job.silu);
          for (int sub = 0; sub * kr.nr < kPanel; ++sub) {
            float* cq = c + s * width + q0 * kPanel + sub * kr.nr;
            for (int64_t i = m0; i < m1; i += mr) {
              const float* xp = xpacked + (i / mr) * k * mr + pc * mr;
              kr.micro2(job.dtype, static_cast<int>(mr), xp, job.panel(row, pc), panel_stride,
                        sub, kPanel, kc, cq + (i - m0) * ldc, ldc,
                        static_cast<int>(std::min(mr, m1 - i)), acc, pf);
            }
          }
        }
      }
      for (int64_t q = q0; q < qpanels; ++q) {
        const int64_t row = s * job.up_offset + c0 + q * kPanel;
        for (int64_t pc = 0; pc < k; pc += plan.kc) {
          const int64_t kc = std::min(plan.kc, k - pc);
          tile(job.panel(row, pc), job.dtype, pc, kc, s, q,
               pc > 0 || (job.accumulate && !job.silu), pf);
        }
      }
    }
  } else {
    // Prepared f32 panels already are float32 micro-panels: used in place, no copy.
    const bool in_place = job.panels != nullptr && job.dtype == DType::kF32;
    for (int64_t pc = 0; pc < k; pc += plan.kc) {
      const int64_t kc = std::min(plan.kc, k - pc);
      for (int64_t s = 0; s < sets && !in_place; ++s) {
        for (int64_t q = 0; q < qpanels; ++q) {
          const int64_t row = s * job.up_offset + c0 + q * kPanel;
          float* dst = wbuf + (s * qpanels + q) * kc * kPanel;
          if (job.panels != nullptr) {
            kr.convert(job.dtype, job.panel(row, pc), kc, dst);
          } else {
            kr.pack_w(job.dtype, job.w_row(row), k,
                      std::min<int64_t>(kPanel, c1 - (c0 + q * kPanel)), pc, kc, dst);
          }
        }
      }
      const bool acc = pc > 0 || (job.accumulate && !job.silu);
      for (int64_t s = 0; s < sets; ++s) {
        for (int64_t q = 0; q < qpanels; ++q) {
          const void* wp = in_place ? job.panel(s * job.up_offset + c0 + q * kPanel, pc)
                                    : wbuf + (s * qpanels + q) * kc * kPanel;
          tile(wp, DType::kF32, pc, kc, s, q, acc, 0);
        }
      }
    }
  }
  if (job.silu) {
    for (int64_t i = 0; i < rows; ++i) {
      kr.silu_mul(c + i * ldc, c + i * ldc + width, job.y + (m0 + i) * job.n + c0, width);
    }
  }
  if (job.epilogue != nullptr) job.epilogue->apply(m0, m1, c0, c1, job.y, job.n);
}

void gemm_panels(const Job& job, ThreadPool* pool) {
  const GemmKernels& kr = *job.kr;
  const auto& t = tuning();
  Plan plan{};
  // Balanced x panels: M = 32 -> 3 x 11 rather than 14 + 14 + 4.
  plan.mpanels = ceil_div(job.m, kr.mr);
  plan.mr = ceil_div(job.m, plan.mpanels);
  plan.direct = job.panels != nullptr && job.m <= t.max_direct_m;
  plan.kc = std::min(t.kc, job.k);
  // Column units: multiples of the epilogue alignment and (prepared panels) of kPanel.
  plan.unit = job.panels != nullptr ? job.align / gcd(job.align, kPanel) * kPanel
                                    : round_up(kPanel, job.align);
  plan.units = ceil_div(job.n, plan.unit);
  const int64_t nc = job.silu ? t.nc / 2 : t.nc;
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  // Enough work items for the dynamic split to even out (>= 4 per thread where possible):
  // smaller column blocks, then (large M) more row blocks. One thread (no pool) needs no
  // split: whole column blocks keep panel pairs together for micro2. A one-row [64, 1024]
  // bf16 GEMM (a qwen3moe-1b router, as each thread of MoeMlp's one-token job runs it) had
  // a block per 32-column panel, one two-chain FMA stream each; with this and pack_x's
  // one-row copy it went from 6.0 to 1.5 us cache-resident, 6.8 to 3.6 us from DRAM.
  const int64_t want_items = threads > 1 ? 4 * threads : 1;
  plan.units_per_block =
      std::clamp<int64_t>(plan.units / want_items, 1, std::max<int64_t>(1, nc / plan.unit));
  const int64_t nblocks = ceil_div(plan.units, plan.units_per_block);
  plan.mblocks = std::max(ceil_div(job.m, t.mc), ceil_div(want_items, nblocks));
  plan.mblocks = std::min(plan.mblocks, plan.mpanels);
  plan.panels_per_mblock = ceil_div(plan.mpanels, plan.mblocks);
  plan.mblocks = ceil_div(plan.mpanels, plan.panels_per_mblock);

  // Pack x once: [mpanels][k][mr], shared by all threads.
  thread_local Scratch xscratch;
  float* xpacked = xscratch.get(plan.mpanels * job.k * plan.mr);
  auto pack = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t i = p * plan.mr;
      kr.pack_x(job.x + i * job.k, job.k, std::min(plan.mr, job.m - i), job.k,
                static_cast<int>(plan.mr), xpacked + p * job.k * plan.mr);
    }
  };
  if (plan.mpanels >= 8) {
    run(job, pool, plan.mpanels, 4, pack);
  } else {
    pack(0, plan.mpanels);
  }

  // Work items: (row block, column block of units_per_block units), taken dynamically.
  const int64_t block_cols = plan.units_per_block * plan.unit;
  run(job, pool, plan.mblocks * nblocks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t mb = item / nblocks, nb = item % nblocks;
      const int64_t m0 = mb * plan.panels_per_mblock * plan.mr;
      const int64_t m1 = std::min(job.m, m0 + plan.panels_per_mblock * plan.mr);
      const int64_t c0 = nb * block_cols;
      panel_block(job, plan, xpacked, m0, m1, c0, std::min(job.n, c0 + block_cols));
    }
  });
}

void dispatch(Job& job, ThreadPool* pool) {
  if (job.m <= 0 || job.n <= 0) return;
  job.kr = &kernels();
  job.align = 1;
  if (job.epilogue != nullptr) job.align = std::max<int64_t>(1, job.epilogue->column_alignment());
  // Batch invariance: the path depends only on W (row-major W: dot path for every M;
  // prepared W: panel path for every M), never on M, so row i of y has the same bits
  // whatever the other rows are. The direct (M <= max_direct_m) and converting panel paths
  // run the same per-element FMA chain.
  if (job.k == 0 || job.panels == nullptr) {
    gemm_dot(job, pool);
  } else {
    gemm_panels(job, pool);
  }
}

}  // namespace

namespace gemm_detail {
GemmTuning& gemm_tuning() {
  static GemmTuning t;
  return t;
}
}  // namespace gemm_detail

Expected<WeightMatrix> concat_rows(std::span<const WeightMatrix> parts) {
  if (parts.empty()) return InvalidArgument("concat_rows: no matrices");
  const int64_t cols = parts[0].cols;
  int64_t rows = 0;
  bool same_dtype = true, any_quantized = false;
  for (const WeightMatrix& p : parts) {
    if (p.cols != cols) {
      return InvalidArgument("concat_rows: column counts differ ({} vs {})", p.cols, cols);
    }
    if (p.rows < 0 || (p.rows > 0 && p.data == nullptr && p.parts == nullptr)) {
      return InvalidArgument("concat_rows: part without data");
    }
    if (cols % dtype_block_elems(p.dtype) != 0) {
      return InvalidArgument("concat_rows: {} columns are not whole {} blocks", cols,
                             dtype_name(p.dtype));
    }
    rows += p.rows;
    same_dtype = same_dtype && p.dtype == parts[0].dtype && p.parts == nullptr;
    any_quantized = any_quantized || is_quantized_weight(p);
  }
  if (any_quantized) {
    // A quantized part: keep every part as it is (flattening nested parts), never copied; the
    // quantized GEMM repacks from the parts themselves (usually the mapped file).
    auto list = std::make_shared<std::vector<WeightMatrix>>();
    for (const WeightMatrix& p : parts) {
      if (p.parts != nullptr) {
        list->insert(list->end(), p.parts->begin(), p.parts->end());
      } else {
        list->push_back(p);
      }
    }
    WeightMatrix w;
    w.dtype = parts[0].dtype;
    w.rows = rows;
    w.cols = cols;
    w.parts = std::move(list);
    return w;
  }
  const DType dtype = same_dtype ? parts[0].dtype : DType::kF32;
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(dtype, cols));
  const size_t bytes = static_cast<size_t>(rows) * row_bytes;
  std::shared_ptr<uint8_t[]> buf(new uint8_t[std::max<size_t>(bytes, 1)]);
  uint8_t* dst = buf.get();
  for (const WeightMatrix& p : parts) {
    const int64_t count = p.rows * cols;
    if (p.dtype == dtype) {
      std::memcpy(dst, p.data, static_cast<size_t>(p.rows) * row_bytes);
    } else {
      float* out = reinterpret_cast<float*>(dst);
      const auto* src16 = static_cast<const uint16_t*>(p.data);
      for (int64_t i = 0; i < count; ++i) {
        out[i] = p.dtype == DType::kF32   ? static_cast<const float*>(p.data)[i]
                 : p.dtype == DType::kF16 ? f16_to_f32(src16[i])
                                          : bf16_to_f32(src16[i]);
      }
    }
    dst += static_cast<size_t>(p.rows) * row_bytes;
  }
  WeightMatrix w;
  w.data = buf.get();
  w.dtype = dtype;
  w.rows = rows;
  w.cols = cols;
  w.storage = std::shared_ptr<const void>(buf, buf.get());
  return w;
}

void prepare_weights(std::span<const PrepareJob> jobs, ThreadPool* pool) {
  const auto one = [&](int64_t i) { prepare_weight(*jobs[i].w, jobs[i].use); };
  const int64_t n = static_cast<int64_t>(jobs.size());
  if (pool != nullptr && pool->num_threads() > 1 && n > 1) {
    pool->parallel_items(n, one);
  } else {
    for (int64_t i = 0; i < n; ++i) one(i);
  }
}

void prepare_weight(WeightMatrix& w, WeightUse use) {
  if (is_quantized_weight(w)) return prepare_quantized(w, use);  // qgemm tiles
  if (w.packed_format == kPackedPanels || w.data == nullptr || w.rows <= 0 || w.cols <= 0) {
    return;
  }
  // [ceil(N / 32)][K][32] in the file dtype, rows past N zero (bf16 rows permuted for the
  // unpack conversion, see kPanel): each thread's share of W becomes one sequential stream,
  // and micro-panels need no transposition per call.
  const int64_t n = w.rows, k = w.cols, esize = static_cast<int64_t>(dtype_size(w.dtype));
  const int64_t panels = ceil_div(n, kPanel);
  const size_t bytes = static_cast<size_t>(round_up(panels * k * kPanel * esize, 64));
  std::shared_ptr<uint8_t> block = alloc_weight_block(bytes);
  if (block == nullptr) throw std::bad_alloc();
  uint8_t* const buf = block.get();
  std::memset(buf, 0, bytes);
  const auto* src = static_cast<const uint8_t*>(w.data);
  int pos[kPanel];  // stored position of each column (bf16 rows are permuted, see kPanel)
  for (int j = 0; j < kPanel; ++j) {
    pos[j] = w.dtype == DType::kBF16 ? gemm_detail::bf16_panel_position(j) : j;
  }
  constexpr int64_t kBlock = 64;  // K block of the transposing copy (cache-friendly)
  for (int64_t p = 0; p < panels; ++p) {
    uint8_t* dst = buf + p * k * kPanel * esize;
    const int64_t rows = std::min<int64_t>(kPanel, n - p * kPanel);
    for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
      const int64_t k1 = std::min(k, k0 + kBlock);
      for (int64_t j = 0; j < rows; ++j) {
        const uint8_t* row = src + ((p * kPanel + j) * k) * esize;
        if (esize == 4) {
          for (int64_t kk = k0; kk < k1; ++kk) {
            std::memcpy(dst + (kk * kPanel + pos[j]) * 4, row + kk * 4, 4);
          }
        } else {
          for (int64_t kk = k0; kk < k1; ++kk) {
            std::memcpy(dst + (kk * kPanel + pos[j]) * 2, row + kk * 2, 2);
          }
        }
      }
    }
  }
  w.packed = std::shared_ptr<const void>(block, buf);
  w.packed_format = kPackedPanels;
  // gemm() always reads the panels; gemm_silu_mul() only when F is a panel multiple (see there).
  const bool panels_only = use == WeightUse::kGemm || (w.rows / 2) % kPanel == 0;
  if (w.storage != nullptr && panels_only) {
    w.storage.reset();
    w.data = nullptr;
  }
}

void gemm(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
          GemmOutput mode, const GemmEpilogue* epilogue) {
  if (is_quantized_weight(w)) {
    if (quant_gemm_ready(w)) return gemm_quant(x, m, w, y, pool, mode, epilogue);
    return quant_gemm().gemm(x, m, w, y, pool, mode, epilogue);
  }
  Job job{};
  job.x = x;
  job.m = m;
  job.k = w.cols;
  job.w = w.data;
  job.panels = w.packed_format == kPackedPanels ? w.packed.get() : nullptr;
  job.dtype = w.dtype;
  job.n = w.rows;
  LLMS_CHECK(job.panels != nullptr || job.w != nullptr || job.m * job.n * job.k == 0,
             "gemm: weight has no data");
  job.silu = false;
  job.y = y;
  job.accumulate = mode == GemmOutput::kAccumulate;
  job.epilogue = epilogue;
  dispatch(job, pool);
}

void gemm_grouped(std::span<const GemmProblem> problems, ThreadPool* pool) {
  if (quant_grouped_ready(problems, false)) return gemm_quant_grouped(problems, pool);
  for (const GemmProblem& g : problems) gemm(g.x, g.m, *g.w, g.y, pool);
}

void gemm_silu_mul_grouped(std::span<const GemmProblem> problems, ThreadPool* pool) {
  if (quant_grouped_ready(problems, true)) return gemm_silu_mul_quant_grouped(problems, pool);
  for (const GemmProblem& g : problems) gemm_silu_mul(g.x, g.m, *g.w, g.y, pool);
}

void gemm_silu_mul(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                   ThreadPool* pool) {
  if (is_quantized_weight(gate_up)) {
    if (quant_gemm_ready(gate_up)) return gemm_silu_mul_quant(x, m, gate_up, out, pool);
    return quant_gemm().gemm_silu_mul(x, m, gate_up, out, pool);
  }
  Job job{};
  job.x = x;
  job.m = m;
  job.k = gate_up.cols;
  job.w = gate_up.data;
  job.dtype = gate_up.dtype;
  job.n = gate_up.rows / 2;
  job.up_offset = job.n;
  // Prepared panels pair gate row j with up row F + j only when F is a panel multiple.
  if (gate_up.packed_format == kPackedPanels && job.n % kPanel == 0) {
    job.panels = gate_up.packed.get();
  }
  LLMS_CHECK(job.panels != nullptr || job.w != nullptr || job.m * job.n * job.k == 0,
             "gemm_silu_mul: weight has neither row-major data nor usable panels");
  job.silu = true;
  job.y = out;
  job.accumulate = false;
  job.epilogue = nullptr;
  dispatch(job, pool);
}

const char* gemm_isa() { return kernels().name; }

}  // namespace llmserve
