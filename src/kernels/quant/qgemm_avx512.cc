// The quantized GEMM's AVX-512 (F/BW/VL/DQ) kernels: vpmaddwd + vpaddd on zmm.
#include "kernels/quant/qgemm_avx512_traits.h"

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"
#include "kernels/quant/qgemm_kernels_impl.h"

namespace llmserve::qgemm {
const QKernels& qkernels_avx512() { return make_kernels<Avx512Q>("avx512"); }
}  // namespace llmserve::qgemm
