// The quantized GEMM's kernels for AVX2 CPUs with AVX-VNNI (qgemm_avx2.cc's, with the VEX
// vpdpwssd doing each int16 pair product and its int32 accumulation in one instruction, and the
// few-row byte kernels with vpdpbusd: qgemm_avx2_bytes.h). Compiled with -mavxvnni; entered
// only when cpu_has_avx_vnni().
#include "kernels/quant/qgemm_avx2_traits.h"

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {
namespace {
struct Avx2VnniQ : Avx2Q {
  // In place through asm, as Avx2Q::madd_acc; {vex}: the assembler would pick the EVEX
  // (AVX512-VNNI) encoding of the shared mnemonic.
  static iv madd_acc(iv acc, iv w, iv a) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(a));
    return acc;
  }
};
}  // namespace
}  // namespace llmserve::qgemm

#include "kernels/quant/qgemm_kernels_impl.h"
#include "kernels/quant/qgemm_avx2_bytes.h"

namespace llmserve::qgemm {
/// Few-row Q4_K, Q5_K, Q6_K and Q5_0 calls: the byte kernels with vpdpbusd.
const QKernels& qkernels_avxvnni() {
  return make_kernels_with_bytes<Avx2VnniQ, bytes_kernel_type, fused_bytes_avxvnni, split_acts_avx2>("avxvnni");
}
}  // namespace llmserve::qgemm
