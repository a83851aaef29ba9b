// Portable C++ + AVX2/FMA intrinsics (the x86-64-v3 baseline) implementations of ops.h.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"

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
  }
}

void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool) {
  const int64_t n = w.rows, k = w.cols;
  const size_t elem = dtype_size(w.dtype);
  auto body = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row_buf;
    for (int64_t r = begin; r < end; ++r) {
      const float* row;
      if (w.dtype == DType::kF32) {
        row = static_cast<const float*>(w.data) + r * k;
      } else {
        row_buf.resize(k);
        to_f32(static_cast<const uint8_t*>(w.data) + r * k * elem, w.dtype, k, row_buf.data());
        row = row_buf.data();
      }
      for (int64_t i = 0; i < m; ++i) y[i * n + r] = dot_f32(x + i * k, row, k);
    }
  };
  // Below ~64K multiply-adds the fork/join costs more than it saves.
  if (pool == nullptr || n * k * m < (1 << 16)) {
    body(0, n);
  } else {
    pool->parallel_for(n, body, 16);
  }
}

void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

void rope(float* x, int32_t num_heads, int32_t head_dim, int32_t pos, const float* inv_freq,
          RopeStyle style) {
  const int32_t half = head_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    for (int32_t h = 0; h < num_heads; ++h) {
      float* v = x + static_cast<int64_t>(h) * head_dim;
      const int32_t a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
      const int32_t b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace llmserve
