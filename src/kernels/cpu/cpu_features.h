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
/// ("avx2", "avxvnni", "avx512", "avx512bf16"; read once) so tests and benchmarks can force the
/// fallback paths ("avxvnni" caps at kAvx2 and keeps AVX-VNNI, cpu_has_avx_vnni()).
CpuIsa cpu_isa();

/// Overrides cpu_isa() for the rest of the process (tests): the value is capped at what the
/// CPU supports, so a request for a missing ISA falls back safely.
void set_cpu_isa_for_testing(CpuIsa isa);

const char* cpu_isa_name(CpuIsa isa);

/// Whether the CPU has AVX512-VNNI (vpdpwssd) and cpu_isa() allows AVX-512 (the quantized
/// GEMM's fastest kernels; LLMSERVE_ISA=avx2 turns them off with the rest of AVX-512).
bool cpu_has_avx512_vnni();

/// Whether the CPU has AVX-VNNI (the VEX-encoded vpdpbusd / vpdpwssd on ymm registers: Intel
/// Alder Lake and later client cores, Zen 5; Zen 2-4 lack it) and LLMSERVE_ISA is not "avx2",
/// which means the plain x86-64-v3 baseline (to stand in for Zen 2/3). The quantized GEMM's
/// AVX2 kernels use it when cpu_isa() is kAvx2; AVX-512 machines use their own families.
bool cpu_has_avx_vnni();

/// Overrides cpu_has_avx_vnni() for the rest of the process (tests, benchmarks); true is
/// capped at what the CPU supports.
void set_avx_vnni_for_testing(bool on);

}  // namespace llmserve
