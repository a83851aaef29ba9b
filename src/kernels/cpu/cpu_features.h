// Run-time CPU feature detection for kernel dispatch. Code in *_avx512.cc files may only be
// entered when cpu_isa() says so.
#pragma once

namespace llmserve {

enum class CpuIsa {
  kAvx2,        // x86-64-v3: AVX2 + FMA + F16C (the build baseline)
  kAvx512,      // + AVX-512 F/BW/VL/DQ
  kAvx512Bf16,  // + AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16)
};

/// The best ISA this CPU supports, capped by the LLMSERVE_ISA environment variable
/// ("avx2", "avx512", "avx512bf16"; read once) so tests and benchmarks can force the
/// fallback paths.
CpuIsa cpu_isa();

/// Overrides cpu_isa() for the rest of the process (tests): the value is capped at what the
/// CPU supports, so a request for a missing ISA falls back safely.
void set_cpu_isa_for_testing(CpuIsa isa);

const char* cpu_isa_name(CpuIsa isa);

/// Whether the CPU has AVX512-VNNI (vpdpwssd) and cpu_isa() allows AVX-512 (the quantized
/// GEMM's fastest kernels; LLMSERVE_ISA=avx2 turns them off with the rest of AVX-512).
bool cpu_has_avx512_vnni();

}  // namespace llmserve
