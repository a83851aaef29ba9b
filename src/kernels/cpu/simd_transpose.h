// In-register float transposes shared by the GEMM and flash-attention kernels of one ISA.
// Include only from a translation unit compiled for that ISA (gemm_avx2.cc / flash_avx2.cc
// for AVX2, gemm_avx512.cc / flash_avx512.cc for AVX-512). The functions are `static`: each
// translation unit keeps its own copy, compiled with its own target flags, so the linker can
// never hand an AVX-512 encoding of the AVX2 version to a machine without AVX-512.
#pragma once

#include <immintrin.h>

namespace llmserve::simd {

#if defined(__AVX2__)
/// r[i][j] -> r[j][i] for an 8 x 8 block held in 8 ymm registers (r[i] = row i).
__attribute__((always_inline)) static inline void transpose8x8(__m256* r) {
  __m256 s[8];
  for (int g = 0; g < 2; ++g) {
    const __m256 t0 = _mm256_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    const __m256 t1 = _mm256_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    const __m256 t3 = _mm256_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    s[4 * g] = _mm256_shuffle_ps(t0, t2, 0x44);
    s[4 * g + 1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    s[4 * g + 2] = _mm256_shuffle_ps(t1, t3, 0x44);
    s[4 * g + 3] = _mm256_shuffle_ps(t1, t3, 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
  }
}
#endif

#if defined(__AVX512F__)
/// r[i][j] -> r[j][i] for a 16 x 16 block held in 16 zmm registers (r[i] = row i).
__attribute__((always_inline)) static inline void transpose16x16(__m512* r) {
  __m512 s[16];
  for (int g = 0; g < 4; ++g) {  // within 128-bit lanes, rows 4g..4g+3
    const __m512 t0 = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    const __m512 t1 = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    const __m512 t3 = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    s[4 * g] = _mm512_shuffle_ps(t0, t2, 0x44);
    s[4 * g + 1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    s[4 * g + 2] = _mm512_shuffle_ps(t1, t3, 0x44);
    s[4 * g + 3] = _mm512_shuffle_ps(t1, t3, 0xEE);
  }
  for (int j = 0; j < 4; ++j) {  // s[4g + j] lane l holds column 4l + j, rows 4g..4g+3
    const __m512 u02 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0x88);
    const __m512 u13 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0xDD);
    const __m512 v02 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0x88);
    const __m512 v13 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(u02, v02, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(u02, v02, 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(u13, v13, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(u13, v13, 0xDD);
  }
}
#endif

}  // namespace llmserve::simd
