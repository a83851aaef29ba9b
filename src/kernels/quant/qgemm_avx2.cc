// The quantized GEMM's kernels for the x86-64-v3 baseline (AVX2 + FMA + F16C): 16-bit lanes
// in ymm registers, vpmaddwd + vpaddd, a 6-row x 16-column micro-kernel (12 int32 accumulators);
// few-row calls on Q4_K / Q5_K / Q6_K / Q5_0 go to the byte kernels (qgemm_avx2_bytes.h).
#include "kernels/quant/qgemm_avx2_traits.h"

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"
#include "kernels/quant/qgemm_kernels_impl.h"
#include "kernels/quant/qgemm_avx2_bytes.h"

namespace llmserve::qgemm {
/// Few-row Q4_K, Q5_K, Q6_K and Q5_0 calls: the byte kernels (qgemm_avx2_bytes.h).
const QKernels& qkernels_avx2() {
  return make_kernels_with_bytes<Avx2Q, bytes_kernel_type, fused_bytes_avx2, split_acts_avx2>("avx2");
}
}  // namespace llmserve::qgemm
