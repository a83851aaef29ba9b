// GEMM kernels for the x86-64-v3 baseline (AVX2 + FMA + F16C): the same kernels as
// gemm_avx512.cc on 8-lane vectors (16 ymm registers: a 6 x 16 microkernel, 2 x 4 dot tile).
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/simd_transpose.h"

namespace llmserve::gemm_detail {
namespace {

struct Avx2 {
  using vec = __m256;
  static constexpr int L = 8;
  static constexpr int kMr = 6;  // microkernel: 6 x 16 -> 12 ymm accumulators
  static constexpr int kNv = 2;
  static constexpr int kDotMaxMb = 2;  // dot tile: 2 x 4 -> 8 ymm accumulators

  static __m256i mask(int n) {
    alignas(32) static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - n));
  }
  static vec zero() { return _mm256_setzero_ps(); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static vec load_n(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static vec widen(__m128i h, DType d) {
    return d == DType::kBF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                             : _mm256_cvtph_ps(h);
  }
  template <DType D>
  static vec loadw(const void* base, int64_t idx) {
    if constexpr (D == DType::kF32) {
      return _mm256_loadu_ps(static_cast<const float*>(base) + idx);
    } else {
      return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + idx)), D);
    }
  }
  template <DType D>
  static vec loadw_n(const void* base, int64_t idx, int n) {
    if constexpr (D == DType::kF32) {
      return _mm256_maskload_ps(static_cast<const float*>(base) + idx, mask(n));
    } else {
      uint16_t tmp[8] = {};
      std::memcpy(tmp, static_cast<const uint16_t*>(base) + idx, static_cast<size_t>(n) * 2);
      return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp)), D);
    }
  }
  /// Columns [16 sub, 16 sub + 16) of one 32-column panel row.
  template <DType D>
  static void load_panel(const uint8_t* row, int sub, vec* b) {
    if constexpr (D == DType::kF32) {
      const auto* f = reinterpret_cast<const float*>(row) + 16 * sub;
      b[0] = _mm256_loadu_ps(f);
      b[1] = _mm256_loadu_ps(f + 8);
    } else if constexpr (D == DType::kF16) {
      const auto* h = reinterpret_cast<const __m128i*>(row + 32 * sub);
      b[0] = _mm256_cvtph_ps(_mm_loadu_si128(h));
      b[1] = _mm256_cvtph_ps(_mm_loadu_si128(h + 1));
    } else {  // permuted bf16 (kPanel): low halves of the 32-byte halves hold columns 0-15
      const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
      const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32));
      const __m256i z = _mm256_setzero_si256();
      if (sub == 0) {
        b[0] = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, h0));
        b[1] = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, h1));
      } else {
        b[0] = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, h0));
        b[1] = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, h1));
      }
    }
  }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, vec v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec fms(vec a, vec b, vec c) { return _mm256_fmsub_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec abs(vec a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  /// Lanes of x with the sign bit set (-0 included) take a, the others b.
  static vec select_neg(vec x, vec a, vec b) { return _mm256_blendv_ps(b, a, x); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
  static vec min(vec a, vec b) { return _mm256_min_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  static vec set1(float f) { return _mm256_set1_ps(f); }
  static vec round(vec v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vec pow2i(vec n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static vec exp(vec v);
  /// In-register 8 x 8 transpose: r[i][j] -> r[j][i].
  __attribute__((always_inline)) static void transpose(vec* r) { simd::transpose8x8(r); }
  static void reduce4(vec a, vec b, vec c, vec d, float* out) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
};

}  // namespace
}  // namespace llmserve::gemm_detail

#include "kernels/cpu/gemm_kernels_impl.h"

namespace llmserve::gemm_detail {
namespace {
Avx2::vec Avx2::exp(vec v) { return exp_poly<Avx2>(v); }
}  // namespace

const GemmKernels& gemm_kernels_avx2() {
  static const GemmKernels k = make_kernels<Avx2>("avx2");
  return k;
}

}  // namespace llmserve::gemm_detail
