// The quantized GEMM's AVX-512 (F/BW/VL/DQ) kernels: vpmaddwd + vpaddd on zmm.
#include "kernels/quant/qgemm_avx512_traits.h"

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"
#include "kernels/quant/qgemm_kernels_impl.h"
#include "kernels/quant/qgemm_avx2_bytes.h"
#include "kernels/quant/qgemm_avx512_bytes.h"

namespace llmserve::qgemm {
/// Few-row Q6_K and Q5_0 calls: the AVX-512 byte kernel (qgemm_avx512_bytes.h).
const QKernels& qkernels_avx512() {
  return make_kernels_with_bytes<Avx512Q, bytes_kernel_type_avx512, fused_bytes_avx512, split_acts_avx2>(
      "avx512");
}
}  // namespace llmserve::qgemm
