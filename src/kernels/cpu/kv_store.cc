// store_kv_values: float32 -> KV-cache dtype (f32 copy, bf16 and f16 round to nearest even),
// vectorised with AVX2/F16C (the x86-64-v3 baseline); scalar tails use common/dtype.h.
#include <immintrin.h>

#include <cstring>

#include "kernels/attention.h"

namespace llmserve {
namespace {

// 8 floats -> 8 bf16, round to nearest even; NaN stays NaN (quiet bit set), as f32_to_bf16.
inline __m128i f32x8_to_bf16(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i nan_bits = _mm256_or_si256(bits, _mm256_set1_epi32(0x400000));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  const __m256i r = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, nan_bits, is_nan), 16);
  // Pack the 8 low halves: packus works per 128-bit lane, values are <= 0xffff so no saturation.
  const __m256i packed = _mm256_packus_epi32(r, r);  // lane0: r0..3 r0..3, lane1: r4..7 r4..7
  return _mm_unpacklo_epi64(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1));
}

}  // namespace

void store_kv_values(void* base, DType dtype, int64_t offset, const float* src, int64_t n) {
  if (n <= 0) return;
  switch (dtype) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(base) + offset, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kBF16: {
      uint16_t* dst = static_cast<uint16_t*>(base) + offset;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), f32x8_to_bf16(_mm256_loadu_ps(src + i)));
      for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      uint16_t* dst = static_cast<uint16_t*>(base) + offset;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
      for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      LLMS_CHECK(false, "store_kv_values: {} is not a KV cache dtype", dtype_name(dtype));
  }
}

}  // namespace llmserve
