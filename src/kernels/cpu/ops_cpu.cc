// Portable C++ + AVX2/FMA intrinsics (the x86-64-v3 baseline) implementations of ops.h.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "kernels/ops.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/flash/flash_kernels.h"
#include "quant/dequantize_ref.h"

namespace llmserve {

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  __m256 acc = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void to_f32(const void* src, DType dtype, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::copy_n(static_cast<const float*>(src), n, dst);
      return;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i*>(s + i))));
      for (; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
      }
      for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    default:  // quantized: whole blocks, the reference dequantizer
      dequantize_row_ref(dtype, src, dst, n);
      return;
  }
}

void convert_dtype(const void* src, DType from, void* dst, DType to, int64_t n) {
  LLMS_CHECK(is_float_dtype(from) && is_float_dtype(to), "convert_dtype: {} -> {}",
             dtype_name(from), dtype_name(to));
  if (to == DType::kF32) return to_f32(src, from, n, static_cast<float*>(dst));
  // Through float32 in chunks (f32 -> f32 is exact; then one rounding to the narrow type).
  constexpr int64_t kChunk = 4096;
  float buf[kChunk];
  auto* out = static_cast<uint16_t*>(dst);
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    to_f32(in + i * dtype_size(from), from, m, buf);
    for (int64_t j = 0; j < m; ++j)
      out[i + j] = to == DType::kBF16 ? f32_to_bf16(buf[j]) : f32_to_f16(buf[j]);
  }
}

void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  const float ss = dot_f32(x, x, n);
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

void fused_add_rmsnorm(float* x, const float* delta, const float* weight, float* out, int64_t n,
                       float eps) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(delta + i));
    _mm256_storeu_ps(x + i, v);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s4 = _mm_hadd_ps(s4, s4);
  s4 = _mm_hadd_ps(s4, s4);
  float ss = _mm_cvtss_f32(s4);
  for (; i < n; ++i) {
    x[i] += delta[i];
    ss += x[i] * x[i];
  }
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t j = 0; j < n; ++j) out[j] = weight[j] * (scale * x[j]);
}

void rope_cos_sin(int32_t pos, const float* inv_freq, int32_t half, float* cos_out,
                  float* sin_out, float scale) {
  for (int32_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
  }
  if (scale == 1.0f) return;
  for (int32_t i = 0; i < half; ++i) {
    cos_out[i] *= scale;
    sin_out[i] *= scale;
  }
}

void rope_head(float* v, int32_t head_dim, const float* cos, const float* sin, RopeStyle style) {
  const int32_t half = head_dim / 2;
  if (style == RopeStyle::kAdjacentPairs) {
    for (int32_t i = 0; i < half; ++i) {
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * cos[i] - x1 * sin[i];
      v[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
  } else {
    for (int32_t i = 0; i < half; ++i) {
      const float x0 = v[i], x1 = v[i + half];
      v[i] = x0 * cos[i] - x1 * sin[i];
      v[i + half] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

void rope(float* x, int32_t num_heads, int32_t head_dim, int32_t pos, const float* inv_freq,
          RopeStyle style) {
  const int32_t half = head_dim / 2;
  std::vector<float> cs(2 * half);
  rope_cos_sin(pos, inv_freq, half, cs.data(), cs.data() + half);
  for (int32_t h = 0; h < num_heads; ++h)
    rope_head(x + static_cast<int64_t>(h) * head_dim, head_dim, cs.data(), cs.data() + half,
              style);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  // The GEMM kernels' vectorized SwiGLU (the float path's own; one per ISA).
  const auto& kr = cpu_isa() >= CpuIsa::kAvx512 ? gemm_detail::gemm_kernels_avx512()
                                                : gemm_detail::gemm_kernels_avx2();
  kr.silu_mul(gate, up, out, n);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  const auto& kr = cpu_isa() >= CpuIsa::kAvx512 ? gemm_detail::gemm_kernels_avx512()
                                                : gemm_detail::gemm_kernels_avx2();
  kr.gelu_tanh_mul(gate, up, out, n);
}

void softcap_inplace(float* x, int64_t n, float cap) {
  const auto& k = cpu_isa() >= CpuIsa::kAvx512 ? flash_detail::flash_kernels_avx512()
                                               : flash_detail::flash_kernels_avx2();
  constexpr int64_t kChunk = 1024;
  float buf[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    for (int64_t i = 0; i < m; ++i) buf[i] = x[i0 + i] / cap;
    k.tanh(buf, buf, m);
    for (int64_t i = 0; i < m; ++i) x[i0 + i] = cap * buf[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace llmserve
