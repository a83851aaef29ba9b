#include "quant/scale_check.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "common/check.h"
#include "quant/block_formats.h"

namespace llmserve::quant {
namespace {

struct Fields {
  int n = 0;
  size_t off[2] = {0, 0};
  const char* name[2] = {"", ""};
};

Fields scale_fields(DType type) {
  switch (type) {
    case DType::kQ4_0: return {1, {offsetof(BlockQ4_0, d)}, {"d"}};
    case DType::kQ4_1: return {2, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}, {"d", "m"}};
    case DType::kQ5_0: return {1, {offsetof(BlockQ5_0, d)}, {"d"}};
    case DType::kQ5_1: return {2, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}, {"d", "m"}};
    case DType::kQ8_0: return {1, {offsetof(BlockQ8_0, d)}, {"d"}};
    case DType::kQ2_K:
      return {2, {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}, {"d", "dmin"}};
    case DType::kQ3_K: return {1, {offsetof(BlockQ3_K, d)}, {"d"}};
    case DType::kQ4_K:
      return {2, {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}, {"d", "dmin"}};
    case DType::kQ5_K:
      return {2, {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}, {"d", "dmin"}};
    case DType::kQ6_K: return {1, {offsetof(BlockQ6_K, d)}, {"d"}};
    case DType::kIQ4_NL: return {1, {offsetof(BlockIQ4_NL, d)}, {"d"}};
    case DType::kIQ4_XS: return {1, {offsetof(BlockIQ4_XS, d)}, {"d"}};
    default: break;
  }
  LLMS_CHECK(false, "first_nonfinite_scale: {} is not a quantized type", dtype_name(type));
  return {};
}

}  // namespace

BadScale first_nonfinite_scale(DType type, const void* data, int64_t blocks) {
  const Fields f = scale_fields(type);
  const int64_t bb = dtype_block_bytes(type);
  const auto* p = static_cast<const uint8_t*>(data);
  for (int64_t b = 0; b < blocks; ++b)
    for (int i = 0; i < f.n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + b * bb + f.off[i], 2);
      if ((h & 0x7C00) == 0x7C00) return {b, f.name[i], f16_to_f32(h)};  // exponent all ones
    }
  return {};
}

}  // namespace llmserve::quant
