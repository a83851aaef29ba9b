// The reference GEMM for quantized weights (kernels/quant/gemm_quant_ref.h, reached through
// gemm() / gemm_silu_mul()) against dequantize-everything-then-float32-GEMM, for every type, at
// odd shapes (M = 1, 3, 17; N odd; K whole blocks), with and without a thread pool, in kStore
// and kAccumulate mode and with an epilogue; batch invariance (a row's bits do not depend on M
// or the thread count); concat_rows of quantized parts of one type (bytes) and of mixed types
// (kept as parts).
//
// Weights are real blocks: llama-quantize's bytes from ../shared/testdata/quant_vectors,
// rearranged (block b of row r taken from some block of the type's tensor) into the shape
// wanted. The float32 GEMM sees the same values (dequantize_row_ref, bit-exact vs gguf-py in
// tests/quant), so the only difference is summation order: |diff| <= 1e-5 sum |x w| + 1e-6.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/quant/gemm_quant_ref.h"
#include "kernels/quant/qgemm.h"
#include "quant/dequantize_ref.h"
#include "weights/gguf.h"
#include "quant_weights.h"

namespace llmserve {
namespace {

double tol(double mag) { return 1e-5 * mag + 1e-6; }

struct Shape {
  int64_t m, n, blocks;
};
constexpr Shape kShapes[] = {{1, 1, 1}, {1, 13, 3}, {3, 37, 2}, {17, 13, 3}, {17, 37, 4}};

class QuantGemm : public ::testing::TestWithParam<DType> {};

TEST_P(QuantGemm, MatchesDequantizedFloatGemmStoreAccumulateEpilogue) {
  const DType type = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const int64_t k = s.blocks * dtype_block_elems(type);
    const QuantWeight q = make_weight(type, s.n, k, seed++);
    const auto x = random_vec(static_cast<size_t>(s.m * k), seed++);
    const auto mag = magnitudes(x, q.values, s.m, s.n, k);
    std::vector<float> want(static_cast<size_t>(s.m * s.n));
    gemm(x.data(), s.m, q.f32, want.data(), nullptr);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const std::string what = std::string(dtype_name(type)) + " M=" + std::to_string(s.m) +
                               " N=" + std::to_string(s.n) + " K=" + std::to_string(k) +
                               (p ? " pool" : " inline");
      std::vector<float> got(want.size(), NAN);
      gemm(x.data(), s.m, q.w, got.data(), p);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(std::fabs(got[i] - want[i]), tol(mag[i])) << what << " at " << i;
      // y += x W^T over a y that already holds values.
      const auto y0 = random_vec(want.size(), seed++);
      std::vector<float> acc = y0;
      gemm(x.data(), s.m, q.w, acc.data(), p, GemmOutput::kAccumulate);
      for (size_t i = 0; i < acc.size(); ++i)
        ASSERT_LE(std::fabs(acc[i] - (y0[i] + want[i])), tol(mag[i]) + 1e-6) << what << " acc";
      // An epilogue sees every element once, in aligned column ranges, after it is final.
      for (int64_t align : {1, 8}) {
        RecordingEpilogue ep(align, s.n);
        std::vector<float> e(want.size());
        gemm(x.data(), s.m, q.w, e.data(), p, GemmOutput::kStore, &ep);
        EXPECT_EQ(ep.seen(), want.size()) << what;
        for (size_t i = 0; i < e.size(); ++i)
          ASSERT_EQ(e[i], 2 * got[i]) << what << " epilogue at " << i;
      }
    }
  }
}

TEST_P(QuantGemm, SiluMulMatchesDequantizedFloat) {
  const DType type = GetParam();
  ThreadPool pool(2);
  for (const Shape& s : kShapes) {
    const int64_t k = s.blocks * dtype_block_elems(type), f = s.n;
    const QuantWeight q = make_weight(type, 2 * f, k, 7 + static_cast<uint32_t>(s.n));
    const auto x = random_vec(static_cast<size_t>(s.m * k), 99);
    std::vector<float> g(static_cast<size_t>(s.m * 2 * f));
    gemm(x.data(), s.m, q.f32, g.data(), nullptr);  // [M, 2F]: gate | up, float path
    const auto mag = magnitudes(x, q.values, s.m, 2 * f, k);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> got(static_cast<size_t>(s.m * f), NAN);
      gemm_silu_mul(x.data(), s.m, q.w, got.data(), p);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < f; ++j) {
          const double gate = g[i * 2 * f + j], up = g[i * 2 * f + f + j];
          const double want = gate / (1 + std::exp(-gate)) * up;
          // silu' <= 1.1 and |silu(g)| <= |g| + 0.3: bound from the two dot products' errors.
          const double e = 1.1 * tol(mag[i * 2 * f + j]) * std::fabs(up) +
                           (std::fabs(gate) + 0.3) * tol(mag[i * 2 * f + f + j]) + 1e-6;
          ASSERT_NEAR(got[i * f + j], want, e + 1e-6 * std::fabs(want))
              << dtype_name(type) << " (" << i << ", " << j << ")";
        }
    }
  }
}

TEST_P(QuantGemm, BatchInvariantAcrossMAndThreads) {
  const DType type = GetParam();
  const int64_t m = 17, n = 37, k = 4 * dtype_block_elems(type);
  const QuantWeight q = make_weight(type, n, k, 3);
  const QuantWeight gu = make_weight(type, 2 * n, k, 4);
  const auto x = random_vec(static_cast<size_t>(m * k), 5);
  ThreadPool pool(2);
  std::vector<float> all(m * n), all2(m * n), h(m * n), h2(m * n);
  gemm(x.data(), m, q.w, all.data(), nullptr);
  gemm(x.data(), m, q.w, all2.data(), &pool);
  gemm_silu_mul(x.data(), m, gu.w, h.data(), nullptr);
  gemm_silu_mul(x.data(), m, gu.w, h2.data(), &pool);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<float> one(n), h1(n);
    gemm(x.data() + i * k, 1, q.w, one.data(), &pool);
    gemm_silu_mul(x.data() + i * k, 1, gu.w, h1.data(), nullptr);
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(one[j]), std::bit_cast<uint32_t>(all[i * n + j]))
          << dtype_name(type) << " row " << i << " M=1 vs M=17";
      ASSERT_EQ(std::bit_cast<uint32_t>(all2[i * n + j]), std::bit_cast<uint32_t>(all[i * n + j]))
          << dtype_name(type) << " 1 vs 2 threads";
      ASSERT_EQ(std::bit_cast<uint32_t>(h1[j]), std::bit_cast<uint32_t>(h[i * n + j]));
      ASSERT_EQ(std::bit_cast<uint32_t>(h2[i * n + j]), std::bit_cast<uint32_t>(h[i * n + j]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantGemm, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_ggml_name(info.param)); });

// Quantized parts of one type are kept as they are too: no copy of the (usually mapped) rows
// at load, and the GEMM over the stack gives each part's own bits.
TEST(QuantConcatRows, SameTypeKeepsThePartsWithoutACopy) {
  const int64_t k = 512, m = 3;
  const QuantWeight a = make_weight(DType::kQ4_K, 5, k, 1), b = make_weight(DType::kQ4_K, 11, k, 2);
  const WeightMatrix parts[] = {a.w, b.w};
  auto c = concat_rows(parts);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dtype, DType::kQ4_K);
  EXPECT_EQ(c->rows, 16);
  EXPECT_EQ(c->data, nullptr);
  ASSERT_NE(c->parts, nullptr);
  ASSERT_EQ(c->parts->size(), 2u);
  EXPECT_EQ((*c->parts)[0].data, a.w.data);  // borrowed, not copied
  EXPECT_EQ((*c->parts)[1].data, b.w.data);
  const auto x = random_vec(static_cast<size_t>(m * k), 3);
  ThreadPool pool(2);
  std::vector<float> before(static_cast<size_t>(m * 16)), after(before.size());
  gemm(x.data(), m, *c, before.data(), &pool);  // the reference path over the parts
  prepare_weight(*c);
  gemm(x.data(), m, *c, after.data(), &pool);   // the packed parts
  int64_t col = 0;
  for (const WeightMatrix& p : parts) {
    std::vector<float> y(static_cast<size_t>(m * p.rows));
    gemm_quant_recipe_ref(x.data(), m, p, y.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < p.rows; ++j) {
        ASSERT_EQ(std::bit_cast<uint32_t>(after[i * 16 + col + j]), std::bit_cast<uint32_t>(y[i * p.rows + j]))
            << "packed, part at column " << col;
      }
    col += p.rows;
  }
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(before[i], after[i], 1e-3f * (1 + std::fabs(after[i]))) << i;
}

TEST(QuantConcatRows, MixedTypesKeepPartsAndComputeEachInItsType) {
  // As llama-quantize's Q4_K_M gives blk.N.attn_v Q6_K beside Q4_K attn_q/attn_k; plus an F16
  // and a Q8_0 part (ragged 32-element blocks beside 256-element ones).
  const int64_t k = 512, m = 3;
  const QuantWeight q = make_weight(DType::kQ4_K, 8, k, 1), kk = make_weight(DType::kQ4_K, 2, k, 2);
  const QuantWeight v = make_weight(DType::kQ6_K, 2, k, 3), e = make_weight(DType::kQ8_0, 3, k, 4);
  std::vector<uint16_t> half(static_cast<size_t>(2 * k));
  for (size_t i = 0; i < half.size(); ++i) half[i] = f32_to_f16(std::sin(float(i)));
  WeightMatrix h;
  h.data = half.data();
  h.dtype = DType::kF16;
  h.rows = 2;
  h.cols = k;
  const WeightMatrix first[] = {q.w, kk.w};
  auto qk = concat_rows(first);  // same type: parts too
  ASSERT_TRUE(qk.ok());
  const WeightMatrix all[] = {*qk, v.w, h, e.w};
  auto c = concat_rows(all);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_NE(c->parts, nullptr);
  EXPECT_EQ(c->parts->size(), 5u);  // q and k stay two parts
  EXPECT_EQ(c->data, nullptr);
  const int64_t n = 8 + 2 + 2 + 2 + 3;
  ASSERT_EQ(c->rows, n);
  const WeightMatrix nested[] = {*c, v.w};  // parts of parts are flattened
  auto c2 = concat_rows(nested);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->parts->size(), 6u);

  const auto x = random_vec(static_cast<size_t>(m * k), 9);
  ThreadPool pool(2);
  std::vector<float> got(static_cast<size_t>(m * n));
  gemm(x.data(), m, *c, got.data(), &pool);
  // Each part alone (through the reference dot, whatever its dtype) gives the same bits.
  int64_t col = 0;
  for (const WeightMatrix& p : all) {
    std::vector<float> y(static_cast<size_t>(m * p.rows));
    gemm_quant_ref(x.data(), m, p, y.data(), nullptr);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < p.rows; ++j)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i * n + col + j]),
                  std::bit_cast<uint32_t>(y[i * p.rows + j]))
            << "part at column " << col;
    col += p.rows;
  }
  // SwiGLU over a gate (Q4_K) and up (Q6_K) of different types.
  const QuantWeight gate = make_weight(DType::kQ4_K, 5, k, 5), up = make_weight(DType::kQ6_K, 5, k, 6);
  const WeightMatrix gu_parts[] = {gate.w, up.w};
  auto gu = concat_rows(gu_parts);
  ASSERT_TRUE(gu.ok());
  std::vector<float> out(static_cast<size_t>(m * 5)), g(m * 5), u(m * 5);
  gemm_silu_mul(x.data(), m, *gu, out.data(), &pool);
  gemm(x.data(), m, gate.w, g.data(), nullptr);
  gemm(x.data(), m, up.w, u.data(), nullptr);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], g[i] / (1.0f + std::exp(-g[i])) * u[i]) << i;
}

TEST(QuantConcatRows, Errors) {
  const QuantWeight a = make_weight(DType::kQ4_0, 2, 64, 1), b = make_weight(DType::kQ4_0, 2, 96, 2);
  const WeightMatrix parts[] = {a.w, b.w};
  EXPECT_EQ(concat_rows(parts).status().code(), StatusCode::kInvalidArgument);
  WeightMatrix odd = a.w;
  odd.cols = 48;  // not whole 32-element blocks
  const WeightMatrix bad[] = {odd};
  EXPECT_EQ(concat_rows(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(DotRef, DoubleAccumulationRoundedOnce) {
  const auto a = random_vec(1027, 1), b = random_vec(1027, 2);
  for (int64_t n : {0, 1, 7, 8, 9, 1027}) {
    double want = 0;  // the same lanes and tree, written out
    double lane[8] = {};
    for (int64_t i = 0; i < n; ++i) lane[i % 8] += double(a[i]) * double(b[i]);
    want = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    EXPECT_EQ(dot_ref(a.data(), b.data(), n), static_cast<float>(want)) << n;
  }
}

}  // namespace
}  // namespace llmserve
