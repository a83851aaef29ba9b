// ggml's block layouts for the quantized types llmserve reads, as GGUF files store them.
// Specification: ggml/src/ggml-common.h in llama.cpp (block_q4_0 ... block_iq4_xs); the field
// meanings below follow it and gguf-py/gguf/quants.py (the reference NumPy dequantizer).
// All multi-byte fields are little-endian; `uint16_t` fields named d/m/dmin are IEEE half
// floats (ggml_half). A row of n elements is n / elems consecutive blocks; element e of the
// row lies in block e / elems.
//
// The structs are plain byte layouts (sizeof == the type's block bytes, no padding); code that
// reads them from a mapped file copies a block out with memcpy (blocks need not be aligned).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace llmserve::quant {

inline constexpr int kQK = 32;    // elements per block of the 32-element types (QK4_0 etc.)
inline constexpr int kQK_K = 256; // elements per K-quant super-block (QK_K)

/// Q4_0: x = d * (q - 8), q the 4-bit code. qs[j] holds element j (low nibble) and j + 16
/// (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

/// Q4_1: x = d * q + m. Nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQK / 2];
};

/// Q5_0: x = d * (q - 16), q = nibble | (bit j of qh) << 4; nibbles as Q4_0, qh a
/// little-endian uint32 whose bit j is the fifth bit of element j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

/// Q5_1: x = d * q + m, q as Q5_0.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

/// Q8_0: x = d * q, q a signed byte.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

/// Q2_K: 16 sub-blocks of 16. scales[s]: low nibble scale, high nibble min of sub-block s;
/// x = (d * scale) * q - (dmin * min), q 2 bits. Element e (= 128 h + 32 p + l, l < 32) is bits
/// 2p..2p+1 of qs[32 h + l]; its sub-block is e / 16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d, dmin;
};

/// Q3_K: 16 sub-blocks of 16, x = (d * (scale - 32)) * q, q = low2 - 4 * !(hmask bit) in
/// [-4, 3]. low2 of element e (= 128 h + 32 p + l) is bits 2p..2p+1 of qs[32 h + l]; its high
/// bit is bit (e / 32) of hmask[e % 32]. The 6-bit scale of sub-block s: low 4 bits are
/// nibble (s / 8) of scales[s % 8], high 2 bits are bits 2(s / 4)..+1 of scales[8 + s % 4].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};

/// Q4_K: 8 sub-blocks of 32, x = (d * sc) * q - (dmin * mn), q 4 bits. Element e (= 64 c + 32
/// h + l) is nibble h of qs[32 c + l]; sub-block e / 32. The 6-bit sc/mn of sub-block j are
/// packed in scales[12] (ggml's get_scale_min_k4): j < 4: sc = scales[j] & 63, mn =
/// scales[j + 4] & 63; j >= 4: sc = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4,
/// mn = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};

/// Q5_K: Q4_K plus a fifth bit: q = nibble | (bit (e / 32) of qh[e % 32]) << 4.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

/// Q6_K: 16 sub-blocks of 16, x = (d * scales[e / 16]) * (q - 32), q 6 bits. For element
/// e = 128 h + 32 p + l (p < 4, l < 32): low 4 bits are nibble (p / 2) of
/// ql[64 h + 32 (p % 2) + l], high 2 bits are bits 2p..2p+1 of qh[32 h + l].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

/// The IQ4_NL / IQ4_XS codebook (kvalues_iq4nl in ggml-common.h).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

/// IQ4_NL: x = d * kIq4nlValues[q], nibbles as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

/// IQ4_XS: 8 sub-blocks of 32, x = (d * (scale - 32)) * kIq4nlValues[q]. The 6-bit scale of
/// sub-block j: low 4 bits nibble (j % 2) of scales_l[j / 2], high 2 bits bits 2j..2j+1 of
/// scales_h. Sub-block j's elements: qs[16 j + i] low nibble is element 32 j + i, high nibble
/// element 32 j + 16 + i.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

/// Compile-time link between a block struct and its DType (sizes checked against the table
/// in common/dtype.h, which says what the GGUF reader accepts).
template <DType T> struct BlockOf;
template <> struct BlockOf<DType::kQ4_0> { using type = BlockQ4_0; };
template <> struct BlockOf<DType::kQ4_1> { using type = BlockQ4_1; };
template <> struct BlockOf<DType::kQ5_0> { using type = BlockQ5_0; };
template <> struct BlockOf<DType::kQ5_1> { using type = BlockQ5_1; };
template <> struct BlockOf<DType::kQ8_0> { using type = BlockQ8_0; };
template <> struct BlockOf<DType::kQ2_K> { using type = BlockQ2_K; };
template <> struct BlockOf<DType::kQ3_K> { using type = BlockQ3_K; };
template <> struct BlockOf<DType::kQ4_K> { using type = BlockQ4_K; };
template <> struct BlockOf<DType::kQ5_K> { using type = BlockQ5_K; };
template <> struct BlockOf<DType::kQ6_K> { using type = BlockQ6_K; };
template <> struct BlockOf<DType::kIQ4_NL> { using type = BlockIQ4_NL; };
template <> struct BlockOf<DType::kIQ4_XS> { using type = BlockIQ4_XS; };

template <DType T>
constexpr bool block_matches_table() {
  using B = typename BlockOf<T>::type;
  return sizeof(B) == static_cast<size_t>(dtype_block_bytes(T)) &&
         (dtype_block_elems(T) == kQK || dtype_block_elems(T) == kQK_K);
}
static_assert(block_matches_table<DType::kQ4_0>() && block_matches_table<DType::kQ4_1>() &&
              block_matches_table<DType::kQ5_0>() && block_matches_table<DType::kQ5_1>() &&
              block_matches_table<DType::kQ8_0>() && block_matches_table<DType::kQ2_K>() &&
              block_matches_table<DType::kQ3_K>() && block_matches_table<DType::kQ4_K>() &&
              block_matches_table<DType::kQ5_K>() && block_matches_table<DType::kQ6_K>() &&
              block_matches_table<DType::kIQ4_NL>() && block_matches_table<DType::kIQ4_XS>(),
              "block struct sizes must match ggml-common.h and common/dtype.h");
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ3_K, d) == 108 &&
              offsetof(BlockQ6_K, d) == 208 && offsetof(BlockQ5_K, qs) == 48 &&
              offsetof(BlockIQ4_XS, qs) == 8, "field offsets as in ggml-common.h");

}  // namespace llmserve::quant
