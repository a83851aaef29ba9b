// Flash-attention kernels for the x86-64-v3 baseline (AVX2 + FMA + F16C).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/flash/flash_kernels.h"
#include "kernels/flash/flash_kernels_impl.h"
#include "kernels/cpu/simd_transpose.h"

namespace llmserve::flash_detail {
namespace {

struct Avx2 {
  using vec = __m256;
  static constexpr int L = 8;
  static constexpr int kQkNi = 2;  // S^T micro-tile: 6 K rows x 16 query rows, 12 ymm
  static constexpr int kQkNj = 6;
  static constexpr int kPvMi = 4;  // O micro-tile: 4 query rows x 16 dims, 8 ymm
  static constexpr int kPvNd = 2;
  static constexpr int kDecGb = 4;  // decode O tile: 4 heads x 16 dims
  static constexpr int kPackedRows = 4;  // decode packed scores: K rows per step
  static constexpr int kDecNd = 2;
  static constexpr int kRows = 64;

  static vec zero() { return _mm256_setzero_ps(); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec set1(float x) { return _mm256_set1_ps(x); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }

  // 2^x for x <= 0 (below -126 -> 0, so exp2(-inf) = 0); Cephes exp2f polynomial.
  static vec exp2(vec x) {
    const vec xc = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
    const vec n = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const vec f = _mm256_sub_ps(xc, n);
    vec p = _mm256_set1_ps(1.535336188319500e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339887440266574e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618437357674640e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550332471162809e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264791363012e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931472028550421e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const vec r = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(r, _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_GE_OQ));
  }
  // tanh(x), within 2 ulp for every float (tests: FlashTanhIsAccurate): |x| < 0.625 (and NaN,
  // which stays NaN): Cephes tanhf's odd polynomial x + x^3 P(x^2); else sign(x) (1 - e) /
  // (1 + e), e = 2^(-2 |x| log2(e)) by exp2 (exactly +-1 from |x| ~ 9 on; e = 0 below 2^-126,
  // so no inf or NaN for any input).
  static vec tanh(vec x) {
    const vec sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const vec ax = _mm256_xor_ps(x, sign);
    const vec one = _mm256_set1_ps(1.0f);
    const vec e = exp2(_mm256_mul_ps(ax, _mm256_set1_ps(-2.8853900817779268f)));
    const vec big = _mm256_or_ps(_mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)), sign);
    const vec z = _mm256_mul_ps(x, x);
    vec p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    const vec small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_NGE_UQ));
  }
  static vec mask_after(vec s, vec qpos, float kv_pos) {
    const vec m = _mm256_cmp_ps(qpos, _mm256_set1_ps(kv_pos), _CMP_LT_OQ);
    return _mm256_blendv_ps(s, _mm256_set1_ps(kNegInf), m);
  }
  static float exp2_scalar(float x) { return _mm256_cvtss_f32(exp2(set1(x))); }
  static float hmax(vec v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  static float hsum(vec v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  // r[k*8 .. k*8+8) for k < 8 -> (sum r_0, ..., sum r_7).
  static vec reduce_rows(const float* r) {
    vec a[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) a[k] = load(r + 8 * k);
    return reduce_rows_v(a);
  }
  static vec reduce_rows_v(const vec* a) {
    const vec t0 = _mm256_hadd_ps(a[0], a[1]);
    const vec t1 = _mm256_hadd_ps(a[2], a[3]);
    const vec t2 = _mm256_hadd_ps(a[4], a[5]);
    const vec t3 = _mm256_hadd_ps(a[6], a[7]);
    const vec u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
  }

  /// In-register 8 x 8 transpose: r[i][j] -> r[j][i].
  __attribute__((always_inline)) static void transpose(vec* r) { simd::transpose8x8(r); }

  static constexpr bool packed_r(int r) { return r == 4 || r == 8; }
  // Packed single-token scores (softmax_grouped): groups of RR = 2 or 4 lanes.
  // group_max: every lane gets its group's max. from_lane: lane g * RR of the result is lane
  // g * RR + r of p (the other lanes are unspecified).
  template <int RR>
  static vec group_max(vec v) {
    v = max(v, _mm256_permute_ps(v, 0xB1));  // adjacent lanes swapped
    if constexpr (RR == 4) v = max(v, _mm256_permute_ps(v, 0x4E));  // pairs swapped
    return v;
  }
  template <int RR>
  static vec from_lane(vec p, int r) {
    if constexpr (RR == 2) return r == 0 ? p : _mm256_permute_ps(p, 0x31);
    else {
      switch (r) {
        case 0: return p;
        case 1: return _mm256_permute_ps(p, 1);
        case 2: return _mm256_permute_ps(p, 2);
        default: return _mm256_permute_ps(p, 3);
      }
    }
  }
  // Per-128-bit-lane interleaves (pack_rows).
  static vec unpacklo(vec a, vec b) { return _mm256_unpacklo_ps(a, b); }
  static vec unpackhi(vec a, vec b) { return _mm256_unpackhi_ps(a, b); }
  static vec unpacklo_pd(vec a, vec b) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  static vec unpackhi_pd(vec a, vec b) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  template <int R>
  static vec bcast(const float* p) {
    if constexpr (R == 8) return _mm256_loadu_ps(p);
    else if constexpr (R == 2) {
      double x;  // two floats, broadcast as one 64-bit element
      std::memcpy(&x, p, sizeof x);
      return _mm256_castpd_ps(_mm256_set1_pd(x));
    }
    else return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  }
  template <int R>
  static void store_reduced(const vec* a, float* s, int64_t ld) {
    if constexpr (R == 8) {
      store(s, reduce_rows_v(a));
    } else {  // 2 heads x 4 rows: 128-bit lane g holds head g's 4 rows
      const vec x0 = _mm256_add_ps(_mm256_unpacklo_ps(a[0], a[1]), _mm256_unpackhi_ps(a[0], a[1]));
      const vec x1 = _mm256_add_ps(_mm256_unpacklo_ps(a[2], a[3]), _mm256_unpackhi_ps(a[2], a[3]));
      const __m256d c = _mm256_castps_pd(x0), d = _mm256_castps_pd(x1);
      const vec y = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(c, d)),
                                  _mm256_castpd_ps(_mm256_unpackhi_pd(c, d)));
      _mm_storeu_ps(s, _mm256_castps256_ps128(y));
      _mm_storeu_ps(s + ld, _mm256_extractf128_ps(y, 1));
    }
  }

  template <DType D>
  static void load2(const void* base, int64_t idx, vec& a, vec& b) {
    const uint16_t* p = static_cast<const uint16_t*>(base) + idx;
    if constexpr (D == DType::kBF16) {
      const __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      a = _mm256_castsi256_ps(_mm256_slli_epi32(z, 16));
      b = _mm256_castsi256_ps(_mm256_and_si256(z, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
    } else {
      a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    }
  }

  template <DType D>
  static vec loadkv(const void* base, int64_t idx) {
    if constexpr (D == DType::kF32) {
      return _mm256_loadu_ps(static_cast<const float*>(base) + idx);
    } else {
      const __m128i h = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + idx));
      if constexpr (D == DType::kBF16) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      } else {
        return _mm256_cvtph_ps(h);
      }
    }
  }
};

}  // namespace

const FlashKernels& flash_kernels_avx2() { return make_table<Avx2>("avx2"); }

}  // namespace llmserve::flash_detail
