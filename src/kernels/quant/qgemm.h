// llmserve's GEMM for ggml-quantized weights: y[M, N] = x[M, K] · W[N, K]^T with W in any of
// the twelve block types (kernels/quant/qformat.h) and float32 x and y.
//
// The recipe (one per weight type, the same for every M, so a row's result never depends on
// what else is batched; docs/batch_invariance.md):
//  1. Activations are quantized per row and per 256-element chunk of K to integers of at
//     most `act_qmax` (qformat.h: 2047 .. 32767, i.e. 12 to 16 bits; as many as a scale
//     block's int32 sum allows): s = amax / qmax, a_i = round_half_even(x_i * (qmax / amax)).
//     Finer than llama.cpp's 8-bit activations (its Q8_K / Q8_0), so the result is much
//     closer to the exact arithmetic of the stored weights.
//  2. For each scale block b of W row n (qformat.h: x_i = d (value_i sub_scale_i) + dm min_j),
//     in order of K: isum = sum_i value_i sub_scale_i a_i and Mn = sum_j min_j sum_{i in j} a_i
//     are exact int32, and acc = fma(float(isum), d * s, acc); acc = fma(float(Mn), dm * s,
//     acc) (float32, s the chunk's activation scale). y = acc.
// Integer sums are exact whatever the order, and the float steps are fixed per (row, column),
// so the SIMD kernels (AVX2, AVX-512, AVX-512 VNNI) and the scalar recipe reference
// (gemm_quant_recipe_ref) give the same bits, for any M, tile shape or thread count.
//
// Layout: prepare_quantized() repacks W once at load into 16-column tiles whose codes keep
// their bit width (4-bit, 2-bit, 1-bit and 8-bit planes interleaved so that shifts and masks
// on 16-bit lanes yield the pairs vpmaddwd / vpdpwssd multiply), integer sub-scales and mins
// as bytes and the float scales as fp16: about the file's size (Q4_K +3 %), never a
// dequantized copy. The GEMM then decodes one (tile, 256-chunk) at a time into an L1 buffer of
// int16 weights and runs an (MR rows x 16 columns) integer micro-kernel over it; calls of at
// most MR rows (decode) decode each record in registers instead (the fused kernels), and the
// Q4_K / Q5_K / Q6_K / Q5_0 ones multiply the codes as bytes against the activation codes split
// into two bytes (kernels/quant/qgemm_avx2_bytes.h, qgemm_avx512_bytes.h): the same integer
// sums, half the instructions.
#pragma once

#include <span>

#include <cstdint>
#include <memory>

#include "common/thread_pool.h"
#include "kernels/gemm.h"

namespace llmserve {

/// WeightMatrix::packed_format of a matrix repacked by prepare_quantized.
inline constexpr int32_t kPackedQuant = 0x5147;  // "QG"

/// Repacks a quantized (single-type) W for gemm_quant / gemm_silu_mul_quant (`use` says
/// whether W is a stacked [gate; up] SwiGLU matrix, whose halves are then packed separately).
/// A matrix of parts (mixed types) gets each part packed. No-op for float W.
void prepare_quantized(WeightMatrix& w, WeightUse use);

/// Whether gemm_quant can run W (it was prepared, or is a list of prepared parts).
bool quant_gemm_ready(const WeightMatrix& w);

/// gemm()'s contract for a prepared quantized W (kernels/gemm.h).
void gemm_quant(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
                GemmOutput mode, const GemmEpilogue* epilogue);

/// gemm_silu_mul()'s contract for a prepared quantized [gate; up] W.
/// Whether every problem's W is one prepared part (silu: prepared for SwiGLU), so the grouped
/// calls below can run them.
bool quant_grouped_ready(std::span<const GemmProblem> problems, bool silu);
/// gemm_quant (store, no epilogue) / gemm_silu_mul_quant of every problem as one pool job: the
/// same work items, so each y holds the bits the single calls give.
void gemm_quant_grouped(std::span<const GemmProblem> problems, ThreadPool* pool);
void gemm_silu_mul_quant_grouped(std::span<const GemmProblem> problems, ThreadPool* pool);

void gemm_silu_mul_quant(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                         ThreadPool* pool);

/// The recipe above computed by plain scalar code straight from the file's blocks (no
/// repacking, no SIMD): the obviously-correct twin the fast kernels must match bit for bit.
/// W must be a single quantized type. y[M, N] = result (kStore semantics).
void gemm_quant_recipe_ref(const float* x, int64_t m, const WeightMatrix& w, float* y);

/// Name of the quantized kernel family in use ("avx512vnni", "avx512", "avxvnni", "avx2"), for logs and
/// benchmark labels.
const char* quant_gemm_isa();

}  // namespace llmserve
