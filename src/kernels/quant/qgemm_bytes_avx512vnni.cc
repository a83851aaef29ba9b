// The AVX-512 VNNI byte kernels of the quantized GEMM: Q4_K and Q6_K few-row calls
// (qgemm_avx512_bytes.h), for the AVX-512 VNNI family.
//
// The arithmetic of qgemm_avx2_bytes.h with vpdpbusd: the 4-bit codes as unsigned bytes (two
// masks and a shift per 64 codes, where the 16-bit-lane kernel spends a shift and a mask per
// 32), the activation codes split into two signed bytes (split_acts_avx2), and each 4-byte
// group of code x part products summed straight into int32 (no int16 stage, so no limit on
// how many add up). Per row and sub-block, lo + (hi << kSplitShift) is exactly the recipe's
// integer sum of code x activation (qgemm.h); times the sub-scale and summed over the chunk's
// sub-blocks it is the int32 the other families compute, and the float steps are theirs, so
// y has their bits (test_qgemm's family test).
#include <immintrin.h>

#include <cstring>

#include "common/check.h"
#include "kernels/quant/qgemm_avx2_bytes.h"
#include "kernels/quant/qgemm_avx512_bytes.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_* values (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace llmserve::qgemm {
namespace {

#define LLMS_QINLINE inline __attribute__((always_inline))

/// acc += vpdpbusd(w, the 4 signed bytes at p broadcast to every dword), in place (with the
/// intrinsic GCC 12 copies the accumulator around each instruction; see qgemm_avx512vnni.cc).
LLMS_QINLINE void dpbusd_bcast(__m512i& acc, __m512i w, const int8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
}

LLMS_QINLINE __m512i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// Min sub-block rows a and b (16 columns each, uint8) -> 32 int16 lanes (column c: a_c, b_c).
LLMS_QINLINE __m512i min_pair(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y)));
}

/// `MR` rows of Q4_K over one 256-element chunk (its eight 32-element units, one sub-block
/// each). C independent lo / hi accumulator pairs per row (2 for few rows, so the dot
/// products do not wait on each other's latency).
template <int MR>
void q4k_vnni_kernel(const QActs& a, int64_t row0, int64_t k0, int64_t e, const uint8_t* rec,
                     const RecordLayout& lay, float* facc, const uint8_t* pf, int64_t pf_bytes) {
  constexpr int kUnits = kChunk / kUnit;
  constexpr int C = MR <= 2 ? 2 : 1;
  LLMS_CHECK(e == kChunk, "q4k_vnni_kernel: chunk of {} elements", e);
  const __m512i nib = _mm512_set1_epi16(0x0F0F);
  const int64_t chunk = k0 / kChunk;
  __m512 s[MR];
  const int8_t* sp[MR];
  const int16_t* bs[MR];
  #pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    s[r] = _mm512_set1_ps(a.s[(row0 + r) * a.chunks + chunk]);
    sp[r] = a.split + (row0 + r) * 2 * a.k + 2 * k0;
    bs[r] = a.bsplit + ((row0 + r) * a.chunks + chunk) * 32;
  }
  const int64_t pf_lines = (pf_bytes + 63) / 64;
  const int64_t per_unit = (pf_lines + kUnits - 1) / kUnits;
  const uint8_t* pf_next = pf;
  const uint8_t* const pf_stop = pf + 64 * pf_lines;
  __m512i bacc[MR];
  #pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) bacc[r] = _mm512_setzero_si512();
  for (int u = 0; u < kUnits; ++u) {
    for (int64_t l = 0; l < per_unit && pf_next < pf_stop; ++l, pf_next += 64)
      _mm_prefetch(reinterpret_cast<const char*>(pf_next), _MM_HINT_T0);
    __m512i lo[MR][C], hi[MR][C];
    #pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
      #pragma GCC unroll 2
      for (int c = 0; c < C; ++c) lo[r][c] = hi[r][c] = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {  // p4 vector i of the unit: elements 8 i .. 8 i + 7
      const __m512i v = _mm512_loadu_si512(rec + lay.p4 + (4 * u + i) * 64);
      const __m512i w02 = _mm512_and_si512(v, nib);
      const __m512i w13 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const int8_t* g = sp[r] + 16 * (4 * u + i);
        dpbusd_bcast(lo[r][0], w02, g);
        dpbusd_bcast(hi[r][0], w02, g + 8);
        dpbusd_bcast(lo[r][C - 1], w13, g + 4);
        dpbusd_bcast(hi[r][C - 1], w13, g + 12);
      }
    }
    const __m512i sc = _mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + lay.sub + u * kTileCols)));
    #pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      __m512i l = lo[r][0], h = hi[r][0];
      if constexpr (C == 2) {
        l = _mm512_add_epi32(l, lo[r][1]);
        h = _mm512_add_epi32(h, hi[r][1]);
      }
      const __m512i isum = _mm512_add_epi32(l, _mm512_slli_epi32(h, kSplitShift));
      bacc[r] = _mm512_add_epi32(bacc[r], _mm512_mullo_epi32(isum, sc));
    }
  }
  // The super-block's float steps, exactly as the other kernels': d * s on the integer sum,
  // then dm * s on the min term sum_j min_j * bsum_j (bsum split hi * 512 + lo, QActs::bsplit).
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + lay.d)));
  const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + lay.dm)));
  __m512i mp[4];
  #pragma GCC unroll 4
  for (int p = 0; p < 4; ++p)
    mp[p] = min_pair(rec + lay.min + 2 * p * kTileCols, rec + lay.min + (2 * p + 1) * kTileCols);
  #pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    __m512i mlo = _mm512_setzero_si512(), mhi = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      mlo = _mm512_add_epi32(mlo, _mm512_madd_epi16(mp[p], bcast4(bs[r] + 2 * p)));
      mhi = _mm512_add_epi32(mhi, _mm512_madd_epi16(mp[p], bcast4(bs[r] + 16 + 2 * p)));
    }
    const __m512i mn = _mm512_add_epi32(mlo, _mm512_slli_epi32(mhi, 9));
    float* f = facc + r * kTileCols;
    __m512 acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(bacc[r]), _mm512_mul_ps(d, s[r]), _mm512_loadu_ps(f));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mn), _mm512_mul_ps(dm, s[r]), acc);
    _mm512_storeu_ps(f, acc);
  }
}

/// Sub-scale rows a and b (16 columns each, int8) -> 32 int16 lanes (column c: a_c, b_c).
LLMS_QINLINE __m512i scale_pair(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y)));
}

/// `MR` rows of Q6_K over one 256-element chunk: qgemm_bytes_avx512.cc's codes (the p4
/// nibbles with the p2 high bits) into vpdpbusd, per 16-element sub-block.
template <int MR>
void q6k_vnni_kernel(const QActs& a, int64_t row0, int64_t k0, int64_t e, const uint8_t* rec,
                     const RecordLayout& lay, float* facc, const uint8_t* pf, int64_t pf_bytes) {
  constexpr int kUnits = kChunk / kUnit;
  constexpr int C = MR <= 2 ? 2 : 1;
  LLMS_CHECK(e == kChunk, "q6k_vnni_kernel: chunk of {} elements", e);
  const __m512i nib = _mm512_set1_epi16(0x0F0F);
  const __m512i hi2 = _mm512_set1_epi16(0x3030);
  const int64_t chunk = k0 / kChunk;
  __m512 s[MR];
  const int8_t* sp[MR];
  alignas(32) int16_t bsum[MR][16];  // the chunk's 16-element code sums (|.| <= 16 * 2047)
  #pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    s[r] = _mm512_set1_ps(a.s[(row0 + r) * a.chunks + chunk]);
    sp[r] = a.split + (row0 + r) * 2 * a.k + 2 * k0;
    const int32_t* b = a.bsum16 + (row0 + r) * (a.k / 16) + k0 / 16;
    _mm256_store_si256(reinterpret_cast<__m256i*>(bsum[r]), _mm512_cvtepi32_epi16(_mm512_loadu_si512(b)));
  }
  const int64_t pf_lines = (pf_bytes + 63) / 64;
  const int64_t per_unit = (pf_lines + kUnits - 1) / kUnits;
  const uint8_t* pf_next = pf;
  const uint8_t* const pf_stop = pf + 64 * pf_lines;
  __m512i bacc[MR];
  #pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) bacc[r] = _mm512_setzero_si512();
  for (int u = 0; u < kUnits; ++u) {
    for (int64_t l = 0; l < per_unit && pf_next < pf_stop; ++l, pf_next += 64)
      _mm_prefetch(reinterpret_cast<const char*>(pf_next), _MM_HINT_T0);
    #pragma GCC unroll 2
    for (int sb = 0; sb < 2; ++sb) {  // two 16-element sub-blocks per unit
      __m512i lo[MR][C], hi[MR][C];
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        #pragma GCC unroll 2
        for (int c = 0; c < C; ++c) lo[r][c] = hi[r][c] = _mm512_setzero_si512();
      const __m512i hb = _mm512_loadu_si512(rec + lay.p2 + (2 * u + sb) * 64);
      #pragma GCC unroll 2
      for (int iv = 0; iv < 2; ++iv) {
        const int i = sb * 2 + iv;  // p4 vector of the unit: elements 8 i .. 8 i + 7
        const __m512i v = _mm512_loadu_si512(rec + lay.p4 + (4 * u + i) * 64);
        const __m512i x02 = i % 2 == 0 ? hb : _mm512_slli_epi16(hb, 4);
        const __m512i x13 = i % 2 == 0 ? _mm512_slli_epi16(hb, 2) : _mm512_srli_epi16(hb, 2);
        // (v & nib) | (x & hi2): imm 0xEA = (A & B) | C.
        const __m512i w02 = _mm512_ternarylogic_epi32(v, nib, _mm512_and_si512(x02, hi2), 0xEA);
        const __m512i w13 =
            _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), nib, _mm512_and_si512(x13, hi2), 0xEA);
        #pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const int8_t* g = sp[r] + 16 * (4 * u + i);
          dpbusd_bcast(lo[r][0], w02, g);
          dpbusd_bcast(hi[r][0], w02, g + 8);
          dpbusd_bcast(lo[r][C - 1], w13, g + 4);
          dpbusd_bcast(hi[r][C - 1], w13, g + 12);
        }
      }
      const __m512i sc = _mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + lay.sub + (2 * u + sb) * kTileCols)));
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        __m512i l = lo[r][0], h = hi[r][0];
        if constexpr (C == 2) {
          l = _mm512_add_epi32(l, lo[r][1]);
          h = _mm512_add_epi32(h, hi[r][1]);
        }
        const __m512i isum = _mm512_add_epi32(l, _mm512_slli_epi32(h, kSplitShift));
        bacc[r] = _mm512_add_epi32(bacc[r], _mm512_mullo_epi32(isum, sc));
      }
    }
  }
  // isum = sum sc * code * a - 32 * sum_s sc_s * bsum_s (exact modulo 2^32; the true isum fits
  // int32: qformat.h act_qmax), then d * s on it.
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + lay.d)));
  __m512i sp2[8];
  #pragma GCC unroll 8
  for (int p = 0; p < 8; ++p)
    sp2[p] = scale_pair(rec + lay.sub + 2 * p * kTileCols, rec + lay.sub + (2 * p + 1) * kTileCols);
  #pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    __m512i off = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) off = _mm512_add_epi32(off, _mm512_madd_epi16(sp2[p], bcast4(bsum[r] + 2 * p)));
    const __m512i isum = _mm512_sub_epi32(bacc[r], _mm512_slli_epi32(off, 5));
    float* f = facc + r * kTileCols;
    _mm512_storeu_ps(f, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, s[r]), _mm512_loadu_ps(f)));
  }
}

}  // namespace

bool bytes_kernel_type_avx512vnni(DType type) { return type == DType::kQ4_K || type == DType::kQ6_K; }

void fused_bytes_avx512vnni(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                            const uint8_t* rec, const RecordLayout& lay, float* facc,
                            const uint8_t* pf, int64_t pf_bytes) {
  const bool q6 = type == DType::kQ6_K;
  LLMS_CHECK(q6 || type == DType::kQ4_K, "fused_bytes_avx512vnni: {}", dtype_name(type));
  switch (mr) {
#define LLMS_BYTES(R)                                                              \
  case R:                                                                          \
    if (q6) return q6k_vnni_kernel<R>(a, row0, k0, e, rec, lay, facc, pf, pf_bytes); \
    return q4k_vnni_kernel<R>(a, row0, k0, e, rec, lay, facc, pf, pf_bytes);
    LLMS_BYTES(1) LLMS_BYTES(2) LLMS_BYTES(3) LLMS_BYTES(4) LLMS_BYTES(5) LLMS_BYTES(6)
#undef LLMS_BYTES
    default: LLMS_CHECK(false, "fused_bytes_avx512vnni: mr {}", mr);
  }
}

#undef LLMS_QINLINE

}  // namespace llmserve::qgemm
