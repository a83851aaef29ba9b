// Private to qgemm_avx2.cc / qgemm_avxvnni.cc: the quantized GEMM's AVX2 vector traits (see
// qgemm_kernels_impl.h): a tile's 8 columns x 2 parities of int16 lanes per ymm, two halves per
// tile, a 6-row x 16-column chunk micro-kernel; vpmaddwd + vpaddd (Avx2Q), or AVX-VNNI's
// vpdpwssd (qgemm_avxvnni.cc).
#pragma once

#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace llmserve::qgemm {
namespace {

struct Avx2Q {
  using iv = __m256i;
  using fv = __m256;
  static constexpr int kHalves = 2;
  static constexpr int kCols = 8;
  static constexpr bool kPairTiles = false;  // chunk kernel over two tiles at once
  static constexpr int kMaxMr = 4;    // the byte kernels' row counts
  static constexpr int kChunkMr = 6;  // 12 accumulators + 2 weights + broadcast + product

  static iv load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(void* p, iv v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
  static iv load32(const int32_t* p) { return load(p); }
  static void store32(int32_t* p, iv v) { store(p, v); }
  static iv zero() { return _mm256_setzero_si256(); }
  static iv set1_16(int16_t v) { return _mm256_set1_epi16(v); }
  static iv set1_32(int32_t v) { return _mm256_set1_epi32(v); }
  static iv and_(iv a, iv b) { return _mm256_and_si256(a, b); }
  static iv or_(iv a, iv b) { return _mm256_or_si256(a, b); }
  static iv sub16(iv a, iv b) { return _mm256_sub_epi16(a, b); }
  static iv mullo16(iv a, iv b) { return _mm256_mullo_epi16(a, b); }
  static iv add32(iv a, iv b) { return _mm256_add_epi32(a, b); }
  static iv mullo32(iv a, iv b) { return _mm256_mullo_epi32(a, b); }
  template <int S> static iv srli(iv v) { return _mm256_srli_epi16(v, S); }
  template <int S> static iv slli(iv v) { return _mm256_slli_epi16(v, S); }
  static iv lut(iv table, iv idx) { return _mm256_shuffle_epi8(table, idx); }
  static iv bcast_pair(const int16_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  // vpmaddwd + vpaddd through asm with an in-place accumulator: with the intrinsics GCC 12
  // computes each sum into a fresh register and copies it back (a vmovdqa per accumulator and
  // k-pair in the micro-kernel's inner loop), as qgemm_avx512vnni.cc says of vpdpwssd.
  static iv madd_acc(iv acc, iv w, iv a) {
    iv t;
    __asm__("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(t) : "x"(w), "x"(a));
    return acc;
  }
  /// 8 int8 sub-scales (8 columns) -> 16 int16 lanes, each column's scale for both parities.
  static iv scale_row(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(b, b));
  }
  /// 16 int8 codes (8 columns x 2 parities) -> int16.
  static iv p8_row(const uint8_t* p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static iv min_row(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static iv sub32(iv a, iv b) { return _mm256_sub_epi32(a, b); }
  /// 8 int8 sub-scales (8 columns) -> 8 int32 lanes.
  static iv scale_row32(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  template <int S> static iv slli32(iv v) { return _mm256_slli_epi32(v, S); }
  /// Min sub-block rows 2p and 2p + 1 (8 columns each) -> 16 int16 lanes interleaved.
  static iv min_pair_row(const uint8_t* a, const uint8_t* b) {
    const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
    const __m128i y = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, y));
  }
  static fv cvt(iv v) { return _mm256_cvtepi32_ps(v); }
  static fv halves_row(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static fv loadf(const float* p) { return _mm256_loadu_ps(p); }
  static void storef(float* p, fv v) { _mm256_storeu_ps(p, v); }
  static fv mulf(fv a, fv b) { return _mm256_mul_ps(a, b); }
  static fv fmaf(fv a, fv b, fv c) { return _mm256_fmadd_ps(a, b, c); }
  static fv set1f(float v) { return _mm256_set1_ps(v); }
  static int32_t sum16(const int16_t* p) {
    const __m256i v = _mm256_madd_epi16(load(p), _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
  /// Activation step 1 over n (a multiple of 32) elements: see quantize_acts_ref.
  static void quantize_chunk(const float* x, int64_t n, int qmax, int16_t* q, float* s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 big = _mm256_set1_ps(FLT_MAX);
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
      const __m256 v = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, big, _CMP_NLE_UQ));
      amax = _mm256_max_ps(amax, v);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float am = _mm_cvtss_f32(m4);
    if (_mm256_movemask_ps(bad) != 0 || am == 0) {
      *s = _mm256_movemask_ps(bad) != 0 ? NAN : 0.0f;
      std::memset(q, 0, static_cast<size_t>(n) * 2);
      return;
    }
    const float qm = static_cast<float>(qmax);
    *s = am / qm;
    const __m256 inv = _mm256_set1_ps(qm / am);
    const __m256i hi = _mm256_set1_epi32(qmax), lo = _mm256_set1_epi32(-qmax);
    for (int64_t i = 0; i < n; i += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
      __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), inv));
      a = _mm256_max_epi32(lo, _mm256_min_epi32(hi, a));
      b = _mm256_max_epi32(lo, _mm256_min_epi32(hi, b));
      store(q + i, _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8));
    }
  }
};

}  // namespace
}  // namespace llmserve::qgemm
