// Private to qgemm_avx512.cc / qgemm_avx512vnni.cc (both compiled with AVX-512 flags): the
// quantized GEMM's AVX-512 vector traits (see qgemm_kernels_impl.h): a tile's 32 int16 lanes in
// one zmm, an 8-row x 16-column micro-kernel; vpmaddwd + vpaddd, or vpdpwssd with VNNI.
#pragma once

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_* values, which trip
// -Wmaybe-uninitialized once inlined (GCC bug 105593); the warning is about the headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace llmserve::qgemm {
namespace {

struct Avx512Q {
  using iv = __m512i;
  using fv = __m512;
  static constexpr int kHalves = 1;
  static constexpr int kCols = 16;
  static constexpr bool kPairTiles = true;  // chunk kernel over two tiles at once
  static constexpr int kMaxMr = 6;
  static constexpr int kChunkMr = 6;

  static iv load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(void* p, iv v) { _mm512_storeu_si512(p, v); }
  static iv load32(const int32_t* p) { return load(p); }
  static void store32(int32_t* p, iv v) { store(p, v); }
  static iv zero() { return _mm512_setzero_si512(); }
  static iv set1_16(int16_t v) { return _mm512_set1_epi16(v); }
  static iv set1_32(int32_t v) { return _mm512_set1_epi32(v); }
  static iv and_(iv a, iv b) { return _mm512_and_si512(a, b); }
  static iv or_(iv a, iv b) { return _mm512_or_si512(a, b); }
  static iv sub16(iv a, iv b) { return _mm512_sub_epi16(a, b); }
  static iv mullo16(iv a, iv b) { return _mm512_mullo_epi16(a, b); }
  static iv add32(iv a, iv b) { return _mm512_add_epi32(a, b); }
  static iv mullo32(iv a, iv b) { return _mm512_mullo_epi32(a, b); }
  template <int S> static iv srli(iv v) { return _mm512_srli_epi16(v, S); }
  template <int S> static iv slli(iv v) { return _mm512_slli_epi16(v, S); }
  static iv lut(iv table, iv idx) { return _mm512_shuffle_epi8(table, idx); }
  static iv bcast_pair(const int16_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static iv madd_acc(iv acc, iv w, iv a) { return _mm512_add_epi32(acc, _mm512_madd_epi16(w, a)); }
  /// 16 int8 sub-scales (16 columns) -> 32 int16 lanes (each column's scale for both parities).
  static iv scale_row(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i dup = _mm256_set_m128i(_mm_unpackhi_epi8(b, b), _mm_unpacklo_epi8(b, b));
    return _mm512_cvtepi8_epi16(dup);
  }
  static iv p8_row(const uint8_t* p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static iv min_row(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static iv sub32(iv a, iv b) { return _mm512_sub_epi32(a, b); }
  /// 16 int8 sub-scales (16 columns) -> 16 int32 lanes.
  static iv scale_row32(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <int S> static iv slli32(iv v) { return _mm512_slli_epi32(v, S); }
  /// Min sub-block rows 2p and 2p + 1 (16 columns each) -> 32 int16 lanes interleaved.
  static iv min_pair_row(const uint8_t* a, const uint8_t* b) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y)));
  }
  static fv cvt(iv v) { return _mm512_cvtepi32_ps(v); }
  static fv halves_row(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static fv loadf(const float* p) { return _mm512_loadu_ps(p); }
  static void storef(float* p, fv v) { _mm512_storeu_ps(p, v); }
  static fv mulf(fv a, fv b) { return _mm512_mul_ps(a, b); }
  static fv fmaf(fv a, fv b, fv c) { return _mm512_fmadd_ps(a, b, c); }
  static fv set1f(float v) { return _mm512_set1_ps(v); }
  static int32_t sum16(const int16_t* p) {
    const __m256i v = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                        _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
  /// Activation step 1 over n (a multiple of 32) elements: see quantize_acts_ref.
  static void quantize_chunk(const float* x, int64_t n, int qmax, int16_t* q, float* s) {
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    __m512 amax = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (int64_t i = 0; i < n; i += 16) {
      const __m512 v = _mm512_abs_ps(_mm512_loadu_ps(x + i));
      bad |= _mm512_cmp_ps_mask(v, big, _CMP_NLE_UQ);
      amax = _mm512_max_ps(amax, v);
    }
    const float am = _mm512_reduce_max_ps(amax);
    if (bad != 0 || am == 0) {
      *s = bad != 0 ? NAN : 0.0f;
      std::memset(q, 0, static_cast<size_t>(n) * 2);
      return;
    }
    const float qm = static_cast<float>(qmax);
    *s = am / qm;
    const __m512 inv = _mm512_set1_ps(qm / am);
    const __m512i hi = _mm512_set1_epi32(qmax), lo = _mm512_set1_epi32(-qmax);
    for (int64_t i = 0; i < n; i += 16) {
      __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
      a = _mm512_max_epi32(lo, _mm512_min_epi32(hi, a));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm512_cvtsepi32_epi16(a));
    }
  }
};

}  // namespace
}  // namespace llmserve::qgemm
