// The AVX2 byte kernels of the quantized GEMM (qgemm_avx2_bytes.h): Q4_K, Q5_K, Q6_K and Q5_0
// few-row calls with vpmaddubsw (qgemm_avx2_bytes_impl.h, kVnni false), and the split of the
// activation codes into bytes that both AVX2 families' byte kernels read.
#include "kernels/quant/qgemm_avx2_bytes.h"

#include <immintrin.h>

#include "common/check.h"
#include "kernels/quant/qgemm_avx2_bytes_impl.h"

namespace llmserve::qgemm {

bool bytes_kernel_type(DType type) {
  return type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K || type == DType::kQ5_0;
}

void split_acts_avx2(const QActs& a, int64_t r0, int64_t r1) {
  LLMS_CHECK(a.k % kUnit == 0, "split_acts_avx2: k = {}", a.k);
  // Per 128-bit lane (one group of 8): bytes lo(0..7) hi(0..7) after the pack, reordered to
  // lo(0 4 1 5) lo(2 6 3 7) hi(0 4 1 5) hi(2 6 3 7).
  const __m256i order = _mm256_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15,
                                         0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  const __m256i low = _mm256_set1_epi16((1 << kSplitShift) - 1);
  for (int64_t r = r0; r < r1; ++r) {
    const int16_t* q = a.q + r * a.k;
    int8_t* out = a.split + r * 2 * a.k;
    for (int64_t i = 0; i < a.k; i += 16) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
      const __m256i lo = _mm256_and_si256(v, low);
      const __m256i hi = _mm256_srai_epi16(v, kSplitShift);
      const __m256i packed = _mm256_packs_epi16(lo, hi);  // per lane: lo(8) hi(8), no saturation
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i),
                          _mm256_shuffle_epi8(packed, order));
    }
  }
}

void fused_bytes_avx2(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                      const uint8_t* rec, const RecordLayout& lay, float* facc,
                      const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  fused_bytes_256<false>(type, mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
}

}  // namespace llmserve::qgemm
