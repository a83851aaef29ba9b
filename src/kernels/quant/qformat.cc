#include "kernels/quant/qformat.h"

#include <cstring>

#include "common/check.h"
#include "quant/block_formats.h"

namespace llmserve::qgemm {

using namespace quant;

const QuantTraits& quant_traits(DType type) {
  //                               elems bits off  codebook sub   min   act_qmax
  static constexpr QuantTraits kQ4_0{32, 4, 8, false, false, 0, 32767};
  static constexpr QuantTraits kQ4_1{32, 4, 0, false, false, 32, 32767};
  // Q5_0: 12 bits (4095), so that its few-row byte kernels' int16 sums of eight code x
  // split-activation pairs stay exact (qgemm_avx2_bytes.h); still 16x finer than llama.cpp's.
  static constexpr QuantTraits kQ5_0{32, 5, 16, false, false, 0, 4095};
  static constexpr QuantTraits kQ5_1{32, 5, 0, false, false, 32, 32767};
  static constexpr QuantTraits kQ8_0{32, 8, 0, false, false, 0, 32767};
  static constexpr QuantTraits kIQ4_NL{32, 4, 0, true, false, 0, 32767};
  // K-quants: |value * sub_scale| <= 45 (Q2_K), 128 (Q3_K), 945 (Q4_K), 1953 (Q5_K),
  // 4096 (Q6_K), 4064 (IQ4_XS); times act_qmax times 256 stays below 2^31.
  static constexpr QuantTraits kQ2_K{256, 2, 0, false, true, 16, 32767};
  static constexpr QuantTraits kQ3_K{256, 3, 4, false, true, 0, 32767};
  static constexpr QuantTraits kQ4_K{256, 4, 0, false, true, 32, 8191};
  static constexpr QuantTraits kQ5_K{256, 5, 0, false, true, 32, 4095};
  static constexpr QuantTraits kQ6_K{256, 6, 32, false, true, 0, 2047};
  static constexpr QuantTraits kIQ4_XS{256, 4, 0, true, true, 0, 2047};
  switch (type) {
    case DType::kQ4_0: return kQ4_0;
    case DType::kQ4_1: return kQ4_1;
    case DType::kQ5_0: return kQ5_0;
    case DType::kQ5_1: return kQ5_1;
    case DType::kQ8_0: return kQ8_0;
    case DType::kIQ4_NL: return kIQ4_NL;
    case DType::kQ2_K: return kQ2_K;
    case DType::kQ3_K: return kQ3_K;
    case DType::kQ4_K: return kQ4_K;
    case DType::kQ5_K: return kQ5_K;
    case DType::kQ6_K: return kQ6_K;
    case DType::kIQ4_XS: return kIQ4_XS;
    default: break;
  }
  LLMS_CHECK(false, "quant_traits: {} is not a quantized type", dtype_name(type));
  return kQ4_0;
}

namespace {

template <typename B>
B load_block(const void* row, int64_t i) {
  B b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + i * static_cast<int64_t>(sizeof(B)),
              sizeof(B));
  return b;
}

/// Element e (< 32) of a 32-element block: nibble e / 16 of qs[e % 16].
inline int nibble32(const uint8_t* qs, int e) { return (qs[e % 16] >> (4 * (e / 16))) & 0xF; }
/// Fifth bit of element e of Q5_0/Q5_1: bit e of the little-endian 32-bit qh.
inline int high_bit32(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }
/// 2-bit field of element e (< 256) of Q2_K/Q3_K: e = 128 h + 32 p + l -> bits 2p.. of
/// qs[32 h + l].
inline int crumb256(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
/// 4-bit field of element e (< 256) of Q4_K/Q5_K: e = 64 c + 32 h + l -> nibble h of
/// qs[32 c + l].
inline int nibble256(const uint8_t* qs, int e) {
  return (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
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

void fill_values(const QuantTraits& t, IntBlock* out) {
  for (int e = 0; e < out->n; ++e) {
    out->value[e] = t.codebook ? kIq4nlValues[out->code[e]]
                               : static_cast<int16_t>(out->code[e] - t.offset);
  }
}

}  // namespace

void decode_block(DType type, const void* row, int64_t i, IntBlock* out) {
  const QuantTraits& t = quant_traits(type);
  out->n = t.block_elems;
  out->dm = 0;
  for (int s = 0; s < 16; ++s) out->sub_scale[s] = 1, out->min[s] = 0;
  switch (type) {
    case DType::kQ4_0: {
      const auto b = load_block<BlockQ4_0>(row, i);
      out->d = f16_to_f32(b.d);
      for (int e = 0; e < 32; ++e) out->code[e] = static_cast<uint8_t>(nibble32(b.qs, e));
      break;
    }
    case DType::kQ4_1: {
      const auto b = load_block<BlockQ4_1>(row, i);
      out->d = f16_to_f32(b.d);
      out->dm = f16_to_f32(b.m);
      out->min[0] = 1;
      for (int e = 0; e < 32; ++e) out->code[e] = static_cast<uint8_t>(nibble32(b.qs, e));
      break;
    }
    case DType::kQ5_0: {
      const auto b = load_block<BlockQ5_0>(row, i);
      out->d = f16_to_f32(b.d);
      for (int e = 0; e < 32; ++e)
        out->code[e] = static_cast<uint8_t>(nibble32(b.qs, e) | high_bit32(b.qh, e) << 4);
      break;
    }
    case DType::kQ5_1: {
      const auto b = load_block<BlockQ5_1>(row, i);
      out->d = f16_to_f32(b.d);
      out->dm = f16_to_f32(b.m);
      out->min[0] = 1;
      for (int e = 0; e < 32; ++e)
        out->code[e] = static_cast<uint8_t>(nibble32(b.qs, e) | high_bit32(b.qh, e) << 4);
      break;
    }
    case DType::kQ8_0: {
      const auto b = load_block<BlockQ8_0>(row, i);
      out->d = f16_to_f32(b.d);
      for (int e = 0; e < 32; ++e) {
        out->code[e] = static_cast<uint8_t>(b.qs[e]);
        out->value[e] = b.qs[e];
      }
      return;  // the int8 is the value
    }
    case DType::kIQ4_NL: {
      const auto b = load_block<BlockIQ4_NL>(row, i);
      out->d = f16_to_f32(b.d);
      for (int e = 0; e < 32; ++e) out->code[e] = static_cast<uint8_t>(nibble32(b.qs, e));
      break;
    }
    case DType::kQ2_K: {
      const auto b = load_block<BlockQ2_K>(row, i);
      out->d = f16_to_f32(b.d);
      out->dm = -f16_to_f32(b.dmin);
      for (int s = 0; s < 16; ++s) {
        out->sub_scale[s] = b.scales[s] & 0xF;
        out->min[s] = b.scales[s] >> 4;
      }
      for (int e = 0; e < 256; ++e) out->code[e] = static_cast<uint8_t>(crumb256(b.qs, e));
      break;
    }
    case DType::kQ3_K: {
      const auto b = load_block<BlockQ3_K>(row, i);
      out->d = f16_to_f32(b.d);
      for (int s = 0; s < 16; ++s) {
        const int lo = (b.scales[s % 8] >> (4 * (s / 8))) & 0xF;
        const int hi = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        out->sub_scale[s] = static_cast<int16_t>((lo | hi << 4) - 32);
      }
      // code = low 2 bits | hmask bit << 2; value = code - 4 (a clear hmask bit means -4).
      for (int e = 0; e < 256; ++e)
        out->code[e] = static_cast<uint8_t>(crumb256(b.qs, e) |
                                            ((b.hmask[e % 32] >> (e / 32)) & 1) << 2);
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool q5 = type == DType::kQ5_K;
      const auto b4 = q5 ? BlockQ4_K{} : load_block<BlockQ4_K>(row, i);
      const auto b5 = q5 ? load_block<BlockQ5_K>(row, i) : BlockQ5_K{};
      const uint8_t* scales = q5 ? b5.scales : b4.scales;
      const uint8_t* qs = q5 ? b5.qs : b4.qs;
      out->d = f16_to_f32(q5 ? b5.d : b4.d);
      out->dm = -f16_to_f32(q5 ? b5.dmin : b4.dmin);
      for (int j = 0; j < 8; ++j) {
        int sc = 0, mn = 0;
        scale_min_k4(scales, j, &sc, &mn);
        out->sub_scale[2 * j] = out->sub_scale[2 * j + 1] = static_cast<int16_t>(sc);
        out->min[j] = static_cast<int16_t>(mn);
      }
      for (int e = 0; e < 256; ++e) {
        int c = nibble256(qs, e);
        if (q5) c |= ((b5.qh[e % 32] >> (e / 32)) & 1) << 4;
        out->code[e] = static_cast<uint8_t>(c);
      }
      break;
    }
    case DType::kQ6_K: {
      const auto b = load_block<BlockQ6_K>(row, i);
      out->d = f16_to_f32(b.d);
      for (int s = 0; s < 16; ++s) out->sub_scale[s] = b.scales[s];
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, p = (e % 128) / 32, l = e % 32;
        const int lo = (b.ql[64 * h + 32 * (p % 2) + l] >> (4 * (p / 2))) & 0xF;
        const int hi = (b.qh[32 * h + l] >> (2 * p)) & 3;
        out->code[e] = static_cast<uint8_t>(lo | hi << 4);
      }
      break;
    }
    case DType::kIQ4_XS: {
      const auto b = load_block<BlockIQ4_XS>(row, i);
      out->d = f16_to_f32(b.d);
      for (int j = 0; j < 8; ++j) {
        const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
        const int hi = (b.scales_h >> (2 * j)) & 3;
        out->sub_scale[2 * j] = out->sub_scale[2 * j + 1] =
            static_cast<int16_t>((lo | hi << 4) - 32);
      }
      for (int j = 0; j < 8; ++j)
        for (int e = 0; e < 32; ++e)
          out->code[32 * j + e] =
              static_cast<uint8_t>((b.qs[16 * j + e % 16] >> (4 * (e / 16))) & 0xF);
      break;
    }
    default:
      LLMS_CHECK(false, "decode_block: {} is not a quantized type", dtype_name(type));
  }
  fill_values(t, out);
}

}  // namespace llmserve::qgemm
