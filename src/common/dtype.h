// Element types of weights and the KV cache, and scalar conversions between them.
//
// Float types (f32, f16, bf16) have a per-element size (dtype_size). The quantized types are
// ggml's block formats as GGUF files store them (ggml/src/ggml-common.h in llama.cpp is the
// specification): a row of n elements is n / block_elems blocks of block_bytes bytes each, and
// only whole blocks exist, so they have a row size (dtype_row_bytes) but no element size.
// Block layouts and the reference dequantizer live in src/quant/.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string_view>

#include "common/check.h"

namespace llmserve {

enum class DType : uint8_t {
  kF32, kF16, kBF16,
  // ggml block-quantized types (ggml-common.h). Each is only ever whole blocks of a row.
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0,         // 32 elements per block
  kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K,         // 256-element super-blocks ("K-quants")
  kIQ4_NL,                                   // 32 elements, non-linear 4-bit codebook
  kIQ4_XS,                                   // 256 elements, IQ4_NL codebook + 6-bit scales
};

/// One row of the type table: `ggml_id` is the ggml_type value a GGUF tensor info stores,
/// `ggml_name` its spelling in ggml (ggml_type_name), `name` ours (float types lower-case, as
/// flags and logs spell them; quantized types as ggml does). A block is `block_elems`
/// consecutive elements of one row stored in `block_bytes` bytes (float types: 1 element).
struct DTypeInfo {
  DType dtype;
  uint32_t ggml_id;
  std::string_view ggml_name;
  std::string_view name;
  int32_t block_elems;
  int32_t block_bytes;
};

/// Sizes from ggml-common.h (QK4_0 = 32, sizeof(block_q4_0) = 18, QK_K = 256, ...); ids from
/// enum ggml_type in ggml.h. Indexed by DType.
inline constexpr DTypeInfo kDTypeInfo[] = {
    {DType::kF32, 0, "F32", "f32", 1, 4},
    {DType::kF16, 1, "F16", "f16", 1, 2},
    {DType::kBF16, 30, "BF16", "bf16", 1, 2},
    {DType::kQ4_0, 2, "Q4_0", "Q4_0", 32, 18},
    {DType::kQ4_1, 3, "Q4_1", "Q4_1", 32, 20},
    {DType::kQ5_0, 6, "Q5_0", "Q5_0", 32, 22},
    {DType::kQ5_1, 7, "Q5_1", "Q5_1", 32, 24},
    {DType::kQ8_0, 8, "Q8_0", "Q8_0", 32, 34},
    {DType::kQ2_K, 10, "Q2_K", "Q2_K", 256, 84},
    {DType::kQ3_K, 11, "Q3_K", "Q3_K", 256, 110},
    {DType::kQ4_K, 12, "Q4_K", "Q4_K", 256, 144},
    {DType::kQ5_K, 13, "Q5_K", "Q5_K", 256, 176},
    {DType::kQ6_K, 14, "Q6_K", "Q6_K", 256, 210},
    {DType::kIQ4_NL, 20, "IQ4_NL", "IQ4_NL", 32, 18},
    {DType::kIQ4_XS, 23, "IQ4_XS", "IQ4_XS", 256, 136},
};
inline constexpr size_t kNumDTypes = std::size(kDTypeInfo);
static_assert([] {
  for (size_t i = 0; i < kNumDTypes; ++i)
    if (static_cast<size_t>(kDTypeInfo[i].dtype) != i) return false;
  return true;
}(), "kDTypeInfo must be indexed by DType");

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeInfo[static_cast<size_t>(t)]; }

/// True for the ggml block-quantized types (everything but f32, f16, bf16).
constexpr bool is_quantized(DType t) { return dtype_info(t).block_elems > 1; }

/// Bytes of one element of a float type. A quantized type has no element size (use
/// dtype_row_bytes): calling this with one is a bug and aborts.
constexpr size_t dtype_size(DType t) {
  if (is_quantized(t)) {
    LLMS_CHECK(false, "dtype_size({}): a quantized type has no element size", dtype_info(t).name);
  }
  return static_cast<size_t>(dtype_info(t).block_bytes);
}

/// Elements per block (1 for float types).
constexpr int64_t dtype_block_elems(DType t) { return dtype_info(t).block_elems; }
/// Bytes per block (the element size for float types).
constexpr int64_t dtype_block_bytes(DType t) { return dtype_info(t).block_bytes; }

/// Bytes of a row of n elements. n must be a multiple of dtype_block_elems(t) (readers validate
/// this at the boundary; a violation here is a bug and aborts).
constexpr int64_t dtype_row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  LLMS_CHECK(n >= 0 && n % i.block_elems == 0, "dtype_row_bytes({}, {}): not whole blocks of {}",
             i.name, n, i.block_elems);
  return n / i.block_elems * i.block_bytes;
}

/// Our name: "f32", "f16", "bf16", or the ggml spelling of a quantized type ("Q4_K").
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
/// ggml's spelling: "F32", "F16", "BF16", "Q4_K", ...
constexpr std::string_view dtype_ggml_name(DType t) { return dtype_info(t).ggml_name; }
/// The ggml_type id stored in GGUF tensor infos.
constexpr uint32_t dtype_ggml_id(DType t) { return dtype_info(t).ggml_id; }

/// The DType of a ggml_type id, or nullopt for types llmserve does not read (IQ1/IQ2/IQ3,
/// TQ, MXFP4, Q8_K, integer types, ...).
constexpr std::optional<DType> dtype_from_ggml_id(uint32_t id) {
  for (const DTypeInfo& i : kDTypeInfo)
    if (i.ggml_id == id) return i.dtype;
  return std::nullopt;
}

/// Average bits per weight of a type (block bytes * 8 / block elements): Q4_K 4.5, Q8_0 8.5.
constexpr double dtype_bits_per_weight(DType t) {
  return 8.0 * dtype_info(t).block_bytes / dtype_info(t).block_elems;
}

/// The float element types `--dtype` converts between at load. A tensor of any other type a
/// DType may name (quantized GGUF types) is never converted: it stays as stored.
constexpr bool is_float_dtype(DType t) { return !is_quantized(t);
}

/// bfloat16 -> float32: the bf16 bits are the high half of the f32 bits.
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float32 -> bfloat16 with round-to-nearest-even (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// IEEE half -> float32 (the F16C instruction, part of the x86-64-v3 baseline; an intrinsic
/// rather than _Float16, which clang 14 lacks on x86 and which GCC compiles to AVX512-FP16
/// instructions in files built with -mavx512fp16).
inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

/// float32 -> IEEE half, round-to-nearest-even.
inline uint16_t f32_to_f16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace llmserve
