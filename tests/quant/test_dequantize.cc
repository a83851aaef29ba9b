// The reference dequantizer against gguf-py (../shared/testdata/quant_vectors: one tensor of
// each type, copied byte for byte from llama-quantize output, and gguf-py's float32
// dequantization of it): bit for bit. Plus hand-built blocks whose values follow from the
// layouts in ggml-common.h, and the type table's ids and sizes.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "quant/block_formats.h"
#include "quant/dequantize_ref.h"
#include "weights/gguf.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

std::string vectors(const std::string& file) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/quant_vectors/" + file;
}

constexpr DType kTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1,
                            DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K,
                            DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

TEST(DTypeTable, GgmlIdsSizesAndNames) {
  // ids: enum ggml_type (ggml.h); sizes: sizeof(block_*) in ggml-common.h.
  struct Want { DType t; uint32_t id; const char* name; int elems, bytes; };
  const Want want[] = {
      {DType::kQ4_0, 2, "Q4_0", 32, 18},     {DType::kQ4_1, 3, "Q4_1", 32, 20},
      {DType::kQ5_0, 6, "Q5_0", 32, 22},     {DType::kQ5_1, 7, "Q5_1", 32, 24},
      {DType::kQ8_0, 8, "Q8_0", 32, 34},     {DType::kQ2_K, 10, "Q2_K", 256, 84},
      {DType::kQ3_K, 11, "Q3_K", 256, 110},  {DType::kQ4_K, 12, "Q4_K", 256, 144},
      {DType::kQ5_K, 13, "Q5_K", 256, 176},  {DType::kQ6_K, 14, "Q6_K", 256, 210},
      {DType::kIQ4_NL, 20, "IQ4_NL", 32, 18}, {DType::kIQ4_XS, 23, "IQ4_XS", 256, 136}};
  for (const Want& w : want) {
    EXPECT_TRUE(is_quantized(w.t));
    EXPECT_EQ(dtype_ggml_id(w.t), w.id);
    EXPECT_EQ(dtype_from_ggml_id(w.id), w.t);
    EXPECT_EQ(dtype_name(w.t), w.name);
    EXPECT_EQ(dtype_ggml_name(w.t), w.name);
    EXPECT_EQ(dtype_block_elems(w.t), w.elems);
    EXPECT_EQ(dtype_block_bytes(w.t), w.bytes);
    EXPECT_EQ(dtype_row_bytes(w.t, 4096), 4096 / w.elems * w.bytes);
  }
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::kQ4_K), 4.5);
  EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::kQ6_K), 6.5625);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_FALSE(is_quantized(t));
    EXPECT_EQ(dtype_row_bytes(t, 10), 10 * static_cast<int64_t>(dtype_size(t)));
  }
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_ggml_name(DType::kBF16), "BF16");
  EXPECT_EQ(dtype_from_ggml_id(30), DType::kBF16);
  // Types llmserve does not read: Q8_1, Q8_K, IQ2_XXS, IQ3_S, TQ1_0, MXFP4, I8, F64, > 41.
  for (uint32_t id : {9u, 15u, 16u, 21u, 24u, 28u, 34u, 39u, 42u, 1000u})
    EXPECT_FALSE(dtype_from_ggml_id(id).has_value()) << id;
}

TEST(DTypeTableDeathTest, ElementSizeOfQuantizedTypeIsABug) {
  EXPECT_DEATH(dtype_size(DType::kQ4_K), "quantized type has no element size");
  EXPECT_DEATH(dtype_row_bytes(DType::kQ4_0, 33), "not whole blocks");
  float out[32];
  const uint8_t blocks[36] = {};
  EXPECT_DEATH(dequantize_row_ref(DType::kQ8_0, blocks, out, 31), "whole");
}

class Vectors : public ::testing::TestWithParam<DType> {};

TEST_P(Vectors, BitForBitEqualToGgufPy) {
  const DType type = GetParam();
  const std::string name(dtype_ggml_name(type));
  auto g = GgufFile::open(vectors("vectors.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const TensorView* t = g->find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->dtype, type);
  auto ref = read_npy(vectors(name + ".npy"));
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  ASSERT_EQ(t->shape, ref->shape);
  ASSERT_EQ(t->shape.size(), 2u);
  const int64_t rows = t->shape[0], cols = t->shape[1];
  EXPECT_EQ(rows, 16);
  EXPECT_EQ(t->nbytes, static_cast<size_t>(rows * dtype_row_bytes(type, cols)));
  std::vector<float> row(cols);
  int64_t mismatches = 0, nonzero = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_ref(type, static_cast<const uint8_t*>(t->data) + r * dtype_row_bytes(type, cols),
                       row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      const float want = ref->data[r * cols + c];
      nonzero += want != 0;
      if (std::bit_cast<uint32_t>(row[c]) != std::bit_cast<uint32_t>(want)) {
        if (++mismatches <= 5)
          ADD_FAILURE() << name << " at (" << r << ", " << c << "): got " << row[c] << " want "
                        << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << name;
  EXPECT_GT(nonzero, rows * cols / 2) << name;  // real data, not an all-zero tensor
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Vectors, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_ggml_name(info.param)); });

// Hand-built blocks: each expected value follows from the field layout (ggml-common.h) by hand.
template <typename B>
std::vector<float> dequant(DType t, const B& b) {
  std::vector<float> out(dtype_block_elems(t));
  dequantize_row_ref(t, &b, out.data(), dtype_block_elems(t));
  return out;
}

TEST(HandBuiltBlocks, Q4_0NibbleOrder) {
  quant::BlockQ4_0 b{};
  b.d = 0x3800;  // 0.5
  std::memset(b.qs, 0x88, sizeof b.qs);  // code 8 -> 0
  b.qs[0] = 0x1F;  // element 0: 15 -> 0.5 * 7; element 16: 1 -> 0.5 * -7
  const auto y = dequant(DType::kQ4_0, b);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -3.5f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[31], 0.f);
}

TEST(HandBuiltBlocks, Q5_1HighBits) {
  quant::BlockQ5_1 b{};
  b.d = 0x3C00;  // 1
  b.m = 0xBC00;  // -1
  b.qh[3] = 0x80;  // bit 31: fifth bit of element 31
  b.qs[15] = 0x20;  // element 31's low nibble 2 -> q = 18
  const auto y = dequant(DType::kQ5_1, b);
  EXPECT_EQ(y[31], 17.f);
  EXPECT_EQ(y[15], -1.f);
}

TEST(HandBuiltBlocks, Q4_KScalesAndMins) {
  quant::BlockQ4_K b{};
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  b.scales[0] = 0x42;  // sub-block 0: scale 2; bits 6-7 = 1 -> high bits of sub-block 4's scale
  b.scales[4] = 3;     // sub-block 0: min 3
  b.scales[8] = 0x21;  // sub-block 4: scale low 1, min low 2
  b.qs[0] = 0x05;      // element 0 (sub-block 0): 5; element 32 (sub-block 1): 0
  b.qs[64] = 0x07;     // element 128 (sub-block 4): 7
  const auto y = dequant(DType::kQ4_K, b);
  EXPECT_EQ(y[0], 2.f * 5 - 1.5f);
  EXPECT_EQ(y[32], 0.f);
  EXPECT_EQ(y[128], (1 + 16) * 7.f - 0.5f * 2);
}

TEST(HandBuiltBlocks, Q6_KLowAndHighBits) {
  quant::BlockQ6_K b{};
  b.d = 0x3C00;
  b.scales[0] = 3;
  b.scales[4] = -1;
  b.ql[0] = 0x0A;  // element 0 low bits 10; element 64 low bits 0
  b.qh[0] = 0x02;  // element 0 high bits 2; element 64 high bits 0
  const auto y = dequant(DType::kQ6_K, b);
  EXPECT_EQ(y[0], 3.f * ((10 | 2 << 4) - 32));
  EXPECT_EQ(y[64], -1.f * -32);
}

TEST(HandBuiltBlocks, IQ4_XSCodebook) {
  quant::BlockIQ4_XS b{};
  b.d = 0x3C00;
  b.scales_l[0] = 0x01 | 0x20;  // sub-block 0 low 1, sub-block 1 low 2
  b.scales_h = 0x2 << 2;        // sub-block 1 high bits 2 -> 6-bit scale 34
  b.qs[0] = 0xF0;               // element 0: code 0 -> -127; element 16: code 15 -> 113
  b.qs[16] = 0x08;              // sub-block 1, element 32: code 8 -> 1
  const auto y = dequant(DType::kIQ4_XS, b);
  EXPECT_EQ(y[0], (1 - 32) * -127.f);
  EXPECT_EQ(y[16], (1 - 32) * 113.f);
  EXPECT_EQ(y[32], (2 + 32 - 32) * 1.f);
}

}  // namespace
}  // namespace llmserve
