// GEMM kernels for AVX-512 (F/BW/VL/DQ; F16C for f16 weights). Compiled with AVX-512 enabled:
// only reached through gemm_kernels_avx512(), which gemm.cc calls after checking cpu_isa().
// Arithmetic is fp32 FMA throughout: bf16 weights are widened with a shift (cheaper than
// vdpbf16ps on this CPU, and exact), f16 with vcvtph2ps.
// GCC 12 warns about the deliberately undefined pass-through operands inside its own
// AVX-512 intrinsic headers (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>

#include "common/dtype.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/simd_transpose.h"

namespace llmserve::gemm_detail {
namespace {

struct Avx512 {
  using vec = __m512;
  static constexpr int L = 16;
  static constexpr int kMr = 14;  // microkernel: 14 x 32 -> 28 zmm accumulators
  static constexpr int kNv = 2;
  static constexpr int kDotMaxMb = 6;  // dot tile: 6 x 4 -> 24 zmm accumulators

  static vec zero() { return _mm512_setzero_ps(); }
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static vec load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  template <DType D>
  static vec loadw(const void* base, int64_t idx) {
    if constexpr (D == DType::kF32) {
      return _mm512_loadu_ps(static_cast<const float*>(base) + idx);
    } else {
      const __m256i h =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + idx));
      if constexpr (D == DType::kBF16) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      } else {
        return _mm512_cvtph_ps(h);
      }
    }
  }
  template <DType D>
  static vec loadw_n(const void* base, int64_t idx, int n) {
    if constexpr (D == DType::kF32) {
      return _mm512_maskz_loadu_ps(mask(n), static_cast<const float*>(base) + idx);
    } else {
      const __m256i h = _mm256_maskz_loadu_epi16(mask(n), static_cast<const uint16_t*>(base) + idx);
      if constexpr (D == DType::kBF16) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      } else {
        return _mm512_cvtph_ps(h);
      }
    }
  }
  /// One 32-column panel row (sub is 0: both vectors of the row).
  template <DType D>
  static void load_panel(const uint8_t* row, int /*sub*/, vec* b) {
    if constexpr (D == DType::kF32) {
      b[0] = _mm512_loadu_ps(row);
      b[1] = _mm512_loadu_ps(row + 64);
    } else if constexpr (D == DType::kF16) {
      b[0] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
      b[1] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32)));
    } else {  // permuted bf16 (kPanel): zero-interleave gives columns 0-15 and 16-31
      const __m512i v = _mm512_loadu_si512(row);
      b[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
      b[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
    }
  }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, vec v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec fms(vec a, vec b, vec c) { return _mm512_fmsub_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec abs(vec a) { return _mm512_abs_ps(a); }
  /// Lanes of x with the sign bit set (-0 included) take a, the others b.
  static vec select_neg(vec x, vec a, vec b) {
    return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), b, a);
  }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  static vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static vec set1(float f) { return _mm512_set1_ps(f); }
  static vec round(vec v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vec pow2i(vec n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static vec exp(vec v);
  /// In-register 16 x 16 transpose: r[i][j] -> r[j][i].
  __attribute__((always_inline)) static void transpose(vec* r) { simd::transpose16x16(r); }
  static void reduce4(vec a, vec b, vec c, vec d, float* out) {
    const __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    const __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    const __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
};

}  // namespace
}  // namespace llmserve::gemm_detail

#include "kernels/cpu/gemm_kernels_impl.h"

namespace llmserve::gemm_detail {
namespace {
Avx512::vec Avx512::exp(vec v) { return exp_poly<Avx512>(v); }
}  // namespace

const GemmKernels& gemm_kernels_avx512() {
  static const GemmKernels k = make_kernels<Avx512>("avx512");
  return k;
}

}  // namespace llmserve::gemm_detail
