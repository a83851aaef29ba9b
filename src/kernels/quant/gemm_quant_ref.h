// Reference GEMMs for quantized weights: the slow, obviously-correct path that gemm() and
// gemm_silu_mul() (kernels/gemm.h) take when a WeightMatrix is quantized or stacked from parts
// of different types (WeightMatrix::parts). Faster kernels will replace it at the dispatch
// point in kernels/cpu/gemm.cc and are tested against it, so it stays simple:
//
//  - work items are ranges of output columns (= weight rows), aligned to the epilogue's
//    column_alignment(), spread over the ThreadPool;
//  - per item, one weight row at a time (a panel of kPanelRows) is dequantized with the
//    scalar reference dequantizer (quant/dequantize_ref.h) into a thread-local float buffer
//    and dotted with every activation row; the whole matrix is never dequantized;
//  - each output element is one dot product accumulated in double over k in a fixed order
//    (8 lanes, lane j taking k = j mod 8, then a fixed pairwise sum) and rounded to float
//    once, so a row's result depends on neither M, nor the other rows, nor the thread count
//    (batch invariance, docs/batch_invariance.md).
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "kernels/gemm.h"

namespace llmserve {

/// y[M, N] = (or += for kAccumulate) x[M, K] · W[N, K]^T for any W (quantized, mixed parts,
/// or float), with gemm()'s contract: x and y row-major float32 (row strides K and N),
/// `epilogue` (optional) applied once to every finished tile [0, M) x [n0, n1) with n0, n1
/// multiples of its column_alignment() (or N).
void gemm_quant_ref(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
                    GemmOutput mode = GemmOutput::kStore, const GemmEpilogue* epilogue = nullptr);

/// gemm_silu_mul()'s contract for any W: gate_up is [2F, K], out[M, F] = silu(x·Wgate^T) *
/// (x·Wup^T) with silu(g) = g / (1 + exp(-g)) in float.
void gemm_silu_mul_quant_ref(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                             ThreadPool* pool);

/// The dot product every output element of the reference GEMMs is (see above): double
/// accumulation over 8 fixed lanes, rounded to float once.
float dot_ref(const float* x, const float* w, int64_t k);

}  // namespace llmserve
