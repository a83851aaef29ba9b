// The AVX-512 family's byte kernel (qgemm_avx512_bytes.h): Q6_K and Q5_0 few-row calls with
// vpmaddubsw (qgemm_avx512_bytes_impl.h, kVnni false). Q4_K and Q5_K stay on the 16-bit-lane kernel here: with
// vpmaddubsw + vpmaddwd its byte form costs as many instructions as vpmaddwd's.
#include "kernels/quant/qgemm_avx512_bytes.h"

#include "kernels/quant/qgemm_avx512_bytes_impl.h"

namespace llmserve::qgemm {

bool bytes_kernel_type_avx512(DType type) { return bytes_type_512<false>(type); }

void fused_bytes_avx512(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                        const uint8_t* rec, const RecordLayout& lay, float* facc,
                        const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  fused_bytes_512<false>(type, mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
}

}  // namespace llmserve::qgemm
