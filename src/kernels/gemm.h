// GEMM for the model's linear layers: y[M, N] = x[M, K] · W[N, K]^T with float32 activations
// and weights in their stored dtype (f32, f16 or bf16: the file's, or --dtype's when the loader
// converted them; widened in registers, never up front; ggml block-quantized types go through
// kernels/quant/qgemm.h). Kernels are chosen at run time from the CPU's features (AVX-512 + AVX512-BF16 when
// present, AVX2 + FMA otherwise). Decode batches are small-M GEMMs (bandwidth-bound: each
// weight byte is read once per call for all M rows); prefill batches are large-M
// (compute-bound).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "common/thread_pool.h"

namespace llmserve {

/// A weight matrix W[N, K] (row-major, out_features x in_features) in its stored dtype.
/// `data` usually points into a memory-mapped model file; when the matrix was built in memory
/// (concat_rows, prepare_weight, a --dtype conversion) `storage` owns the bytes and copies share
/// them. For a quantized dtype each row is dtype_row_bytes(dtype, K) bytes of whole blocks (K a
/// multiple of the block).
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  // N (out features)
  int64_t cols = 0;  // K (in features)
  std::shared_ptr<const void> storage;  // owner of `data` when not file-backed (may be null)
  /// Set only by concat_rows of parts whose dtypes differ when one of them is quantized (a
  /// llama-quantize "_M" mix gives attn_v another type than attn_q/attn_k): the parts as
  /// they were (each borrowing its data), rows stacked in order, never converted. `data` is
  /// then null and `dtype` the first part's; the quantized GEMM path reads the parts.
  std::shared_ptr<const std::vector<WeightMatrix>> parts;
  /// Kernel-specific repacked copy of W in the same dtype (set by prepare_weight; may be
  /// null, then kernels read `data`). Layout is private to the GEMM implementation.
  std::shared_ptr<const void> packed;
  int32_t packed_format = 0;  // 0 = none; meaning private to the GEMM implementation
};

/// One GEMM of a group (gemm_grouped / gemm_silu_mul_grouped): x [m, w->cols] row-major, y
/// [m, w->rows] (gemm) or [m, w->rows / 2] (SwiGLU).
struct GemmProblem {
  const float* x = nullptr;
  int64_t m = 0;
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
};

/// Stacks matrices with equal `cols` along rows: result rows = sum of parts' rows, in order
/// (e.g. Wq;Wk;Wv -> one QKV projection, Wgate;Wup -> one gate/up GEMM). Float parts: the
/// result owns a copy in their common dtype, or in float32 if their dtypes differ. When any
/// part is quantized the parts are kept as they are (WeightMatrix::parts: no copy, no
/// dequantized float copy; the quantized GEMM repacks straight from them, usually the mapped
/// file): one GEMM call still computes all rows, each in its part's type. Errors:
/// InvalidArgument when parts is empty, `cols` differ, or a quantized part's cols are not
/// whole blocks.
Expected<WeightMatrix> concat_rows(std::span<const WeightMatrix> parts);

/// What a prepared matrix will be used with.
enum class WeightUse {
  kGemm,     // gemm()
  kSiluMul,  // gemm_silu_mul() (rows = 2F, gate stacked over up)
};

/// Repacks W for this CPU's kernels (same dtype: a layout change only; a copy). Call once at
/// load time. Quantized (and mixed-part) matrices are left as they are for now (the
/// reference path reads rows in the file layout). When W owned an in-memory row-major copy (`storage`, e.g. from concat_rows) and
/// every kernel path for `use` reads the packed copy, that copy is released (`data` becomes
/// null) so the matrix is held once; file-backed `data` stays (it costs only page cache).
/// Never changes results beyond floating-point reassociation.
void prepare_weight(WeightMatrix& w, WeightUse use = WeightUse::kGemm);

/// A matrix to prepare and its use (prepare_weights).
struct PrepareJob {
  WeightMatrix* w;
  WeightUse use = WeightUse::kGemm;
};

/// prepare_weight for every job, each matrix on one of `pool`'s threads (null: this thread):
/// a model's load repacks its matrices in parallel. The results do not depend on the pool.
/// Not reentrant on `pool` (ThreadPool::parallel_items).
void prepare_weights(std::span<const PrepareJob> jobs, ThreadPool* pool);

/// Called on finished output tiles so that per-element work happens while the tile is hot
/// (e.g. RoPE + KV-cache write after the QKV projection: vLLM's reshape_and_cache fused into
/// the projection epilogue). apply() runs concurrently on disjoint tiles, from pool threads.
class GemmEpilogue {
 public:
  virtual ~GemmEpilogue() = default;
  /// Column ranges handed to apply() start and end at multiples of this (and at N).
  virtual int64_t column_alignment() const { return 1; }
  /// Rows [m0, m1) x columns [n0, n1) of y (row stride ldy floats) are final; may rewrite
  /// them in place.
  virtual void apply(int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* y,
                     int64_t ldy) const = 0;
};

enum class GemmOutput {
  kStore,       // y = x·W^T
  kAccumulate,  // y += x·W^T (residual add fused into the output projection)
};

/// y[M, N] = (or +=) x[M, K] · W[N, K]^T, x and y float32 row-major (row strides K and N).
/// Parallel on `pool` (null = calling thread only). `epilogue` (optional) sees every output
/// tile once after it is final.
void gemm(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
          GemmOutput mode = GemmOutput::kStore, const GemmEpilogue* epilogue = nullptr);

/// SwiGLU MLP input (Shazeer 2020): gate_up is [2F, K] = Wgate (rows 0..F-1) stacked over
/// Wup (rows F..2F-1). out[M, F] = silu(x·Wgate^T) * (x·Wup^T), silu(g) = g / (1 + e^-g),
/// computed tile by tile: the [M, 2F] intermediate never exists.
void gemm_silu_mul(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                   ThreadPool* pool);

/// gemm() (store, no epilogue) / gemm_silu_mul() of several independent problems, e.g. the
/// experts of one MoE layer each over its own tokens. When every weight is a prepared quantized
/// matrix of one type the problems run as one pool job (one dispatch instead of one per
/// problem, and no per-problem tail where a thread waits); otherwise one call after another.
/// Either way each y holds exactly the bits its single call gives (batch invariance).
void gemm_grouped(std::span<const GemmProblem> problems, ThreadPool* pool);
void gemm_silu_mul_grouped(std::span<const GemmProblem> problems, ThreadPool* pool);

/// Name of the kernel family gemm() uses on this CPU ("avx512bf16", "avx512", "avx2"), for
/// logs and benchmark labels.
const char* gemm_isa();

}  // namespace llmserve
