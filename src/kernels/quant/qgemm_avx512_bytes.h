// Private to kernels/quant/: the AVX-512 few-row byte kernels, the contract of qgemm_avx2_bytes.h
// on whole 16-column tiles, with the activations split by split_acts_avx2 (the same byte
// layout): Q6_K and Q5_0 for the AVX-512 family (qgemm_bytes_avx512.cc, vpmaddubsw), Q4_K,
// Q5_K, Q6_K and Q5_0 for the AVX-512 VNNI family (qgemm_bytes_avx512vnni.cc, vpdpbusd); calls
// of at most 6 rows. One implementation for both: qgemm_avx512_bytes_impl.h.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {

/// Whether the AVX-512 byte kernel handles `type` (Q6_K, Q5_0).
bool bytes_kernel_type_avx512(DType type);

/// QKernels::fused for a type with bytes_kernel_type_avx512 (mr <= 6); a.split must be filled.
/// Enter only on a CPU with AVX-512 BW.
void fused_bytes_avx512(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                        const uint8_t* rec, const RecordLayout& lay, float* facc,
                        const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks);

/// The AVX-512 VNNI family's byte kernels (qgemm_bytes_avx512vnni.cc): Q4_K, Q5_K, Q6_K and
/// Q5_0 with vpdpbusd (the same integer sums). Same contract (mr <= 6, a.split filled); enter only on a CPU
/// with AVX-512 VNNI.
bool bytes_kernel_type_avx512vnni(DType type);
void fused_bytes_avx512vnni(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                            const uint8_t* rec, const RecordLayout& lay, float* facc,
                            const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks);

}  // namespace llmserve::qgemm
