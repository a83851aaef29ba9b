// Reference dequantizer: one block at a time, one element at a time, in the float32 arithmetic
// of gguf-py/gguf/quants.py (each `dequantize_blocks`). Where gguf-py computes a per-sub-block
// scale first (dl = d * sc) and then dl * q - ml, so do we: the rounding of each product is
// part of the result. Built with -ffp-contract=off so no multiply-add is fused.
#include "quant/dequantize_ref.h"

#include <cstring>

#include "common/check.h"
#include "quant/block_formats.h"

namespace llmserve {
namespace {

using namespace quant;

/// A copy of block `i` of a row (blocks in a mapped file need not be aligned).
template <typename B>
B load_block(const void* src, int64_t i) {
  B b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(B)),
              sizeof(B));
  return b;
}

/// 4-bit code of element e (< 32) of a 32-element block: nibble e / 16 of qs[e % 16].
inline int nibble32(const uint8_t* qs, int e) { return (qs[e % 16] >> (4 * (e / 16))) & 0xF; }

void q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = d * static_cast<float>(nibble32(b.qs, e) - 8);
}

void q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int e = 0; e < kQK; ++e) y[e] = d * static_cast<float>(nibble32(b.qs, e)) + m;
}

/// Fifth bit of element e of a Q5_0/Q5_1 block: bit e of the little-endian uint32 qh.
inline int high_bit32(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }

void q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) {
    const int q = nibble32(b.qs, e) | high_bit32(b.qh, e) << 4;
    y[e] = d * static_cast<float>(q - 16);
  }
}

void q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int e = 0; e < kQK; ++e) {
    const int q = nibble32(b.qs, e) | high_bit32(b.qh, e) << 4;
    y[e] = d * static_cast<float>(q) + m;
  }
}

void q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = static_cast<float>(b.qs[e]) * d;
}

/// 2-bit field of element e (< 256) in the K-quant layout of Q2_K/Q3_K (qs[64]):
/// e = 128 h + 32 p + l -> bits 2p..2p+1 of qs[32 h + l].
inline int crumb256(const uint8_t* qs, int e) {
  const int h = e / 128, p = (e % 128) / 32, l = e % 32;
  return (qs[32 * h + l] >> (2 * p)) & 3;
}

void q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int s = 0; s < kQK_K / 16; ++s) {
    const float dl = d * static_cast<float>(b.scales[s] & 0xF);
    const float ml = dmin * static_cast<float>(b.scales[s] >> 4);
    for (int e = 16 * s; e < 16 * s + 16; ++e) y[e] = dl * static_cast<float>(crumb256(b.qs, e)) - ml;
  }
}

void q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < kQK_K / 16; ++s) {
    const int lo = (b.scales[s % 8] >> (4 * (s / 8))) & 0xF;
    const int hi = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * static_cast<float>((lo | hi << 4) - 32);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      const int high = (b.hmask[e % 32] >> (e / 32)) & 1;  // set: no offset; clear: -4
      const int q = crumb256(b.qs, e) - (high ? 0 : 4);
      y[e] = dl * static_cast<float>(q);
    }
  }
}

/// Q4_K/Q5_K 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
void scale_min_k4(const uint8_t* sc, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = sc[j] & 63;
    *min = sc[j + 4] & 63;
  } else {
    *scale = (sc[j + 4] & 0xF) | (sc[j - 4] >> 6) << 4;
    *min = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
  }
}

/// 4-bit code of element e (< 256) of Q4_K/Q5_K: e = 64 c + 32 h + l -> nibble h of
/// qs[32 c + l].
inline int nibble256(const uint8_t* qs, int e) {
  return (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
}

/// Q4_K/Q5_K: y[e] = (d * sc_j) * code(e) - (dmin * mn_j) over the 8 sub-blocks j of 32.
template <typename B, typename Code>
void k4_sub_blocks(const B& b, const Code& code, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int j = 0; j < kQK_K / 32; ++j) {
    int sc = 0, mn = 0;
    scale_min_k4(b.scales, j, &sc, &mn);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
    for (int e = 32 * j; e < 32 * j + 32; ++e) y[e] = dl * static_cast<float>(code(e)) - ml;
  }
}

void q4_k(const BlockQ4_K& b, float* y) {
  k4_sub_blocks(b, [&](int e) { return nibble256(b.qs, e); }, y);
}

void q5_k(const BlockQ5_K& b, float* y) {
  k4_sub_blocks(b, [&](int e) { return nibble256(b.qs, e) | ((b.qh[e % 32] >> (e / 32)) & 1) << 4; },
                y);
}

void q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < kQK_K / 16; ++s) {
    const float dl = d * static_cast<float>(b.scales[s]);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      const int h = e / 128, p = (e % 128) / 32, l = e % 32;
      const int lo = (b.ql[64 * h + 32 * (p % 2) + l] >> (4 * (p / 2))) & 0xF;
      const int hi = (b.qh[32 * h + l] >> (2 * p)) & 3;
      y[e] = dl * static_cast<float>((lo | hi << 4) - 32);
    }
  }
}

void iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = d * static_cast<float>(kIq4nlValues[nibble32(b.qs, e)]);
}

void iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK_K / 32; ++j) {
    const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    const int hi = (b.scales_h >> (2 * j)) & 3;
    const float dl = d * static_cast<float>((lo | hi << 4) - 32);
    for (int e = 0; e < 32; ++e) {
      const int q = (b.qs[16 * j + e % 16] >> (4 * (e / 16))) & 0xF;
      y[32 * j + e] = dl * static_cast<float>(kIq4nlValues[q]);
    }
  }
}

/// Applies `fn(block, out)` to each of the n / elems blocks of type B.
template <typename B, int Elems, typename Fn>
void each_block(const void* src, float* out, int64_t n, Fn fn) {
  static_assert(sizeof(B) > 0);
  for (int64_t i = 0; i < n / Elems; ++i) fn(load_block<B>(src, i), out + i * Elems);
}

}  // namespace

void dequantize_row_ref(DType type, const void* src, float* out, int64_t n) {
  LLMS_CHECK(n >= 0 && n % dtype_block_elems(type) == 0,
             "dequantize_row_ref: {} elements are not whole {} blocks of {}", n,
             dtype_name(type), dtype_block_elems(type));
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = type == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case DType::kQ4_0: return each_block<BlockQ4_0, kQK>(src, out, n, q4_0);
    case DType::kQ4_1: return each_block<BlockQ4_1, kQK>(src, out, n, q4_1);
    case DType::kQ5_0: return each_block<BlockQ5_0, kQK>(src, out, n, q5_0);
    case DType::kQ5_1: return each_block<BlockQ5_1, kQK>(src, out, n, q5_1);
    case DType::kQ8_0: return each_block<BlockQ8_0, kQK>(src, out, n, q8_0);
    case DType::kQ2_K: return each_block<BlockQ2_K, kQK_K>(src, out, n, q2_k);
    case DType::kQ3_K: return each_block<BlockQ3_K, kQK_K>(src, out, n, q3_k);
    case DType::kQ4_K: return each_block<BlockQ4_K, kQK_K>(src, out, n, q4_k);
    case DType::kQ5_K: return each_block<BlockQ5_K, kQK_K>(src, out, n, q5_k);
    case DType::kQ6_K: return each_block<BlockQ6_K, kQK_K>(src, out, n, q6_k);
    case DType::kIQ4_NL: return each_block<BlockIQ4_NL, kQK>(src, out, n, iq4_nl);
    case DType::kIQ4_XS: return each_block<BlockIQ4_XS, kQK_K>(src, out, n, iq4_xs);
  }
  LLMS_CHECK(false, "dequantize_row_ref: unknown dtype {}", static_cast<int>(type));
}

}  // namespace llmserve
