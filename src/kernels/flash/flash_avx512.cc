// Flash-attention kernels for AVX-512 (F/BW/VL/DQ; F16C for f16 KV). Compiled with AVX-512
// enabled: only reached through flash_kernels_avx512(), which the backend calls after
// checking cpu_isa(). fp32 FMA throughout; bf16 KV is widened with a shift (exact), f16 with
// vcvtph2ps.
// GCC 12's AVX-512 intrinsic headers trip -Wuninitialized on their own _mm512_undefined_*().
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/flash/flash_kernels.h"
#include "kernels/flash/flash_kernels_impl.h"
#include "kernels/cpu/simd_transpose.h"


namespace llmserve::flash_detail {
namespace {

struct Avx512 {
  using vec = __m512;
  static constexpr int L = 16;
  static constexpr int kQkNi = 4;  // S^T micro-tile: 6 K rows x 64 query rows, 24 zmm
  static constexpr int kQkNj = 6;
  static constexpr int kPvMi = 4;  // O micro-tile: 4 query rows x 64 dims, 16 zmm
  static constexpr int kPvNd = 4;
  static constexpr int kDecGb = 4;  // decode O tile: 4 heads x 64 dims
  static constexpr int kPackedRows = 8;  // decode packed scores: K rows per step
  static constexpr int kDecNd = 4;
  static constexpr int kRows = 64;  // query rows per prefill tile

  static vec zero() { return _mm512_setzero_ps(); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec set1(float x) { return _mm512_set1_ps(x); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }

  // 2^x for x <= 0: 2^round(x) * p(x - round(x)), p the Cephes exp2f polynomial on
  // [-0.5, 0.5] (relative error ~2e-7); vscalefps applies the exponent. Below -126 the result
  // is 0 (so exp2(-inf) = 0 and no denormals reach the FMAs).
  static vec exp2(vec x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    const vec n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const vec f = _mm512_sub_ps(x, n);
    vec p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
  }
  // tanh(x), within 2 ulp for every float (tests: FlashTanhIsAccurate): |x| < 0.625 (and NaN,
  // which stays NaN): Cephes tanhf's odd polynomial x + x^3 P(x^2); else sign(x) (1 - e) /
  // (1 + e), e = 2^(-2 |x| log2(e)) by exp2 (exactly +-1 from |x| ~ 9 on; e = 0 below 2^-126,
  // so no inf or NaN for any input).
  static vec tanh(vec x) {
    const vec sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
    const vec ax = _mm512_xor_ps(x, sign);
    const vec one = _mm512_set1_ps(1.0f);
    const vec e = exp2(_mm512_mul_ps(ax, _mm512_set1_ps(-2.8853900817779268f)));
    const vec big = _mm512_or_ps(_mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e)), sign);
    const vec z = _mm512_mul_ps(x, x);
    vec p = _mm512_set1_ps(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
    const vec small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_NGE_UQ), big, small);
  }
  // Lanes whose query position is before kv_pos become -inf (causal mask).
  static vec mask_after(vec s, vec qpos, float kv_pos) {
    const __mmask16 m = _mm512_cmp_ps_mask(qpos, _mm512_set1_ps(kv_pos), _CMP_LT_OQ);
    return _mm512_mask_mov_ps(s, m, _mm512_set1_ps(kNegInf));
  }
  static float exp2_scalar(float x) { return _mm512_cvtss_f32(exp2(set1(x))); }
  static float hmax(vec v) { return _mm512_reduce_max_ps(v); }
  static float hsum(vec v) { return _mm512_reduce_add_ps(v); }

  // Interleave-and-add steps of the transpose reductions. pair_ps(a, b), per 128-bit lane:
  // (a0+a2, b0+b2, a1+a3, b1+b3); pair_pd(x, y): (x01+x23, y01+y23) per 128-bit lane, i.e.
  // after pair_pd(pair_ps(a, b), pair_ps(c, d)) each 128-bit lane holds the lane-local sums
  // of a, b, c, d.
  static vec pair_ps(vec a, vec b) { return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); }
  static vec pair_pd(vec x, vec y) {
    const __m512d c = _mm512_castps_pd(x), d = _mm512_castps_pd(y);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  // r[k*16 .. k*16+16) for k < 16 -> (sum r_0, ..., sum r_15): interleave-and-add within
  // 128-bit lanes (two rounds), then across them.
  static vec reduce_rows(const float* r) {
    vec a[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) a[k] = load(r + 16 * k);
    return reduce_rows_v(a);
  }
  static vec reduce_rows_v(const vec* a) {
    vec y[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      y[k] = pair_pd(pair_ps(a[4 * k], a[4 * k + 1]), pair_ps(a[4 * k + 2], a[4 * k + 3]));
    const vec z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const vec z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
  }

  /// In-register 16 x 16 transpose: r[i][j] -> r[j][i].
  __attribute__((always_inline)) static void transpose(vec* r) { simd::transpose16x16(r); }

  // Packed decode scores: R-element broadcasts and the reduction of R row accumulators whose
  // lanes are (head g, residue r) into s[g * ld + row].
  static constexpr bool packed_r(int r) { return r == 4 || r == 8 || r == 16; }
  // Packed single-token scores (softmax_grouped): groups of RR = 2 or 4 lanes.
  // group_max: every lane gets its group's max. from_lane: lane g * RR of the result is lane
  // g * RR + r of p (the other lanes are unspecified).
  template <int RR>
  static vec group_max(vec v) {
    v = max(v, _mm512_permute_ps(v, 0xB1));  // adjacent lanes swapped
    if constexpr (RR == 4) v = max(v, _mm512_permute_ps(v, 0x4E));  // pairs swapped
    return v;
  }
  template <int RR>
  static vec from_lane(vec p, int r) {
    if constexpr (RR == 2) return r == 0 ? p : _mm512_permute_ps(p, 0x31);
    else {
      switch (r) {
        case 0: return p;
        case 1: return _mm512_permute_ps(p, 1);
        case 2: return _mm512_permute_ps(p, 2);
        default: return _mm512_permute_ps(p, 3);
      }
    }
  }
  // Per-128-bit-lane interleaves (pack_rows).
  static vec unpacklo(vec a, vec b) { return _mm512_unpacklo_ps(a, b); }
  static vec unpackhi(vec a, vec b) { return _mm512_unpackhi_ps(a, b); }
  static vec unpacklo_pd(vec a, vec b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  }
  static vec unpackhi_pd(vec a, vec b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  }
  template <int R>
  static vec bcast(const float* p) {
    if constexpr (R == 16) return _mm512_loadu_ps(p);
    else if constexpr (R == 2) {
      double x;  // two floats, broadcast as one 64-bit element
      std::memcpy(&x, p, sizeof x);
      return _mm512_castpd_ps(_mm512_set1_pd(x));
    }
    else if constexpr (R == 8) return _mm512_broadcast_f32x8(_mm256_loadu_ps(p));
    else return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  }
  template <int R>
  static void store_reduced(const vec* a, float* s, int64_t ld) {
    if constexpr (R == 16) {
      store(s, reduce_rows_v(a));
    } else if constexpr (R == 8) {  // 2 heads x 8 rows
      const vec y0 = pair_pd(pair_ps(a[0], a[1]), pair_ps(a[2], a[3]));
      const vec y1 = pair_pd(pair_ps(a[4], a[5]), pair_ps(a[6], a[7]));
      // (g0 rows 0-3, g1 rows 0-3, g0 rows 4-7, g1 rows 4-7) -> (g0 rows 0-7, g1 rows 0-7)
      const vec u = _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
      const vec w = _mm512_shuffle_f32x4(u, u, _MM_SHUFFLE(3, 1, 2, 0));
      _mm256_storeu_ps(s, _mm512_castps512_ps256(w));
      _mm256_storeu_ps(s + ld, _mm512_extractf32x8_ps(w, 1));
    } else {  // 4 heads x 4 rows: 128-bit lane g holds head g's 4 rows
      const vec y = pair_pd(pair_ps(a[0], a[1]), pair_ps(a[2], a[3]));
      _mm_storeu_ps(s, _mm512_castps512_ps128(y));
      _mm_storeu_ps(s + ld, _mm512_extractf32x4_ps(y, 1));
      _mm_storeu_ps(s + 2 * ld, _mm512_extractf32x4_ps(y, 2));
      _mm_storeu_ps(s + 3 * ld, _mm512_extractf32x4_ps(y, 3));
    }
  }

  // 2L elements of a 16-bit row as two vectors: bf16 in even/odd order (shift / mask of
  // the same 32-bit lanes), f16 in natural order.
  template <DType D>
  static void load2(const void* base, int64_t idx, vec& a, vec& b) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + idx;
    if constexpr (D == DType::kBF16) {
      const __m512i z = _mm512_loadu_si512(p);
      a = _mm512_castsi512_ps(_mm512_slli_epi32(z, 16));
      b = _mm512_castsi512_ps(_mm512_and_si512(z, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
    } else {
      a = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      b = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
    }
  }

  template <DType D>
  static vec loadkv(const void* base, int64_t idx) {
    if constexpr (D == DType::kF32) {
      return _mm512_loadu_ps(static_cast<const float*>(base) + idx);
    } else {
      const __m256i h = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + idx));
      if constexpr (D == DType::kBF16) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      } else {
        return _mm512_cvtph_ps(h);
      }
    }
  }
};

}  // namespace

const FlashKernels& flash_kernels_avx512() { return make_table<Avx512>("avx512"); }

}  // namespace llmserve::flash_detail
