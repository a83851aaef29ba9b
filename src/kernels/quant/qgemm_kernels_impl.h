// Private to qgemm_avx2.cc / qgemm_avx512.cc / qgemm_avx512vnni.cc: the quantized GEMM's
// decode, micro-kernel and activation quantizer written once over an ISA traits class V and
// instantiated by each translation unit with its own compiler flags (internal linkage, so the
// instantiations never meet). The including file includes <immintrin.h> and the headers
// below, and defines V with:
//   iv / fv                      integer / float vector types
//   kHalves                      vectors per tile row of 32 int16 lanes (AVX2 2, AVX-512 1)
//   kCols                        columns per int32 / float vector (16 / kHalves)
//   kMaxMr                       most rows per fused (few-row) call
//   kChunkMr                     rows per chunk micro-kernel call
//   load, store, zero, set1_16, set1_32, and_, or_, sub16, mullo16, add32, mullo32,
//   srli<S>, slli<S> (16-bit lanes), lut (pshufb), bcast_pair, madd_acc, scale_row, p8_row,
//   min_row, load32 / store32, cvt (int32 -> float), halves_row (fp16 -> float), loadf,
//   storef, mulf, fmaf, set1f, sum16 (sum of 16 int16), and quantize_chunk (activation step 1
//   for one row chunk, see qgemm.h).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>

#include "common/check.h"
#include "kernels/quant/qgemm_internal.h"
#include "quant/block_formats.h"

namespace llmserve::qgemm {
namespace {

// The decode helpers must melt into the kernels' loops (a call would spill the plane
// vectors to the stack and cost a vzeroupper per k-pair group).
#define LLMS_QINLINE inline __attribute__((always_inline))

// ------------------------------------------------------------------------------------------
// Decode: one (tile, chunk) record -> int16 weights (value * sub_scale) per k-pair.

template <class V, int J>
LLMS_QINLINE typename V::iv nib(typename V::iv w) {  // nibble J (0..3) of each 16-bit lane
  if constexpr (J == 3) return V::template srli<12>(w);
  else if constexpr (J == 0) return V::and_(w, V::set1_16(0xF));
  else return V::and_(V::template srli<4 * J>(w), V::set1_16(0xF));
}
/// Bit J of each lane moved to bit `To`.
template <class V, int J, int To>
LLMS_QINLINE typename V::iv bit_to(typename V::iv h) {
  const auto mask = V::set1_16(static_cast<int16_t>(1 << To));
  if constexpr (J < To) return V::and_(V::template slli<To - J>(h), mask);
  else if constexpr (J == To) return V::and_(h, mask);
  else return V::and_(V::template srli<J - To>(h), mask);
}
/// Bits From..From+1 of each lane moved to bits To..To+1.
template <class V, int From, int To>
LLMS_QINLINE typename V::iv bits2_to(typename V::iv h) {
  const auto mask = V::set1_16(static_cast<int16_t>(3 << To));
  if constexpr (From < To) return V::and_(V::template slli<To - From>(h), mask);
  else if constexpr (From == To) return V::and_(h, mask);
  else return V::and_(V::template srli<From - To>(h), mask);
}
/// Bits 2J..2J+1 of each lane moved to bits To..To+1.
template <class V, int J, int To>
LLMS_QINLINE typename V::iv crumb_to(typename V::iv h) {
  return bits2_to<V, 2 * J, To>(h);
}

/// IQ4_NL codebook + 128 as unsigned bytes, repeated in every 128-bit lane (pshufb table).
struct Iq4Lut {
  alignas(64) uint8_t v[64];
  Iq4Lut() {
    for (int i = 0; i < 64; ++i) v[i] = static_cast<uint8_t>(quant::kIq4nlValues[i % 16] + 128);
  }
};
inline const uint8_t* iq4_lut_u8() {
  static const Iq4Lut lut;
  return lut.v;
}

/// The stored codes of k-pair J (0..15) of a 32-element unit, as 16-bit lanes: from the
/// unit's plane vectors (w4: 4-bit, h2: 2-bit, h1: 1-bit) or, for 8-bit codes, from `p8`.
template <class V, int Bits, int J>
LLMS_QINLINE typename V::iv code_vec(const typename V::iv* w4, const typename V::iv* h2,
                        const typename V::iv& h1, const uint8_t* p8) {
  if constexpr (Bits == 8) {
    return V::p8_row(p8);
  } else if constexpr (Bits == 2) {
    return crumb_to<V, J % 8, 0>(h2[J / 8]);
  } else if constexpr (Bits == 3) {
    return V::or_(crumb_to<V, J % 8, 0>(h2[J / 8]), bit_to<V, J, 2>(h1));
  } else {
    typename V::iv c = nib<V, J % 4>(w4[J / 4]);
    if constexpr (Bits == 5) c = V::or_(c, bit_to<V, q5_hi_bit(J), 4>(h1));
    if constexpr (Bits == 6) c = V::or_(c, bits2_to<V, q6_hi_shift(J % 8), 4>(h2[J / 8]));
    return c;
  }
}

/// Loads the plane vectors of unit u, half h (see code_vec).
template <class V, int Bits>
LLMS_QINLINE void load_planes(const uint8_t* rec, const RecordLayout& lay, int64_t u, int h,
                 typename V::iv* w4, typename V::iv* h2, typename V::iv& h1) {
  constexpr int kH = V::kHalves;
  if constexpr (Bits == 4 || Bits == 5 || Bits == 6)
    #pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) w4[i] = V::load(rec + lay.p4 + (4 * u + i) * 64 + h * (64 / kH));
  if constexpr (Bits == 2 || Bits == 3 || Bits == 6)
    #pragma GCC unroll 16
    for (int i = 0; i < 2; ++i) h2[i] = V::load(rec + lay.p2 + (2 * u + i) * 64 + h * (64 / kH));
  if constexpr (Bits == 3 || Bits == 5) h1 = V::load(rec + lay.p1 + u * 64 + h * (64 / kH));
}

template <class V, int Bits, bool Codebook, int SubElems, int Offset>
void decode_values(const uint8_t* rec, const RecordLayout& lay, int64_t e, int16_t* wbuf) {
  using iv = typename V::iv;
  constexpr int kH = V::kHalves;
  const iv off = V::set1_16(static_cast<int16_t>(Codebook ? 128 : Offset));
  const iv lut = V::load(iq4_lut_u8());
  const iv hi_byte = V::set1_16(static_cast<int16_t>(0x8000));
  for (int64_t u = 0; u < e / kUnit; ++u) {
    #pragma GCC unroll 16
    for (int h = 0; h < kH; ++h) {
      iv w4[4], h2[2], h1 = V::zero();
      load_planes<V, Bits>(rec, lay, u, h, w4, h2, h1);
      // Sub-scales of the unit's one (32-element sub-blocks) or two (16-element) sub-blocks.
      iv sc[2];
      if constexpr (SubElems > 0)
        #pragma GCC unroll 16
        for (int i = 0; i < 32 / SubElems; ++i)
          sc[i] = V::scale_row(rec + lay.sub + (32 * u / SubElems + i) * kTileCols +
                               h * (kTileCols / kH));
      [&]<int... J>(std::integer_sequence<int, J...>) {
        (
            [&] {
              const int64_t kp = 16 * u + J;
              iv c = code_vec<V, Bits, J>(w4, h2, h1, rec + lay.p8 + kp * 32 + h * (32 / kH));
              if constexpr (Codebook) {
                c = V::sub16(V::lut(lut, V::or_(c, hi_byte)), off);
              } else if constexpr (Offset != 0) {
                c = V::sub16(c, off);
              }
              if constexpr (SubElems > 0) c = V::mullo16(c, sc[(2 * J) / SubElems]);
              V::store(wbuf + kp * kLanes + h * (kLanes / kH), c);
            }(),
            ...);
      }(std::make_integer_sequence<int, 16>{});
    }
  }
}

template <class V>
void decode(DType type, const uint8_t* rec, const RecordLayout& lay, int64_t e, int16_t* wbuf,
            float* d, float* dm, int16_t* mins) {
  const QuantTraits& t = quant_traits(type);
  switch (type) {
    case DType::kQ4_0: decode_values<V, 4, false, 0, 8>(rec, lay, e, wbuf); break;
    case DType::kQ4_1: decode_values<V, 4, false, 0, 0>(rec, lay, e, wbuf); break;
    case DType::kQ5_0: decode_values<V, 5, false, 0, 16>(rec, lay, e, wbuf); break;
    case DType::kQ5_1: decode_values<V, 5, false, 0, 0>(rec, lay, e, wbuf); break;
    case DType::kQ8_0: decode_values<V, 8, false, 0, 0>(rec, lay, e, wbuf); break;
    case DType::kIQ4_NL: decode_values<V, 4, true, 0, 0>(rec, lay, e, wbuf); break;
    case DType::kQ2_K: decode_values<V, 2, false, 16, 0>(rec, lay, e, wbuf); break;
    case DType::kQ3_K: decode_values<V, 3, false, 16, 4>(rec, lay, e, wbuf); break;
    case DType::kQ4_K: decode_values<V, 4, false, 32, 0>(rec, lay, e, wbuf); break;
    case DType::kQ5_K: decode_values<V, 5, false, 32, 0>(rec, lay, e, wbuf); break;
    case DType::kQ6_K: decode_values<V, 6, false, 16, 32>(rec, lay, e, wbuf); break;
    case DType::kIQ4_XS: decode_values<V, 4, true, 32, 0>(rec, lay, e, wbuf); break;
    default: LLMS_CHECK(false, "qgemm decode: {}", dtype_name(type));
  }
  constexpr int kH = V::kHalves;
  const int64_t blocks = e / t.block_elems;
  for (int64_t b = 0; b < blocks; ++b)
    #pragma GCC unroll 16
    for (int h = 0; h < kH; ++h) {
      V::storef(d + b * kTileCols + h * V::kCols,
                V::halves_row(rec + lay.d + b * kTileCols * 2 + h * (kTileCols * 2 / kH)));
      if (lay.dm >= 0)
        V::storef(dm + b * kTileCols + h * V::kCols,
                  V::halves_row(rec + lay.dm + b * kTileCols * 2 + h * (kTileCols * 2 / kH)));
    }
  // Mins as int16 pairs (sub-blocks 2p, 2p + 1 of each column in lanes 2c, 2c + 1), the
  // layout of the weights, so the min term is a few more vpmaddwd / vpdpwssd.
  if (lay.min >= 0)
    for (int64_t p = 0; p < e / t.min_sub / 2; ++p)
      #pragma GCC unroll 16
      for (int h = 0; h < kH; ++h)
        V::store(mins + p * kLanes + h * (kLanes / kH),
                 V::min_pair_row(rec + lay.min + 2 * p * kTileCols + h * (kTileCols / kH),
                                 rec + lay.min + (2 * p + 1) * kTileCols + h * (kTileCols / kH)));
}

// ------------------------------------------------------------------------------------------
// Micro-kernel: MR rows x 16 columns over one chunk, scale block by scale block.

/// Sum of the activation codes of min sub-block `j` (MinSub elements) starting at element
/// `at` of row r.
template <int MinSub>
LLMS_QINLINE int32_t bsum(const QActs& a, int64_t r, int64_t at) {
  const int32_t* b = a.bsum16 + r * (a.k / 16) + at / 16;
  if constexpr (MinSub == 16) return b[0];
  else return b[0] + b[1];
}

template <class V, int BlockElems, int MinSub, bool StoredMins, int MR, int NT>
void chunk_kernel(const QActs& a, int64_t row0, int64_t k0, int64_t e, const TileBufs* tb) {
  using iv = typename V::iv;
  using fv = typename V::fv;
  constexpr int kH = V::kHalves;
  constexpr int kKp = BlockElems / 2;
  constexpr int kW = NT * kH;  // weight vectors per k-pair
  const int64_t chunk = k0 / kChunk;
  const int64_t lda = a.k;
  for (int64_t b = 0; b < e / BlockElems; ++b) {
    // Flat accumulators and one activation base pointer + stride: GCC keeps these in
    // registers (arrays of pointers and 3-D arrays made it shuffle and spill).
    iv acc[MR * kW];
    #pragma GCC unroll 32
    for (int i = 0; i < MR * kW; ++i) acc[i] = V::zero();
    const int16_t* qa = a.q + row0 * lda + k0 + b * BlockElems;
    const int16_t* wb0 = tb[0].wbuf + b * kKp * kLanes;
    const int16_t* wb1 = tb[NT - 1].wbuf + b * kKp * kLanes;
    for (int kp = 0; kp < kKp; ++kp) {
      iv w[kW];
      #pragma GCC unroll 4
      for (int h = 0; h < kH; ++h) {
        w[h] = V::load(wb0 + kp * kLanes + h * (kLanes / kH));
        if constexpr (NT == 2) w[kH + h] = V::load(wb1 + kp * kLanes + h * (kLanes / kH));
      }
      #pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const iv av = V::bcast_pair(qa + r * lda + 2 * kp);
        #pragma GCC unroll 4
        for (int j = 0; j < kW; ++j) acc[r * kW + j] = V::madd_acc(acc[r * kW + j], w[j], av);
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const fv s = V::set1f(a.s[(row0 + r) * a.chunks + chunk]);
      #pragma GCC unroll 4
      for (int t = 0; t < NT; ++t)
        #pragma GCC unroll 4
        for (int h = 0; h < kH; ++h) {
          float* f = tb[t].facc + r * kTileCols + h * V::kCols;
          const fv dv = V::mulf(V::loadf(tb[t].d + b * kTileCols + h * V::kCols), s);
          fv acc_f = V::fmaf(V::cvt(acc[r * kW + t * kH + h]), dv, V::loadf(f));
          if constexpr (MinSub > 0) {
            iv mn;
            const int64_t at = k0 + b * BlockElems;
            if constexpr (StoredMins) {
              // sum_j min_j * bsum_j with bsum = hi * 512 + lo split into int16 (QActs::bsplit):
              // two pair-dot chains, exact.
              static_assert(BlockElems == kChunk);
              const int16_t* bs = a.bsplit + ((row0 + r) * a.chunks + chunk) * 32;
              iv lo = V::zero(), hi = V::zero();
              #pragma GCC unroll 8
              for (int p = 0; p < BlockElems / MinSub / 2; ++p) {
                const iv mp = V::load(tb[t].mins + p * kLanes + h * (kLanes / kH));
                lo = V::madd_acc(lo, mp, V::bcast_pair(bs + 2 * p));
                hi = V::madd_acc(hi, mp, V::bcast_pair(bs + 16 + 2 * p));
              }
              mn = V::add32(lo, V::template slli32<9>(hi));
              (void)at;
            } else {
              mn = V::set1_32(bsum<MinSub>(a, row0 + r, at));  // Q4_1 / Q5_1: min 1 per block
            }
            const fv t2 = V::mulf(V::loadf(tb[t].dm + b * kTileCols + h * V::kCols), s);
            acc_f = V::fmaf(V::cvt(mn), t2, acc_f);
          }
          V::storef(f, acc_f);
        }
    }
  }
}

/// chunk_kernel for a run-time row count mr (1 <= mr <= kChunkMr) over NT tiles.
template <class V, int BlockElems, int MinSub, bool StoredMins, int NT>
void chunk_mr(int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e, const TileBufs* tb) {
  switch (mr) {
#define LLMS_QMR(R)                                                                            \
  case R:                                                                                      \
    if constexpr (R <= V::kChunkMr)                                                            \
      return chunk_kernel<V, BlockElems, MinSub, StoredMins, R, NT>(a, row0, k0, e, tb);        \
    break;
    LLMS_QMR(1) LLMS_QMR(2) LLMS_QMR(3) LLMS_QMR(4) LLMS_QMR(5) LLMS_QMR(6) LLMS_QMR(7)
    LLMS_QMR(8)
#undef LLMS_QMR
    default: break;
  }
  LLMS_CHECK(false, "qgemm chunk: mr {} > {}", mr, V::kChunkMr);
}

template <class V, int BlockElems, int MinSub, bool StoredMins>
void chunk_rows(int mr, int nt, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                const TileBufs* tb) {
  static_assert(V::kChunkMr >= 1 && V::kChunkMr <= 8 && V::kMaxMr >= 1 && V::kMaxMr <= 8);
  // Both tiles per call at every row count (a row block's last, partial call too) where the
  // ISA pairs tiles; else one tile at a time.
  if (nt == 2 && V::kPairTiles) return chunk_mr<V, BlockElems, MinSub, StoredMins, 2>(mr, a, row0, k0, e, tb);
  for (int t = 0; t < nt; ++t) chunk_mr<V, BlockElems, MinSub, StoredMins, 1>(mr, a, row0, k0, e, tb + t);
}

template <class V>
void chunk(DType type, int mr, int nt, const QActs& a, int64_t row0, int64_t k0, int64_t e,
           const TileBufs* tb) {
  switch (type) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
      return chunk_rows<V, 32, 0, false>(mr, nt, a, row0, k0, e, tb);
    case DType::kQ4_1:
    case DType::kQ5_1:
      return chunk_rows<V, 32, 32, false>(mr, nt, a, row0, k0, e, tb);
    case DType::kQ2_K:
      return chunk_rows<V, 256, 16, true>(mr, nt, a, row0, k0, e, tb);
    case DType::kQ4_K:
    case DType::kQ5_K:
      return chunk_rows<V, 256, 32, true>(mr, nt, a, row0, k0, e, tb);
    case DType::kQ3_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return chunk_rows<V, 256, 0, false>(mr, nt, a, row0, k0, e, tb);
    default: LLMS_CHECK(false, "qgemm chunk: {}", dtype_name(type));
  }
}

// ------------------------------------------------------------------------------------------
// Fused small-M kernel: the record decoded in registers straight into the dot products (no
// int16 buffer), for calls whose rows fit one micro-kernel. The integer sums equal the
// buffered path's exactly: sub-scales are applied to each sub-block's int32 partial sums
// (isum_s * sc) instead of to the weights, and offsets as - offset * sum(a) corrections.

/// Constants of the codebook lookup (IQ4_NL / IQ4_XS).
template <class V>
struct LutConsts {
  typename V::iv lut, hi_byte, off128;
};

/// part[r][KJ % Chains] += codes of k-pair KJ of a unit (planes passed by value, so they stay
/// in registers) * activation pair, for every row. Chains > 1 gives few-row calls
/// independent accumulators, so the dot products do not wait on each other's latency.
template <class V, int Bits, bool Codebook, int MR, int Chains, int KJ>
LLMS_QINLINE void kpair_dot(typename V::iv w4, typename V::iv h2, typename V::iv h1,
                            const uint8_t* p8, const LutConsts<V>& lc,
                            const int16_t* const* qa, typename V::iv* part) {
  typename V::iv c;
  if constexpr (Bits == 8) {
    c = V::p8_row(p8 + KJ * 32);
  } else if constexpr (Bits == 2) {
    c = crumb_to<V, KJ % 8, 0>(h2);
  } else if constexpr (Bits == 3) {
    c = V::or_(crumb_to<V, KJ % 8, 0>(h2), bit_to<V, KJ, 2>(h1));
  } else {
    c = nib<V, KJ % 4>(w4);
    if constexpr (Bits == 5) c = V::or_(c, bit_to<V, q5_hi_bit(KJ), 4>(h1));
    if constexpr (Bits == 6) c = V::or_(c, bits2_to<V, q6_hi_shift(KJ % 8), 4>(h2));
  }
  if constexpr (Codebook) c = V::sub16(V::lut(lc.lut, V::or_(c, lc.hi_byte)), lc.off128);
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    typename V::iv& p = part[r * Chains + KJ % Chains];
    p = V::madd_acc(p, c, V::bcast_pair(qa[r] + 2 * KJ));
  }
}

template <class V, int Bits, bool Codebook, int MR, int Chains, int First, int... J>
LLMS_QINLINE void kpair_dots(std::integer_sequence<int, J...>, const typename V::iv* w4,
                             const typename V::iv* h2, typename V::iv h1, const uint8_t* p8,
                             const LutConsts<V>& lc, const int16_t* const* qa,
                             typename V::iv* part) {
  (kpair_dot<V, Bits, Codebook, MR, Chains, First + J>(w4[(First + J) / 4],
                                                        h2[(First + J) / 8], h1, p8, lc, qa, part),
   ...);
}

template <class V, int Bits, bool Codebook, int SubElems, int Offset, int BlockElems, int MinSub,
          bool StoredMins, int MR>
void fused_kernel(const QActs& a, int64_t row0, int64_t k0_first, int64_t e,
                  const uint8_t* rec_first, const RecordLayout& lay, float* facc,
                  const uint8_t* pf_first, const uint8_t* pf_end, int64_t nchunks) {
  for (int64_t ci = 0; ci < nchunks; ++ci) {  // the run's chunks, one after another
    const auto [k0, rec, pf, pf_bytes] =
        run_chunk(ci, k0_first, e, rec_first, lay, pf_first, pf_end);
    using iv = typename V::iv;
    using fv = typename V::fv;
    constexpr int kH = V::kHalves;
    constexpr int kUnitsPerBlock = BlockElems / kUnit;
    constexpr int kSubs = SubElems > 0 ? kUnit / SubElems : 1;  // sub-blocks per unit
    constexpr int kKpPerSub = 16 / kSubs;
    constexpr int kSubElemsUnit = kUnit / kSubs;
    constexpr int kChains = MR == 1 ? 4 : MR <= 3 ? 2 : 1;  // independent accumulators per row
    LutConsts<V> lc;
    lc.lut = V::load(iq4_lut_u8());
    lc.hi_byte = V::set1_16(static_cast<int16_t>(0x8000));
    lc.off128 = V::set1_16(128);
    const int64_t chunk = k0 / kChunk;
    const int16_t* qa[MR];
    const int32_t* bs[MR];
    fv s[MR];
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      bs[r] = a.bsum16 + (row0 + r) * (a.k / 16) + k0 / 16;
      s[r] = V::set1f(a.s[(row0 + r) * a.chunks + chunk]);
    }
    #pragma GCC unroll 16
    for (int h = 0; h < kH; ++h) {
      iv acc[MR];
      #pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) acc[r] = V::zero();
      const int64_t units = e / kUnit;
      // This half's share of the prefetch lines, `per_unit` of them before each unit's work.
      const int64_t pf_lines = (pf_bytes + 63) / 64;
      const int64_t pf_first = pf_lines * h / kH, pf_end = pf_lines * (h + 1) / kH;
      const int64_t per_unit = (pf_end - pf_first + units - 1) / units;
      const uint8_t* pf_next = pf + 64 * pf_first;
      const uint8_t* const pf_stop = pf + 64 * pf_end;
      for (int64_t u = 0; u < units; ++u) {
        prefetch_lines(pf_next, pf_stop, per_unit);
        iv w4[4], h2[2], h1 = V::zero();
        if constexpr (!(Bits == 4 || Bits == 5 || Bits == 6)) w4[0] = w4[1] = w4[2] = w4[3] = h1;
        if constexpr (!(Bits == 2 || Bits == 3 || Bits == 6)) h2[0] = h2[1] = h1;
        load_planes<V, Bits>(rec, lay, u, h, w4, h2, h1);
        const uint8_t* p8 = rec + lay.p8 + 16 * u * 32 + h * (32 / kH);
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) qa[r] = a.q + (row0 + r) * a.k + k0 + 32 * u;
        for (int sb = 0; sb < kSubs; ++sb) {
          iv part[MR * kChains];
          #pragma GCC unroll 16
          for (int r = 0; r < MR * kChains; ++r) part[r] = V::zero();
          if (sb == 0)
            kpair_dots<V, Bits, Codebook, MR, kChains, 0>(std::make_integer_sequence<int, kKpPerSub>{},
                                                          w4, h2, h1, p8, lc, qa, part);
          else if constexpr (kSubs == 2)
            kpair_dots<V, Bits, Codebook, MR, kChains, kKpPerSub>(
                std::make_integer_sequence<int, kKpPerSub>{}, w4, h2, h1, p8, lc, qa, part);
          #pragma GCC unroll 16
          for (int r = 0; r < MR; ++r) {  // the chains' sums (exact integers) into part[r]
            iv sum = part[r * kChains];
            #pragma GCC unroll 4
            for (int c = 1; c < kChains; ++c) sum = V::add32(sum, part[r * kChains + c]);
            part[r] = sum;
          }
          // The sub-block's elements: [at, at + kSubElemsUnit) of the chunk.
          const int64_t at = 32 * u + sb * kSubElemsUnit;
          #pragma GCC unroll 16
          for (int r = 0; r < MR; ++r) {
            if constexpr (Offset != 0) {
              int32_t sum = 0;
              #pragma GCC unroll 16
              for (int i = 0; i < kSubElemsUnit / 16; ++i) sum += bs[r][at / 16 + i];
              part[r] = V::sub32(part[r], V::set1_32(Offset * sum));
            }
            if constexpr (SubElems > 0)
              part[r] = V::mullo32(part[r], V::scale_row32(rec + lay.sub + (at / SubElems) * kTileCols +
                                                           h * (kTileCols / kH)));
            acc[r] = V::add32(acc[r], part[r]);
          }
        }
        if ((u + 1) % kUnitsPerBlock != 0) continue;
        // End of a scale block: the float steps, exactly as chunk_kernel's.
        const int64_t b = u / kUnitsPerBlock;
        const fv d = V::halves_row(rec + lay.d + b * kTileCols * 2 + h * (kTileCols * 2 / kH));
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          float* f = facc + r * kTileCols + h * V::kCols;
          fv acc_f = V::fmaf(V::cvt(acc[r]), V::mulf(d, s[r]), V::loadf(f));
          if constexpr (MinSub > 0) {
            iv mn;
            const int64_t at = k0 + b * BlockElems;
            if constexpr (StoredMins) {
              mn = V::zero();
              for (int j = 0; j < BlockElems / MinSub; ++j)
                mn = V::add32(mn, V::mullo32(V::min_row(rec + lay.min +
                                                        (b * BlockElems / MinSub + j) * kTileCols +
                                                        h * (kTileCols / kH)),
                                             V::set1_32(bsum<MinSub>(a, row0 + r, at + j * MinSub))));
            } else {
              mn = V::set1_32(bsum<MinSub>(a, row0 + r, at));
            }
            const fv dm = V::halves_row(rec + lay.dm + b * kTileCols * 2 + h * (kTileCols * 2 / kH));
            acc_f = V::fmaf(V::cvt(mn), V::mulf(dm, s[r]), acc_f);
          }
          V::storef(f, acc_f);
          acc[r] = V::zero();
        }
      }
    }
  }
}

template <class V, int Bits, bool Codebook, int SubElems, int Offset, int BlockElems, int MinSub,
          bool StoredMins>
void fused_rows(int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e, const uint8_t* rec,
                const RecordLayout& lay, float* facc, const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  switch (mr) {
#define LLMS_QFR(R)                                                                          \
  case R:                                                                                    \
    if constexpr (R <= V::kMaxMr)                                                            \
      return fused_kernel<V, Bits, Codebook, SubElems, Offset, BlockElems, MinSub, StoredMins, \
                          R>(a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);                  \
    break;
    LLMS_QFR(1) LLMS_QFR(2) LLMS_QFR(3) LLMS_QFR(4) LLMS_QFR(5) LLMS_QFR(6) LLMS_QFR(7)
    LLMS_QFR(8)
#undef LLMS_QFR
    default: break;
  }
  LLMS_CHECK(false, "qgemm fused: mr {} > {}", mr, V::kMaxMr);
}

template <class V>
void fused(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
           const uint8_t* rec, const RecordLayout& lay, float* facc, const uint8_t* pf,
           const uint8_t* pf_end, int64_t nchunks) {
  switch (type) {
    case DType::kQ4_0: return fused_rows<V, 4, false, 0, 8, 32, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ4_1: return fused_rows<V, 4, false, 0, 0, 32, 32, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_0: return fused_rows<V, 5, false, 0, 16, 32, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_1: return fused_rows<V, 5, false, 0, 0, 32, 32, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ8_0: return fused_rows<V, 8, false, 0, 0, 32, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kIQ4_NL: return fused_rows<V, 4, true, 0, 0, 32, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ2_K: return fused_rows<V, 2, false, 16, 0, 256, 16, true>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ3_K: return fused_rows<V, 3, false, 16, 4, 256, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ4_K: return fused_rows<V, 4, false, 32, 0, 256, 32, true>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ5_K: return fused_rows<V, 5, false, 32, 0, 256, 32, true>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kQ6_K: return fused_rows<V, 6, false, 16, 32, 256, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    case DType::kIQ4_XS: return fused_rows<V, 4, true, 32, 0, 256, 0, false>(mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
    default: LLMS_CHECK(false, "qgemm fused: {}", dtype_name(type));
  }
}

// ------------------------------------------------------------------------------------------
// Activation quantization (qgemm.h step 1), bit for bit quantize_acts_ref.

template <class V>
void quantize(const float* x, int64_t r0, int64_t r1, const QActs& a) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * a.k;
    int16_t* q = a.q + r * a.k;
    for (int64_t c = 0; c < a.chunks; ++c) {
      const int64_t i0 = c * kChunk, n = std::min(a.k, i0 + kChunk) - i0;
      float* s = a.s + r * a.chunks + c;
      V::quantize_chunk(xr + i0, n, a.qmax, q + i0, s);
    }
    for (int64_t j = 0; j < a.k / 16; ++j) a.bsum16[r * (a.k / 16) + j] = V::sum16(q + 16 * j);
  }
}

template <class V>
const QKernels& make_kernels(const char* name) {
  static const QKernels k{name, V::kMaxMr, V::kChunkMr, quantize<V>, decode<V>, chunk<V>, fused<V>};
  return k;
}

using FusedFn = void (*)(DType, int, const QActs&, int64_t, int64_t, int64_t, const uint8_t*,
                         const RecordLayout&, float*, const uint8_t*, const uint8_t*, int64_t);

/// Few-row calls: the byte kernel `BytesFused` for the types `BytesType` accepts (once
/// QActs::split is filled), else the 16-bit-lane kernels.
template <class V, bool (*BytesType)(DType), FusedFn BytesFused>
void fused_with_bytes(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                      const uint8_t* rec, const RecordLayout& lay, float* facc, const uint8_t* pf,
                      const uint8_t* pf_end, int64_t nchunks) {
  if (a.split != nullptr && BytesType(type))
    return BytesFused(type, mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
  fused<V>(type, mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
}

/// make_kernels with a few-row byte kernel (qgemm_avx2_bytes.h, qgemm_avx512_bytes.h) whose
/// split activations `Split` fills.
template <class V, bool (*BytesType)(DType), FusedFn BytesFused,
          void (*Split)(const QActs&, int64_t, int64_t)>
const QKernels& make_kernels_with_bytes(const char* name) {
  static const QKernels k{name,     V::kMaxMr, V::kChunkMr, quantize<V>, decode<V>, chunk<V>,
                          fused_with_bytes<V, BytesType, BytesFused>, BytesType, Split};
  return k;
}

#undef LLMS_QINLINE

}  // namespace
}  // namespace llmserve::qgemm
