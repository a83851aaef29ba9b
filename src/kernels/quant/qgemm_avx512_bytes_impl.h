// Private to qgemm_bytes_avx512.cc and qgemm_bytes_avx512vnni.cc: the AVX-512 few-row byte
// kernel (qgemm_avx512_bytes.h), written once and instantiated by each file with its own
// compiler flags (internal linkage, as qgemm_kernels_impl.h).
//
// The AVX2 byte kernels' contract (qgemm_avx2_bytes.h) on whole tiles: one zmm holds a tile's
// 16 columns x 2 parities, so each unit's p4 plane vector is one 64-byte load and every
// activation broadcast serves all 16 columns. The codes come out as unsigned bytes (Q4_K: two
// masks and a shift per 64 4-bit codes; Q6_K: the same plus its p2 high bits, where the
// 16-bit-lane kernel spends up to five shift / mask / or steps per 32; Q5_K and Q5_0: plus
// the p1 fifth bit, a shift and a mask), and meet the activation codes split into two signed
// bytes (split_acts_avx2) in one of two ways:
//  - kVnni false (AVX-512 BW: Q6_K, Q5_0): vpmaddubsw into int16, the sub-block's int16 sums
//    widened by vpmaddwd with its sub-scale (hi: times 64), as the AVX2 kernels;
//  - kVnni true (VNNI: Q4_K, Q5_K, Q6_K, Q5_0): vpdpbusd sums each group of four products
//    straight into int32, and lo + (hi << 6) times the sub-scale is added per sub-block.
// Q5_0's scale block is the unit: its sum less 16 * sum(a) gets its float step per unit.
// Either way the integer sums are exactly the recipe's (qgemm.h) and the float steps are the
// other kernels', so y has every family's bits (test_qgemm's family test).
#pragma once

#include <immintrin.h>

#include <cstring>

#include "common/check.h"
#include "kernels/quant/qgemm_avx2_bytes.h"
#include "kernels/quant/qgemm_internal.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_* values (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace llmserve::qgemm {
namespace {

#define LLMS_QINLINE inline __attribute__((always_inline))

LLMS_QINLINE __m512i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// acc += vpdpbusd(w, the 4 signed bytes at p broadcast to every dword), in place (with the
/// intrinsic GCC 12 copies the accumulator around each instruction; see qgemm_avx512vnni.cc).
/// Only instantiated for VNNI CPUs (kVnni).
LLMS_QINLINE void dpbusd_bcast(__m512i& acc, __m512i w, const int8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
}

/// Byte rows a and b (16 columns each) -> 32 int16 lanes (column c: a_c, b_c), sign- or
/// zero-extended; a == b gives each column's value for both parities.
template <bool Signed>
LLMS_QINLINE __m512i byte_pair(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m256i v = _mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y));
  return Signed ? _mm512_cvtepi8_epi16(v) : _mm512_cvtepu8_epi16(v);
}

/// `MR` rows of type T (Q4_K, Q5_K, Q6_K, Q5_0) over a run of `nchunks` chunks (QKernels::fused);
/// see the top of the file.
template <DType T, bool kVnni, int MR>
void bytes_kernel_512(const QActs& a, int64_t row0, int64_t k0_first, int64_t e,
                      const uint8_t* rec_first, const RecordLayout& lay, float* facc,
                      const uint8_t* pf_first, const uint8_t* pf_end, int64_t nchunks) {
  for (int64_t ci = 0; ci < nchunks; ++ci) {  // the run's chunks, one after another
    const auto [k0, rec, pf, pf_bytes] =
        run_chunk(ci, k0_first, e, rec_first, lay, pf_first, pf_end);
    constexpr bool kQ6 = T == DType::kQ6_K;
    constexpr bool kP1 = T == DType::kQ5_K || T == DType::kQ5_0;  // fifth bit in the p1 plane
    constexpr bool kSuper = T != DType::kQ5_0;  // one 256-element super-block per chunk
    static_assert(kQ6 || kVnni || !kSuper, "Q4_K's / Q5_K's byte form pays only with vpdpbusd");
    constexpr int kSubs = kQ6 ? 2 : 1;  // sub-blocks per unit
    constexpr int kVecs = 4 / kSubs;    // p4 plane vectors per sub-block
    constexpr int C = kVnni && MR <= 2 ? 2 : 1;  // independent lo / hi accumulator pairs per row
    LLMS_CHECK(kSuper ? e == kChunk : e % kUnit == 0, "bytes_kernel_512: chunk of {} elements", e);
    const int64_t units = e / kUnit;
    const __m512i nib = _mm512_set1_epi16(0x0F0F);
    const __m512i hi2 = _mm512_set1_epi16(0x3030);
    const __m512i bit4 = _mm512_set1_epi16(0x1010);
    const int64_t chunk = k0 / kChunk;
    __m512 s[MR];
    const int8_t* sp[MR];
    const int16_t* bs[MR];             // Q4_K, Q5_K: the min sub-blocks' split code sums (QActs::bsplit)
    const int32_t* b16[MR];            // the row's 16-element code sums from k0
    alignas(32) int16_t bsum[MR][16];  // Q6_K: the chunk's 16-element code sums (|.| <= 16 * 2047)
    #pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      s[r] = _mm512_set1_ps(a.s[(row0 + r) * a.chunks + chunk]);
      sp[r] = a.split + (row0 + r) * 2 * a.k + 2 * k0;
      b16[r] = a.bsum16 + (row0 + r) * (a.k / 16) + k0 / 16;
      if constexpr (kQ6) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(bsum[r]), _mm512_cvtepi32_epi16(_mm512_loadu_si512(b16[r])));
      } else if constexpr (kSuper) {
        bs[r] = a.bsplit + ((row0 + r) * a.chunks + chunk) * 32;
      }
    }
    const int64_t pf_lines = (pf_bytes + 63) / 64;
    const int64_t per_unit = (pf_lines + units - 1) / units;
    const uint8_t* pf_next = pf;
    const uint8_t* const pf_stop = pf + 64 * pf_lines;
    __m512i bacc[MR];
    #pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) bacc[r] = _mm512_setzero_si512();
    for (int64_t u = 0; u < units; ++u) {
      prefetch_lines(pf_next, pf_stop, per_unit);
      __m512i h1 = _mm512_setzero_si512();
      if constexpr (kP1) h1 = _mm512_loadu_si512(rec + lay.p1 + u * 64);
      #pragma GCC unroll 2
      for (int sb = 0; sb < kSubs; ++sb) {
        __m512i lo[MR][C], hi[MR][C];  // int32 (kVnni) or int16 partial sums
        #pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
          #pragma GCC unroll 2
          for (int c = 0; c < C; ++c) lo[r][c] = hi[r][c] = _mm512_setzero_si512();
        __m512i hb = _mm512_setzero_si512();
        if constexpr (kQ6) hb = _mm512_loadu_si512(rec + lay.p2 + (2 * u + sb) * 64);
        #pragma GCC unroll 4
        for (int iv = 0; iv < kVecs; ++iv) {
          const int i = sb * kVecs + iv;  // p4 vector of the unit: elements 8 i .. 8 i + 7
          const __m512i v = _mm512_loadu_si512(rec + lay.p4 + (4 * u + i) * 64);
          __m512i w02, w13;
          if constexpr (kQ6 || kP1) {
            __m512i x02, x13, m;
            if constexpr (kQ6) {
              x02 = i % 2 == 0 ? hb : _mm512_slli_epi16(hb, 4);
              x13 = i % 2 == 0 ? _mm512_slli_epi16(hb, 2) : _mm512_srli_epi16(hb, 2);
              m = hi2;
            } else {  // q5_hi_bit: bits i, 8 + i (nibbles 0, 2); 4 + i, 12 + i (1, 3)
              x02 = _mm512_slli_epi16(h1, 4 - i);
              x13 = i == 0 ? h1 : _mm512_srli_epi16(h1, i);
              m = bit4;
            }
            // (v & nib) | (x & m) in one ternary-logic op each: imm 0xEA = (A & B) | C.
            w02 = _mm512_ternarylogic_epi32(v, nib, _mm512_and_si512(x02, m), 0xEA);
            w13 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), nib, _mm512_and_si512(x13, m), 0xEA);
          } else {
            w02 = _mm512_and_si512(v, nib);
            w13 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
          }
          #pragma GCC unroll 8
          for (int r = 0; r < MR; ++r) {
            const int8_t* g = sp[r] + 16 * (4 * u + i);
            if constexpr (kVnni) {
              dpbusd_bcast(lo[r][0], w02, g);
              dpbusd_bcast(hi[r][0], w02, g + 8);
              dpbusd_bcast(lo[r][C - 1], w13, g + 4);
              dpbusd_bcast(hi[r][C - 1], w13, g + 12);
            } else {
              lo[r][0] = _mm512_add_epi16(lo[r][0], _mm512_maddubs_epi16(w02, bcast4(g)));
              hi[r][0] = _mm512_add_epi16(hi[r][0], _mm512_maddubs_epi16(w02, bcast4(g + 8)));
              lo[r][0] = _mm512_add_epi16(lo[r][0], _mm512_maddubs_epi16(w13, bcast4(g + 4)));
              hi[r][0] = _mm512_add_epi16(hi[r][0], _mm512_maddubs_epi16(w13, bcast4(g + 12)));
            }
          }
        }
        #pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          if constexpr (kVnni && C == 2) {
            lo[r][0] = _mm512_add_epi32(lo[r][0], lo[r][1]);
            hi[r][0] = _mm512_add_epi32(hi[r][0], hi[r][1]);
          }
        }
        if constexpr (!kSuper) {
          // Q5_0's block: isum = sum code * a - 16 * sum a, then acc = fma(isum, d * s, acc).
          const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + lay.d + u * 32)));
          #pragma GCC unroll 8
          for (int r = 0; r < MR; ++r) {
            __m512i isum;
            if constexpr (kVnni) {
              isum = _mm512_add_epi32(lo[r][0], _mm512_slli_epi32(hi[r][0], kSplitShift));
            } else {
              isum = _mm512_add_epi32(_mm512_madd_epi16(lo[r][0], _mm512_set1_epi16(1)),
                                      _mm512_madd_epi16(hi[r][0], _mm512_set1_epi16(1 << kSplitShift)));
            }
            isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(16 * (b16[r][2 * u] + b16[r][2 * u + 1])));
            float* f = facc + r * kTileCols;
            _mm512_storeu_ps(f, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, s[r]), _mm512_loadu_ps(f)));
          }
          continue;
        }
        // The sub-block's scale (Q4_K, Q5_K: one per unit; Q6_K: two).
        const uint8_t* scp = rec + lay.sub + (kSubs * u + sb) * kTileCols;
        if constexpr (kVnni) {
          const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scp)));
          #pragma GCC unroll 8
          for (int r = 0; r < MR; ++r) {
            const __m512i isum = _mm512_add_epi32(lo[r][0], _mm512_slli_epi32(hi[r][0], kSplitShift));
            bacc[r] = _mm512_add_epi32(bacc[r], _mm512_mullo_epi32(isum, sc));
          }
        } else {
          const __m512i sc = byte_pair<true>(scp, scp);
          const __m512i sc_hi = _mm512_slli_epi16(sc, kSplitShift);
          #pragma GCC unroll 8
          for (int r = 0; r < MR; ++r)
            bacc[r] = _mm512_add_epi32(bacc[r], _mm512_add_epi32(_mm512_madd_epi16(lo[r][0], sc),
                                                                 _mm512_madd_epi16(hi[r][0], sc_hi)));
        }
      }
    }
    if constexpr (!kSuper) continue;  // the next chunk of the run
    // The super-block's float steps, exactly as the other kernels': d * s on the integer sum,
    // then for Q4_K / Q5_K dm * s on the min term sum_j min_j * bsum_j (bsum split hi * 512 + lo).
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + lay.d)));
    if constexpr (kQ6) {
      // isum = sum sc * code * a - 32 * sum_s sc_s * bsum_s (exact modulo 2^32; the true isum
      // fits int32: qformat.h act_qmax).
      __m512i sp2[8];
      #pragma GCC unroll 8
      for (int p = 0; p < 8; ++p)
        sp2[p] = byte_pair<true>(rec + lay.sub + 2 * p * kTileCols, rec + lay.sub + (2 * p + 1) * kTileCols);
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        __m512i off = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) off = _mm512_add_epi32(off, _mm512_madd_epi16(sp2[p], bcast4(bsum[r] + 2 * p)));
        const __m512i isum = _mm512_sub_epi32(bacc[r], _mm512_slli_epi32(off, 5));
        float* f = facc + r * kTileCols;
        _mm512_storeu_ps(f, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, s[r]), _mm512_loadu_ps(f)));
      }
    } else {
      const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + lay.dm)));
      __m512i mp[4];
      #pragma GCC unroll 4
      for (int p = 0; p < 4; ++p)
        mp[p] = byte_pair<false>(rec + lay.min + 2 * p * kTileCols, rec + lay.min + (2 * p + 1) * kTileCols);
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
  }
}

/// Whether the family (kVnni: AVX-512 VNNI, else AVX-512 BW) has a byte kernel for `type`.
template <bool kVnni>
constexpr bool bytes_type_512(DType type) {
  if (type == DType::kQ6_K || type == DType::kQ5_0) return true;
  return kVnni && (type == DType::kQ4_K || type == DType::kQ5_K);
}

template <DType T, bool kVnni>
void bytes_rows_512(int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e, const uint8_t* rec,
                    const RecordLayout& lay, float* facc, const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  if constexpr (bytes_type_512<kVnni>(T)) {
    switch (mr) {
#define LLMS_BYTES(R) \
  case R: return bytes_kernel_512<T, kVnni, R>(a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
      LLMS_BYTES(1) LLMS_BYTES(2) LLMS_BYTES(3) LLMS_BYTES(4) LLMS_BYTES(5) LLMS_BYTES(6)
#undef LLMS_BYTES
      default: break;
    }
  }
  LLMS_CHECK(false, "AVX-512 byte kernel: {} mr {}", dtype_name(T), mr);
}

/// QKernels::fused for the byte types of one family (mr <= 6; bytes_type_512).
template <bool kVnni>
void fused_bytes_512(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                     const uint8_t* rec, const RecordLayout& lay, float* facc, const uint8_t* pf,
                     const uint8_t* pf_end, int64_t nchunks) {
  switch (type) {
    case DType::kQ4_K: return bytes_rows_512<DType::kQ4_K, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_K: return bytes_rows_512<DType::kQ5_K, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ6_K: return bytes_rows_512<DType::kQ6_K, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_0: return bytes_rows_512<DType::kQ5_0, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    default: LLMS_CHECK(false, "AVX-512 byte kernel: {}", dtype_name(type));
  }
}

#undef LLMS_QINLINE

}  // namespace
}  // namespace llmserve::qgemm
