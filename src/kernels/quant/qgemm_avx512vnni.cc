// The quantized GEMM's AVX-512 VNNI kernels: the AVX-512 ones with vpdpwssd (the int16 pair
// products and their int32 accumulation in one instruction). Entered only when the CPU has
// avx512vnni (cpu_has_avx512_vnni()).
#include "kernels/quant/qgemm_avx512_traits.h"

#include "common/dtype.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {
namespace {
struct Avx512VnniQ : Avx512Q {
  static iv madd_acc(iv acc, iv w, iv a) { return _mm512_dpwssd_epi32(acc, w, a); }
};
}  // namespace
}  // namespace llmserve::qgemm

#include "kernels/quant/qgemm_kernels_impl.h"

namespace llmserve::qgemm {
const QKernels& qkernels_avx512vnni() { return make_kernels<Avx512VnniQ>("avx512vnni"); }
}  // namespace llmserve::qgemm
