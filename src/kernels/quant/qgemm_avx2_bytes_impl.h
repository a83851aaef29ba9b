// Private to qgemm_avx2_bytes.cc and qgemm_bytes_avxvnni.cc: the AVX2 few-row byte kernel
// (qgemm_avx2_bytes.h), written once and instantiated by each file with its own compiler flags
// (internal linkage, as qgemm_kernels_impl.h).
//
// Per 32-element unit and half tile (8 columns): each of the unit's four p4 plane vectors
// (16-bit lane words of 4 nibbles, RecordLayout) yields two byte vectors, nibbles (0, 2) and
// (1, 3) of every word, i.e. for column c and parity p the codes of elements (2j + p,
// 2j + 4 + p) of its group of 8; a column's four bytes of a vector are one dword. They meet a
// broadcast 4-byte pattern of the split activations in that order (split_acts_avx2) in one of
// two ways:
//  - kVnni false (AVX2): vpmaddubsw gives per column and parity an int16 sum of two products;
//    eight such results of the unit add in int16 (lo and hi parts apart), and vpmaddwd with the
//    unit's sub-scale (hi: times 64) folds the parities into the column's int32 sum;
//  - kVnni true (AVX-VNNI): vpdpbusd sums each column's four products straight into int32, and
//    lo + (hi << 6) times the sub-scale is added per sub-block (as the AVX-512 VNNI kernel).
// The integer sums equal the recipe's exactly (qgemm.h), so the float steps, and therefore the
// bits of y, are those of every other kernel family.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "common/check.h"
#include "kernels/quant/qgemm_avx2_bytes.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {
namespace {

#define LLMS_QINLINE inline __attribute__((always_inline))

LLMS_QINLINE __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/// acc += vpmaddubsw(w, a) (int16 lanes; w unsigned, a signed bytes), through asm: with the
/// intrinsics GCC 12 reassociates a unit's eight in-order int16 sums into a tree, computing every
/// product first, and spills about 20 ymm registers per unit of the one-row kernel.
LLMS_QINLINE void maddubs_acc(__m256i& acc, __m256i w, __m256i a) {
  __m256i t;
  __asm__("vpmaddubsw %3, %2, %1\n\tvpaddw %1, %0, %0" : "+x"(acc), "=&x"(t) : "x"(w), "x"(a));
}

/// acc += vpdpbusd(w, a) (int32 lanes: each dword's four w (unsigned) x a (signed) byte
/// products), in place; {vex}: the AVX-VNNI encoding, not AVX512-VNNI's EVEX one. Only
/// instantiated in the AVX-VNNI file (kVnni).
LLMS_QINLINE void dpbusd_acc(__m256i& acc, __m256i w, __m256i a) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(a));
}

LLMS_QINLINE __m256i bcast_pair16(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/// 8 int8 sub-scales (8 columns) -> 16 int16 lanes, each column's scale for both parities.
LLMS_QINLINE __m256i scale16(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(b, b));
}

/// Sub-scale rows a and b (8 columns each, int8) -> 16 int16 lanes interleaved (column c: a, b).
LLMS_QINLINE __m256i scale_pair16(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, y));
}

/// sum_p vpmaddwd(pairs[p], broadcast (v[2p], v[2p + 1])): column c's dot of its N int16
/// pairs with the N value pairs of v, in int32.
template <int N>
LLMS_QINLINE __m256i pair_dots(const __m256i* pairs, const int16_t* v) {
  __m256i acc = _mm256_setzero_si256();
  #pragma GCC unroll 8
  for (int p = 0; p < N; ++p)
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs[p], bcast_pair16(v + 2 * p)));
  return acc;
}

/// Min sub-block rows (8 columns each) -> 16 int16 lanes interleaved (column c: a, b).
LLMS_QINLINE __m256i min_pair16(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, y));
}

/// `MR` rows of type T (Q4_K, Q5_K, Q6_K, Q5_0) over a run of `nchunks` chunks
/// (QKernels::fused), `H` halves of the tile per pass over a record (2: both halves share the
/// activation broadcasts; 1: two passes, fewer live registers).
///
/// Q6_K's codes are 6 bits (0..63, value = code - 32): the nibble bytes get the two high bits
/// from the p2 plane (q6_hi_shift puts them one shift away from bits 4..5 of each byte), its
/// sub-blocks are 16 elements (two per unit) and its offset is taken off the integer sum as
/// 32 * sum_s sc_s * bsum_s. Q5_K and Q5_0 get their fifth bit from the p1 plane (q5_hi_bit:
/// one shift away from bit 4). Q5_0's scale blocks are the 32-element units themselves (no
/// sub-scale, value = code - 16): each unit's sum, less 16 * sum(a), gets its float step at
/// once, and a chunk may be any whole number of units (a row's short last chunk).
///
/// kVnni: vpdpbusd's int32 sums have no int16 bound, and with one or two rows each of the
/// (0, 2) and (1, 3) byte vectors gets its own lo / hi accumulators (C = 2), so the four-cycle
/// vpdpbusd chains do not serialize the unit.
template <DType T, bool kVnni, int MR, int H>
void bytes_kernel(const QActs& a, int64_t row0, int64_t k0_first, int64_t e,
                  const uint8_t* rec_first, const RecordLayout& lay, float* facc,
                  const uint8_t* pf_first, const uint8_t* pf_end, int64_t nchunks) {
  for (int64_t ci = 0; ci < nchunks; ++ci) {  // the run's chunks, one after another
    const auto [k0, rec, pf, pf_bytes] =
        run_chunk(ci, k0_first, e, rec_first, lay, pf_first, pf_end);
    constexpr bool kQ6 = T == DType::kQ6_K;
    constexpr bool kP1 = T == DType::kQ5_K || T == DType::kQ5_0;  // fifth bit in the p1 plane
    constexpr bool kSuper = T != DType::kQ5_0;  // one 256-element super-block per chunk
    constexpr int kPasses = 2 / H;
    constexpr int kSubs = kQ6 ? 2 : 1;         // sub-blocks per unit
    constexpr int kVecs = 4 / kSubs;           // p4 plane vectors per sub-block
    constexpr int C = kVnni && MR <= 2 ? 2 : 1;  // independent lo / hi accumulators per row, half
    LLMS_CHECK(kSuper ? e == kChunk : e % kUnit == 0, "bytes_kernel: chunk of {} elements", e);
    const int64_t units = e / kUnit;
    const __m256i nib = _mm256_set1_epi16(0x0F0F);
    const __m256i hi2 = _mm256_set1_epi16(0x3030);
    const __m256i bit4 = _mm256_set1_epi16(0x1010);
    const int64_t chunk = k0 / kChunk;
    __m256 s[MR];
    const int8_t* sp[MR];
    const int16_t* bs[MR];
    const int32_t* b16[MR];            // the row's 16-element code sums from k0
    alignas(32) int16_t bsum[MR][16];  // Q6_K: the chunk's 16-element code sums, as int16
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      s[r] = _mm256_set1_ps(a.s[(row0 + r) * a.chunks + chunk]);
      sp[r] = a.split + (row0 + r) * 2 * a.k + 2 * k0;
      bs[r] = a.bsplit + ((row0 + r) * a.chunks + chunk) * 32;
      b16[r] = a.bsum16 + (row0 + r) * (a.k / 16) + k0 / 16;
      if constexpr (kQ6) {  // |bsum| <= 16 * 2047 fits int16
        const int32_t* b = b16[r];
        const __m256i p = _mm256_packs_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)),
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(bsum[r]), _mm256_permute4x64_epi64(p, 0xD8));
      }
    }
    const int64_t pf_lines = (pf_bytes + 63) / 64;
    #pragma GCC unroll 2
    for (int pass = 0; pass < kPasses; ++pass) {
      const int64_t pf_first = pf_lines * pass / kPasses, pf_end = pf_lines * (pass + 1) / kPasses;
      const int64_t per_unit = (pf_end - pf_first + units - 1) / units;
      const uint8_t* pf_next = pf + 64 * pf_first;
      const uint8_t* const pf_stop = pf + 64 * pf_end;
      __m256i bacc[MR][H];
      #pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        #pragma GCC unroll 2
        for (int hh = 0; hh < H; ++hh) bacc[r][hh] = _mm256_setzero_si256();
      for (int64_t u = 0; u < units; ++u) {
        prefetch_lines(pf_next, pf_stop, per_unit);
        __m256i h1[H];
        if constexpr (kP1)
          #pragma GCC unroll 2
          for (int hh = 0; hh < H; ++hh)
            h1[hh] = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(rec + lay.p1 + u * 64 + (pass * H + hh) * 32));
        #pragma GCC unroll 2
        for (int sb = 0; sb < kSubs; ++sb) {
          __m256i lo[MR][H][C], hi[MR][H][C];  // int16 (AVX2) or int32 (kVnni) partial sums
          #pragma GCC unroll 8
          for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 2
            for (int hh = 0; hh < H; ++hh)
              #pragma GCC unroll 2
              for (int c = 0; c < C; ++c) lo[r][hh][c] = hi[r][hh][c] = _mm256_setzero_si256();
          __m256i hb[H];
          if constexpr (kQ6)
            #pragma GCC unroll 2
            for (int hh = 0; hh < H; ++hh)
              hb[hh] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                  rec + lay.p2 + (2 * u + sb) * 64 + (pass * H + hh) * 32));
          #pragma GCC unroll 4
          for (int iv = 0; iv < kVecs; ++iv) {
            const int i = sb * kVecs + iv;  // p4 vector of the unit: elements 8 i .. 8 i + 7
            __m256i w02[H], w13[H];
            #pragma GCC unroll 2
            for (int hh = 0; hh < H; ++hh) {
              const int h = pass * H + hh;
              const __m256i v = _mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(rec + lay.p4 + (4 * u + i) * 64 + h * 32));
              w02[hh] = _mm256_and_si256(v, nib);
              w13[hh] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
              if constexpr (kQ6) {
                const __m256i x02 = i % 2 == 0 ? hb[hh] : _mm256_slli_epi16(hb[hh], 4);
                const __m256i x13 = i % 2 == 0 ? _mm256_slli_epi16(hb[hh], 2)
                                               : _mm256_srli_epi16(hb[hh], 2);
                w02[hh] = _mm256_or_si256(w02[hh], _mm256_and_si256(x02, hi2));
                w13[hh] = _mm256_or_si256(w13[hh], _mm256_and_si256(x13, hi2));
              }
              if constexpr (kP1) {  // q5_hi_bit: bits i, 8 + i (nibbles 0, 2); 4 + i, 12 + i
                const __m256i x02 = _mm256_slli_epi16(h1[hh], 4 - i);
                const __m256i x13 = i == 0 ? h1[hh] : _mm256_srli_epi16(h1[hh], i);
                w02[hh] = _mm256_or_si256(w02[hh], _mm256_and_si256(x02, bit4));
                w13[hh] = _mm256_or_si256(w13[hh], _mm256_and_si256(x13, bit4));
              }
            }
            #pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
              const int8_t* g = sp[r] + 16 * (4 * u + i);
              const __m256i lo02 = bcast4(g), lo13 = bcast4(g + 4);
              const __m256i hi02 = bcast4(g + 8), hi13 = bcast4(g + 12);
              #pragma GCC unroll 2
              for (int hh = 0; hh < H; ++hh) {
                if constexpr (kVnni) {
                  dpbusd_acc(lo[r][hh][0], w02[hh], lo02);
                  dpbusd_acc(hi[r][hh][0], w02[hh], hi02);
                  dpbusd_acc(lo[r][hh][C - 1], w13[hh], lo13);
                  dpbusd_acc(hi[r][hh][C - 1], w13[hh], hi13);
                } else {
                  maddubs_acc(lo[r][hh][0], w02[hh], lo02);
                  maddubs_acc(hi[r][hh][0], w02[hh], hi02);
                  maddubs_acc(lo[r][hh][0], w13[hh], lo13);
                  maddubs_acc(hi[r][hh][0], w13[hh], hi13);
                }
              }
            }
          }
          // kVnni: the column's int32 sum lo + (hi << 6) of the sub-block, in lo[r][hh][0].
          if constexpr (kVnni)
            #pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
              #pragma GCC unroll 2
              for (int hh = 0; hh < H; ++hh) {
                __m256i l = lo[r][hh][0], h = hi[r][hh][0];
                if constexpr (C == 2) {
                  l = _mm256_add_epi32(l, lo[r][hh][1]);
                  h = _mm256_add_epi32(h, hi[r][hh][1]);
                }
                lo[r][hh][0] = _mm256_add_epi32(l, _mm256_slli_epi32(h, kSplitShift));
              }
          if constexpr (kSuper) {
            #pragma GCC unroll 2
            for (int hh = 0; hh < H; ++hh) {
              const int h = pass * H + hh;
              const uint8_t* scp = rec + lay.sub + (kSubs * u + sb) * kTileCols + h * 8;
              if constexpr (kVnni) {
                const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scp)));
                #pragma GCC unroll 4
                for (int r = 0; r < MR; ++r)
                  bacc[r][hh] = _mm256_add_epi32(bacc[r][hh], _mm256_mullo_epi32(lo[r][hh][0], sc));
              } else {
                const __m256i sc = scale16(scp);
                const __m256i sc_hi = _mm256_slli_epi16(sc, kSplitShift);
                #pragma GCC unroll 4
                for (int r = 0; r < MR; ++r)
                  bacc[r][hh] = _mm256_add_epi32(
                      bacc[r][hh], _mm256_add_epi32(_mm256_madd_epi16(lo[r][hh][0], sc),
                                                    _mm256_madd_epi16(hi[r][hh][0], sc_hi)));
              }
            }
          } else {
            // Q5_0's block: isum = sum code * a - 16 * sum a, then acc = fma(isum, d * s, acc).
            const __m256i one = _mm256_set1_epi16(1), hi_w = _mm256_set1_epi16(1 << kSplitShift);
            #pragma GCC unroll 2
            for (int hh = 0; hh < H; ++hh) {
              const int h = pass * H + hh;
              const __m256 d = _mm256_cvtph_ps(
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + lay.d + u * 32 + h * 16)));
              #pragma GCC unroll 4
              for (int r = 0; r < MR; ++r) {
                const __m256i off = _mm256_set1_epi32(16 * (b16[r][2 * u] + b16[r][2 * u + 1]));
                const __m256i isum = _mm256_sub_epi32(
                    kVnni ? lo[r][hh][0]
                          : _mm256_add_epi32(_mm256_madd_epi16(lo[r][hh][0], one),
                                             _mm256_madd_epi16(hi[r][hh][0], hi_w)),
                    off);
                float* f = facc + r * kTileCols + h * 8;
                _mm256_storeu_ps(f, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, s[r]),
                                                    _mm256_loadu_ps(f)));
              }
            }
          }
        }
      }
      if constexpr (!kSuper) continue;
      // The super-block's float steps, exactly as the other kernels': d * s on the integer sum,
      // then (Q4_K, Q5_K) dm * s on the min term sum_j min_j * bsum_j (bsum split hi * 512 + lo).
      #pragma GCC unroll 2
      for (int hh = 0; hh < H; ++hh) {
        const int h = pass * H + hh;
        const __m256 d = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + lay.d + h * 16)));
        if constexpr (kQ6) {
          // isum = sum sc * code * a - 32 * sum_s sc_s * bsum_s (exact modulo 2^32, and the
          // true isum fits int32: qformat.h act_qmax).
          __m256i sp2[8];
          #pragma GCC unroll 8
          for (int p = 0; p < 8; ++p)
            sp2[p] = scale_pair16(rec + lay.sub + 2 * p * kTileCols + h * 8,
                                  rec + lay.sub + (2 * p + 1) * kTileCols + h * 8);
          #pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            const __m256i off = pair_dots<8>(sp2, bsum[r]);
            const __m256i isum = _mm256_sub_epi32(bacc[r][hh], _mm256_slli_epi32(off, 5));
            float* f = facc + r * kTileCols + h * 8;
            _mm256_storeu_ps(f, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, s[r]),
                                                _mm256_loadu_ps(f)));
          }
        } else {
          const __m256 dm = _mm256_cvtph_ps(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + lay.dm + h * 16)));
          __m256i mp[4];
          #pragma GCC unroll 4
          for (int p = 0; p < 4; ++p)
            mp[p] = min_pair16(rec + lay.min + 2 * p * kTileCols + h * 8,
                               rec + lay.min + (2 * p + 1) * kTileCols + h * 8);
          #pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            const __m256i mn = _mm256_add_epi32(pair_dots<4>(mp, bs[r]),
                                                _mm256_slli_epi32(pair_dots<4>(mp, bs[r] + 16), 9));
            float* f = facc + r * kTileCols + h * 8;
            __m256 acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(bacc[r][hh]), _mm256_mul_ps(d, s[r]),
                                         _mm256_loadu_ps(f));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mn), _mm256_mul_ps(dm, s[r]), acc);
            _mm256_storeu_ps(f, acc);
          }
        }
      }
    }
  }
}

/// bytes_kernel<T, kVnni> for a run-time row count (1 <= mr <= 4).
template <DType T, bool kVnni>
void bytes_rows(int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e, const uint8_t* rec,
                const RecordLayout& lay, float* facc, const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  switch (mr) {
    case 1: return bytes_kernel<T, kVnni, 1, 2>(a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case 2: return bytes_kernel<T, kVnni, 2, 1>(a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case 3: return bytes_kernel<T, kVnni, 3, 1>(a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case 4: return bytes_kernel<T, kVnni, 4, 1>(a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    default: LLMS_CHECK(false, "AVX2 byte kernel: mr {}", mr);
  }
}

/// QKernels::fused for the byte types (bytes_kernel_type; mr <= 4).
template <bool kVnni>
void fused_bytes_256(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                     const uint8_t* rec, const RecordLayout& lay, float* facc,
                     const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  switch (type) {
    case DType::kQ4_K: return bytes_rows<DType::kQ4_K, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_K: return bytes_rows<DType::kQ5_K, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ6_K: return bytes_rows<DType::kQ6_K, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_0: return bytes_rows<DType::kQ5_0, kVnni>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    default: LLMS_CHECK(false, "AVX2 byte kernel: {}", dtype_name(type));
  }
}

#undef LLMS_QINLINE

}  // namespace
}  // namespace llmserve::qgemm
