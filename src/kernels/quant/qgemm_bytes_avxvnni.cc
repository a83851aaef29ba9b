// The AVX-VNNI family's byte kernels (qgemm_avx2_bytes.h): Q4_K, Q5_K, Q6_K and Q5_0 few-row
// calls with the VEX vpdpbusd (qgemm_avx2_bytes_impl.h, kVnni true). Compiled with -mavxvnni;
// entered only when cpu_has_avx_vnni().
#include "kernels/quant/qgemm_avx2_bytes.h"

#include "kernels/quant/qgemm_avx2_bytes_impl.h"

namespace llmserve::qgemm {

void fused_bytes_avxvnni(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                         const uint8_t* rec, const RecordLayout& lay, float* facc,
                         const uint8_t* pf, const uint8_t* pf_end, int64_t nchunks) {
  fused_bytes_256<true>(type, mr, a, row0, k0, e, rec, lay, facc, pf, pf_end, nchunks);
}

}  // namespace llmserve::qgemm
