#include "kernels/cpu/cpu_features.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace llmserve {
namespace {

CpuIsa detect() {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
    return CpuIsa::kAvx2;
  if (__builtin_cpu_supports("avx512bf16")) return CpuIsa::kAvx512Bf16;
  return CpuIsa::kAvx512;
}

CpuIsa cap_from_env(CpuIsa hw) {
  const char* env = std::getenv("LLMSERVE_ISA");
  if (env == nullptr) return hw;
  const std::string_view v(env);
  CpuIsa want = hw;
  if (v == "avx2" || v == "avxvnni") want = CpuIsa::kAvx2;
  else if (v == "avx512") want = CpuIsa::kAvx512;
  else if (v == "avx512bf16") want = CpuIsa::kAvx512Bf16;
  else if (!v.empty())
    std::fprintf(stderr,
                 "warning: LLMSERVE_ISA='%s' is not avx2, avxvnni, avx512 or avx512bf16; ignored\n",
                 env);
  return want < hw ? want : hw;
}

CpuIsa hardware_isa() {
  static const CpuIsa hw = detect();
  return hw;
}

std::atomic<int> g_isa{-1};
std::atomic<int> g_avx_vnni{-1};

bool hardware_avx_vnni() {
  static const bool hw = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avxvnni") != 0;
  }();
  return hw;
}

}  // namespace

CpuIsa cpu_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(cap_from_env(hardware_isa()));
    g_isa.store(v, std::memory_order_relaxed);
  }
  return static_cast<CpuIsa>(v);
}

void set_cpu_isa_for_testing(CpuIsa isa) {
  const CpuIsa hw = hardware_isa();
  g_isa.store(static_cast<int>(isa < hw ? isa : hw), std::memory_order_relaxed);
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

bool cpu_has_avx512_vnni() {
  static const bool hw = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") != 0;
  }();
  return hw && cpu_isa() >= CpuIsa::kAvx512;
}

bool cpu_has_avx_vnni() {
  int v = g_avx_vnni.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("LLMSERVE_ISA");
    v = hardware_avx_vnni() && !(env != nullptr && std::string_view(env) == "avx2") ? 1 : 0;
    g_avx_vnni.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void set_avx_vnni_for_testing(bool on) {
  g_avx_vnni.store(on && hardware_avx_vnni() ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace llmserve
