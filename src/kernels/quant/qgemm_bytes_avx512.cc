// The AVX-512 byte kernels of the quantized GEMM (qgemm_avx2_bytes.h's contract on 512-bit
// vectors, AVX-512 BW): Q6_K few-row calls, for the AVX-512 family (VNNI: qgemm_bytes_avx512vnni.cc).
//
// The AVX2 kernels (qgemm_avx2_bytes.cc) work on half tiles of 8 columns; here one zmm holds
// a whole tile (16 columns x 2 parities of int16), so each unit's p4 plane vector is one
// 64-byte load and every activation broadcast serves all 16 columns. The arithmetic is the
// AVX2 kernels' exactly (the same int16 partial sums, the same widening by the sub-scales, the
// same float steps), hence the recipe's bits (qgemm.h). Why only Q6_K: its 6-bit codes take
// five shift / mask / or steps per k-pair in the 16-bit-lane kernel (kpair_dot) against
// Q4_K's one or two, and here they come out of two masks and a shift per 64 codes.
#include "kernels/quant/qgemm_avx512_bytes.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_* values (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "common/check.h"
#include "kernels/quant/qgemm_avx2_bytes.h"

namespace llmserve::qgemm {
namespace {

#define LLMS_QINLINE inline __attribute__((always_inline))

LLMS_QINLINE __m512i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// Sub-scale rows a and b (16 columns each, int8) -> 32 int16 lanes (column c: a_c, b_c); a == b
/// gives each column's scale for both parities.
LLMS_QINLINE __m512i scale_pair(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y)));
}

/// `MR` rows of Q6_K over one 256-element chunk (qgemm_avx2_bytes.cc bytes_kernel<true, MR, 2>
/// on a whole tile).
template <int MR>
void q6_bytes_kernel(const QActs& a, int64_t row0, int64_t k0, int64_t e, const uint8_t* rec,
                     const RecordLayout& lay, float* facc, const uint8_t* pf, int64_t pf_bytes) {
  constexpr int kUnits = kChunk / kUnit;
  LLMS_CHECK(e == kChunk, "q6_bytes_kernel: chunk of {} elements", e);
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
      __m512i lo16[MR], hi16[MR];
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) lo16[r] = hi16[r] = _mm512_setzero_si512();
      const __m512i hb = _mm512_loadu_si512(rec + lay.p2 + (2 * u + sb) * 64);
      #pragma GCC unroll 2
      for (int iv = 0; iv < 2; ++iv) {
        const int i = sb * 2 + iv;  // p4 vector of the unit: elements 8 i .. 8 i + 7
        const __m512i v = _mm512_loadu_si512(rec + lay.p4 + (4 * u + i) * 64);
        const __m512i x02 = i % 2 == 0 ? hb : _mm512_slli_epi16(hb, 4);
        const __m512i x13 = i % 2 == 0 ? _mm512_slli_epi16(hb, 2) : _mm512_srli_epi16(hb, 2);
        // (v & nib) | (x & hi2) in one ternary-logic op each: imm 0xEA = (A & B) | C with
        // C = x & hi2.
        const __m512i w02 = _mm512_ternarylogic_epi32(v, nib, _mm512_and_si512(x02, hi2), 0xEA);
        const __m512i w13 =
            _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), nib, _mm512_and_si512(x13, hi2), 0xEA);
        #pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const int8_t* g = sp[r] + 16 * (4 * u + i);
          lo16[r] = _mm512_add_epi16(lo16[r], _mm512_maddubs_epi16(w02, bcast4(g)));
          hi16[r] = _mm512_add_epi16(hi16[r], _mm512_maddubs_epi16(w02, bcast4(g + 8)));
          lo16[r] = _mm512_add_epi16(lo16[r], _mm512_maddubs_epi16(w13, bcast4(g + 4)));
          hi16[r] = _mm512_add_epi16(hi16[r], _mm512_maddubs_epi16(w13, bcast4(g + 12)));
        }
      }
      const uint8_t* scp = rec + lay.sub + (2 * u + sb) * kTileCols;
      const __m512i sc = scale_pair(scp, scp);
      const __m512i sc_hi = _mm512_slli_epi16(sc, kSplitShift);
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        bacc[r] = _mm512_add_epi32(bacc[r], _mm512_add_epi32(_mm512_madd_epi16(lo16[r], sc),
                                                             _mm512_madd_epi16(hi16[r], sc_hi)));
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

bool bytes_kernel_type_avx512(DType type) { return type == DType::kQ6_K; }

void fused_bytes_avx512(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                        const uint8_t* rec, const RecordLayout& lay, float* facc,
                        const uint8_t* pf, int64_t pf_bytes) {
  LLMS_CHECK(type == DType::kQ6_K, "fused_bytes_avx512: {}", dtype_name(type));
  switch (mr) {
#define LLMS_BYTES(R) \
  case R: return q6_bytes_kernel<R>(a, row0, k0, e, rec, lay, facc, pf, pf_bytes);
    LLMS_BYTES(1) LLMS_BYTES(2) LLMS_BYTES(3) LLMS_BYTES(4) LLMS_BYTES(5) LLMS_BYTES(6)
#undef LLMS_BYTES
    default: LLMS_CHECK(false, "fused_bytes_avx512: mr {}", mr);
  }
}

#undef LLMS_QINLINE

}  // namespace llmserve::qgemm
