// Private to kernels/quant/: the AVX2 few-row kernels that multiply 4-, 5- and 6-bit codes as
// unsigned bytes (vpmaddubsw, or AVX-VNNI's vpdpbusd) with the 16-bit activation codes split
// into two signed bytes, so AVX2 does 32 multiply-adds per instruction instead of vpmaddwd's 16
// while computing exactly the recipe's integer sums (qgemm.h). Used by qgemm_avx2.cc (and
// qgemm_avxvnni.cc) for Q4_K, Q5_K, Q6_K and Q5_0 calls of at most 4 rows (decode).
//
// The split: an activation code a with |a| <= 8191 is a = 64 * hi + lo with lo = a & 63 in
// [0, 63] and hi = a >> 6 in [-128, 127]. vpmaddubsw sums two code x part products into int16
// without saturating: Q4_K (codes 0..15) at most 2 * 15 * 128 = 3840, so eight results add in
// int16 (30720); Q5_K and Q5_0 (0..31, act_qmax 4095: hi in [-64, 63]) at most 2 * 31 * 64 =
// 3968, so eight add (31744); Q6_K (0..63, act_qmax 2047: hi in [-32, 31]) at most
// 2 * 63 * 63 = 7938, so four add (31752). vpmaddwd then widens the int16 sums with the
// sub-block scale (hi: times 64; Q5_0: 1 and 64), exact in int32.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {

/// a = (hi << kSplitShift) + lo (see above).
inline constexpr int kSplitShift = 6;

/// Whether the byte kernels handle `type` (Q4_K, Q5_K, Q6_K, Q5_0: act_qmax <= 8191).
bool bytes_kernel_type(DType type);

/// Fills a.split for rows [r0, r1) from a.q: per row and group of 8 codes x[0..7] of a
/// 32-element unit, 16 bytes lo(x0 x4 x1 x5) lo(x2 x6 x3 x7) hi(x0 x4 x1 x5) hi(x2 x6 x3 x7):
/// the byte order in which a p4 plane word's nibbles (0, 2) and (1, 3) meet their activations
/// (qgemm_internal.h RecordLayout). a.k must be a multiple of 32.
void split_acts_avx2(const QActs& a, int64_t r0, int64_t r1);

/// QKernels::fused for a type with bytes_kernel_type (mr <= 4); a.split must be filled.
void fused_bytes_avx2(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                      const uint8_t* rec, const RecordLayout& lay, float* facc,
                      const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks);

/// fused_bytes_avx2 with vpdpbusd (int32 sums, no int16 partial sums; same results): only on a
/// CPU with AVX-VNNI (cpu_has_avx_vnni()).
void fused_bytes_avxvnni(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                         const uint8_t* rec, const RecordLayout& lay, float* facc,
                         const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks);

}  // namespace llmserve::qgemm
