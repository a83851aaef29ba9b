// The quantized GEMM's AVX-512 VNNI kernels: the AVX-512 ones with vpdpwssd (the int16 pair
// products and their int32 accumulation in one instruction). Entered only when the CPU has
// avx512vnni (cpu_has_avx512_vnni()).
#include "kernels/quant/qgemm_avx512_traits.h"

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {
namespace {
struct Avx512VnniQ : Avx512Q {
  // vpdpwssd through asm with an in-place accumulator: with the intrinsic, GCC 12 copies
  // every accumulator to a scratch register and back around each instruction (twice the
  // instructions in the micro-kernel's inner loop).
  static iv madd_acc(iv acc, iv w, iv a) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(a));
    return acc;
  }
};
}  // namespace
}  // namespace llmserve::qgemm

#include "kernels/quant/qgemm_kernels_impl.h"
#include "kernels/quant/qgemm_avx2_bytes.h"
#include "kernels/quant/qgemm_avx512_bytes.h"

namespace llmserve::qgemm {
/// Few-row Q4_K, Q5_K, Q6_K and Q5_0 calls: the AVX-512 byte kernels (qgemm_avx512_bytes.h).
const QKernels& qkernels_avx512vnni() {
  return make_kernels_with_bytes<Avx512VnniQ, bytes_kernel_type_avx512vnni, fused_bytes_avx512vnni,
                                 split_acts_avx2>("avx512vnni");
}
}  // namespace llmserve::qgemm
