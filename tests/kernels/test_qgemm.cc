// The fast quantized GEMM (kernels/quant/qgemm.h: repacked tiles, integer activations, SIMD
// micro-kernels) against its obviously-correct twin, the scalar recipe reference
// gemm_quant_recipe_ref, bit for bit: every type, every kernel family this CPU runs (AVX2,
// AVX-VNNI, AVX-512, AVX-512 VNNI), odd shapes (M = 1 .. 260, i.e. two row blocks; N not a multiple of
// 16; K with a short last chunk), with and without a pool, store / accumulate / epilogue /
// SwiGLU / mixed-type parts.
// And the recipe against the exact arithmetic of the stored weights (dequantize, float GEMM):
// within the activation quantization's bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/quant/qformat.h"
#include "kernels/quant/qgemm.h"
#include "kernels/quant/qgemm_internal.h"
#include "quant/block_formats.h"
#include "quant_weights.h"

namespace llmserve {
namespace {

using qgemm::QKernels;

/// The kernel families this CPU can run.
std::vector<const QKernels*> families() {
  std::vector<const QKernels*> f = {&qgemm::qkernels_avx2()};
  if (cpu_has_avx_vnni()) f.push_back(&qgemm::qkernels_avxvnni());
  if (cpu_isa() >= CpuIsa::kAvx512) f.push_back(&qgemm::qkernels_avx512());
  if (cpu_has_avx512_vnni()) f.push_back(&qgemm::qkernels_avx512vnni());
  return f;
}

struct KernelOverride {
  explicit KernelOverride(const QKernels* k) { qgemm::set_kernels_for_testing(k); }
  ~KernelOverride() { qgemm::set_kernels_for_testing(nullptr); }
};

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << what << " at " << i << ": " << got[i] << " vs " << want[i];
}

/// K values for a type: whole blocks; legacy types also get a short last 256-chunk, alone
/// (32), after one or two whole chunks (288, 544: a few-row call's run of chunks, then the
/// short one with its own layout).
std::vector<int64_t> k_values(DType t) {
  if (dtype_block_elems(t) == 256) return {256, 768};
  return {32, 288, 512, 544};
}

class QGemm : public ::testing::TestWithParam<DType> {};

TEST_P(QGemm, EveryKernelFamilyMatchesTheRecipeReferenceBitForBit) {
  const DType type = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 11;
  for (int64_t k : k_values(type))
    for (int64_t n : {1, 13, 16, 37}) {
      QuantWeight q = make_weight(type, n, k, seed++);
      for (int64_t m : {1, 2, 3, 4, 5, 6, 8, 9, 17, 260}) {
        const auto x = random_vec(static_cast<size_t>(m * k), seed++);
        std::vector<float> want(static_cast<size_t>(m * n));
        gemm_quant_recipe_ref(x.data(), m, q.w, want.data());
        WeightMatrix w = q.w;
        prepare_weight(w);
        ASSERT_TRUE(quant_gemm_ready(w));
        for (const QKernels* kr : families()) {
          KernelOverride use(kr);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            const std::string what = std::string(dtype_name(type)) + " " + kr->name + " M=" +
                                     std::to_string(m) + " N=" + std::to_string(n) +
                                     " K=" + std::to_string(k) + (p ? " pool" : "");
            std::vector<float> got(want.size(), NAN);
            gemm(x.data(), m, w, got.data(), p);
            expect_same_bits(got, want, what);
          }
        }
      }
    }
}

TEST_P(QGemm, RecipeIsWithinTheActivationQuantizationBoundOfTheExactArithmetic) {
  // |recipe - exact| <= sum_i |w_i| * (s_i / 2) (each activation code is off by at most half
  // its chunk's step s = amax / qmax) + float32 rounding.
  const DType type = GetParam();
  const int64_t k = 3 * 256, n = 21, m = 4;
  const QuantWeight q = make_weight(type, n, k, 3);
  const auto x = random_vec(static_cast<size_t>(m * k), 4);
  std::vector<float> got(static_cast<size_t>(m * n)), exact(static_cast<size_t>(m * n));
  gemm_quant_recipe_ref(x.data(), m, q.w, got.data());
  gemm(x.data(), m, q.f32, exact.data(), nullptr);
  const int qmax = qgemm::quant_traits(type).act_qmax;
  const auto mag = magnitudes(x, q.values, m, n, k);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double bound = 0;
      for (int64_t c = 0; c < k / 256; ++c) {
        double amax = 0, wsum = 0;
        for (int64_t e = 256 * c; e < 256 * c + 256; ++e) {
          amax = std::max(amax, std::fabs(double(x[i * k + e])));
          wsum += std::fabs(q.values[j * k + e]);
        }
        bound += wsum * amax / qmax / 2;
      }
      const double err = std::fabs(double(got[i * n + j]) - exact[i * n + j]);
      ASSERT_LE(err, bound * 1.001 + 2e-6 * mag[i * n + j] + 1e-6)
          << dtype_name(type) << " (" << i << ", " << j << ")";
      worst = std::max(worst, err / (mag[i * n + j] + 1e-30));
    }
  // And it is far inside llama.cpp's 8-bit activations' error (qmax 127): 12+ bits.
  EXPECT_LT(worst, 1.0 / 2000) << dtype_name(type);
}

TEST_P(QGemm, AccumulateEpilogueAndSwiGluOnEveryFamily) {
  const DType type = GetParam();
  const int64_t k = dtype_block_elems(type) == 256 ? 512 : 288, n = 40, m = 9;
  ThreadPool pool(2);
  QuantWeight q = make_weight(type, n, k, 21);
  QuantWeight gu = make_weight(type, 2 * 24, k, 22);
  const auto x = random_vec(static_cast<size_t>(m * k), 23);
  std::vector<float> want(static_cast<size_t>(m * n));
  gemm_quant_recipe_ref(x.data(), m, q.w, want.data());
  std::vector<float> gu_ref(static_cast<size_t>(m * 48)), h_want(static_cast<size_t>(m * 24));
  gemm_quant_recipe_ref(x.data(), m, gu.w, gu_ref.data());
  for (int64_t i = 0; i < m; ++i)
    silu_mul(gu_ref.data() + i * 48, gu_ref.data() + i * 48 + 24, h_want.data() + i * 24, 24);
  WeightMatrix w = q.w, wgu = gu.w;
  prepare_weight(w);
  prepare_weight(wgu, WeightUse::kSiluMul);
  const auto y0 = random_vec(want.size(), 24);
  for (const QKernels* kr : families()) {
    KernelOverride use(kr);
    const std::string what = std::string(dtype_name(type)) + " " + kr->name;
    std::vector<float> acc = y0;
    gemm(x.data(), m, w, acc.data(), &pool, GemmOutput::kAccumulate);
    for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(acc[i], y0[i] + want[i]) << what;
    for (int64_t align : {1, 32}) {
      RecordingEpilogue ep(align, n);
      std::vector<float> e(want.size());
      gemm(x.data(), m, w, e.data(), &pool, GemmOutput::kStore, &ep);
      EXPECT_EQ(ep.seen(), want.size()) << what;
      for (size_t i = 0; i < e.size(); ++i) ASSERT_EQ(e[i], 2 * want[i]) << what;
    }
    std::vector<float> h(h_want.size(), NAN);
    gemm_silu_mul(x.data(), m, wgu, h.data(), &pool);
    expect_same_bits(h, h_want, what + " SwiGLU");
  }
}

// gemm_grouped / gemm_silu_mul_grouped (an MoE layer's experts as one pool job): each problem's
// output bit for bit what its single call gives, with problems of 0, 1 and many rows, on every
// kernel family, with and without a pool; and the float fallback (a BF16 weight in the group).
TEST_P(QGemm, GroupedCallsGiveTheSingleCallsBits) {
  const DType type = GetParam();
  const int64_t k = dtype_block_elems(type) == 256 ? 512 : 288;
  ThreadPool pool(2);
  const int64_t rows[] = {1, 0, 7, 260, 2};
  std::vector<QuantWeight> ws, gus;
  std::vector<WeightMatrix> w, gu;
  for (int i = 0; i < 5; ++i) {
    ws.push_back(make_weight(type, 40 + 16 * i, k, 31 + i));
    gus.push_back(make_weight(type, 2 * (24 + 16 * i), k, 41 + i));
  }
  for (int i = 0; i < 5; ++i) {
    w.push_back(ws[i].w);
    gu.push_back(gus[i].w);
    prepare_weight(w.back());
    prepare_weight(gu.back(), WeightUse::kSiluMul);
  }
  std::vector<std::vector<float>> x;
  for (int i = 0; i < 5; ++i) x.push_back(random_vec(static_cast<size_t>(std::max<int64_t>(1, rows[i]) * k), 51 + i));
  for (const QKernels* kr : families()) {
    KernelOverride use(kr);
    for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)}) {
      const std::string what = std::string(dtype_name(type)) + " " + kr->name + (p ? " pool" : " no pool");
      std::vector<std::vector<float>> y(5), h(5), y1(5), h1(5);
      std::vector<GemmProblem> gp, sp;
      for (int i = 0; i < 5; ++i) {
        y[i].assign(static_cast<size_t>(rows[i] * w[i].rows), NAN);
        h[i].assign(static_cast<size_t>(rows[i] * gu[i].rows / 2), NAN);
        y1[i] = y[i];
        h1[i] = h[i];
        gp.push_back({x[i].data(), rows[i], &w[i], y[i].data()});
        sp.push_back({x[i].data(), rows[i], &gu[i], h[i].data()});
        gemm(x[i].data(), rows[i], w[i], y1[i].data(), p);
        gemm_silu_mul(x[i].data(), rows[i], gu[i], h1[i].data(), p);
      }
      gemm_grouped(gp, p);
      gemm_silu_mul_grouped(sp, p);
      for (int i = 0; i < 5; ++i) {
        expect_same_bits(y[i], y1[i], what + " gemm problem " + std::to_string(i));
        expect_same_bits(h[i], h1[i], what + " SwiGLU problem " + std::to_string(i));
      }
    }
  }
  // A float weight among them: every problem one after the other, the same bits.
  std::vector<float> wf(static_cast<size_t>(40 * k));
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>((i * 7919) % 997) / 997.0f - 0.5f;
  WeightMatrix f32{wf.data(), DType::kF32, 40, k};
  std::vector<float> a(static_cast<size_t>(rows[0] * w[0].rows)), b(static_cast<size_t>(rows[0] * 40)), a1 = a, b1 = b;
  std::vector<GemmProblem> mixed = {{x[0].data(), rows[0], &w[0], a.data()}, {x[0].data(), rows[0], &f32, b.data()}};
  gemm_grouped(mixed, &pool);
  gemm(x[0].data(), rows[0], w[0], a1.data(), &pool);
  gemm(x[0].data(), rows[0], f32, b1.data(), &pool);
  expect_same_bits(a, a1, "mixed quantized");
  expect_same_bits(b, b1, "mixed float");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QGemm, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_ggml_name(info.param)); });

// The byte kernels give the same bits as the 16-bit-lane ones, so the bit-for-bit family test
// would pass without them: check that the few-row calls of their types are routed to them.
TEST(QGemm, FewRowByteKernelsServeTheirTypes) {
  for (const QKernels* k : families()) {
    ASSERT_NE(k->split_type, nullptr) << k->name;
    ASSERT_NE(k->split, nullptr) << k->name;
    EXPECT_TRUE(k->split_type(DType::kQ6_K)) << k->name;
    EXPECT_TRUE(k->split_type(DType::kQ5_0)) << k->name;
    // Q4_K, Q5_K: the AVX2 vpmaddubsw kernel and the VNNI vpdpbusd one; plain AVX-512 keeps
    // the 16-bit lanes (its byte form would save nothing).
    EXPECT_EQ(k->split_type(DType::kQ4_K), std::string(k->name) != "avx512") << k->name;
    EXPECT_EQ(k->split_type(DType::kQ5_K), std::string(k->name) != "avx512") << k->name;
    EXPECT_FALSE(k->split_type(DType::kQ8_0)) << k->name;
    EXPECT_FALSE(k->split_type(DType::kQ5_1)) << k->name;
  }
}

// Which family gemm uses below AVX-512: AVX-VNNI's where the CPU has it, unless switched off
// (LLMSERVE_ISA=avx2 stands in for a Zen 2/3 without it); the switch cannot turn on what the
// CPU lacks.
TEST(QGemm, AvxVnniFamilyIsChosenOnlyWhereAllowedAndPresent) {
  const CpuIsa native = cpu_isa();
  const bool vnni = cpu_has_avx_vnni();
  set_cpu_isa_for_testing(CpuIsa::kAvx2);
  set_avx_vnni_for_testing(false);
  EXPECT_FALSE(cpu_has_avx_vnni());
  EXPECT_STREQ(quant_gemm_isa(), "avx2");
  set_avx_vnni_for_testing(true);
  __builtin_cpu_init();
  const bool hw = __builtin_cpu_supports("avxvnni") != 0;
  EXPECT_EQ(cpu_has_avx_vnni(), hw);
  EXPECT_STREQ(quant_gemm_isa(), hw ? "avxvnni" : "avx2");
  set_cpu_isa_for_testing(native);
  set_avx_vnni_for_testing(vnni);
  if (native >= CpuIsa::kAvx512) EXPECT_STRNE(quant_gemm_isa(), "avxvnni");
}

TEST(QGemm, MixedTypePartsEachInTheirOwnRecipe) {
  // Q4_K q/k beside a Q6_K v (llama-quantize's Q4_K_M), and a Q8_0 part; gate Q4_K / up Q6_K.
  const int64_t k = 512, m = 5;
  const QuantWeight a = make_weight(DType::kQ4_K, 32, k, 1), b = make_weight(DType::kQ6_K, 16, k, 2);
  const QuantWeight c = make_weight(DType::kQ8_0, 16, k, 3);
  const WeightMatrix parts[] = {a.w, b.w, c.w};
  auto w = concat_rows(parts);
  ASSERT_TRUE(w.ok());
  prepare_weight(*w);
  ASSERT_TRUE(quant_gemm_ready(*w));
  const auto x = random_vec(static_cast<size_t>(m * k), 4);
  const int64_t n = 64;
  std::vector<float> want(static_cast<size_t>(m * n));
  int64_t col = 0;
  for (const WeightMatrix& p : parts) {
    std::vector<float> y(static_cast<size_t>(m * p.rows));
    gemm_quant_recipe_ref(x.data(), m, p, y.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < p.rows; ++j) want[i * n + col + j] = y[i * p.rows + j];
    col += p.rows;
  }
  const QuantWeight g = make_weight(DType::kQ4_K, 20, k, 5), u = make_weight(DType::kQ6_K, 20, k, 6);
  const WeightMatrix gu_parts[] = {g.w, u.w};
  auto gu = concat_rows(gu_parts);
  ASSERT_TRUE(gu.ok());
  prepare_weight(*gu, WeightUse::kSiluMul);
  std::vector<float> yg(static_cast<size_t>(m * 20)), yu(yg.size()), h_want(yg.size());
  gemm_quant_recipe_ref(x.data(), m, g.w, yg.data());
  gemm_quant_recipe_ref(x.data(), m, u.w, yu.data());
  silu_mul(yg.data(), yu.data(), h_want.data(), m * 20);
  ThreadPool pool(2);
  for (const QKernels* kr : families()) {
    KernelOverride use(kr);
    std::vector<float> got(want.size());
    gemm(x.data(), m, *w, got.data(), &pool);
    expect_same_bits(got, want, std::string("parts ") + kr->name);
    std::vector<float> h(h_want.size());
    gemm_silu_mul(x.data(), m, *gu, h.data(), &pool);
    expect_same_bits(h, h_want, std::string("SwiGLU parts ") + kr->name);
  }
}

TEST(QGemm, SimdActivationQuantizersMatchTheScalarDefinition) {
  const int64_t m = 3, k = 288;
  auto x = random_vec(static_cast<size_t>(m * k), 8);
  for (int64_t i = 0; i < 256; ++i) x[k + i] = 0.0f;   // a zero chunk
  x[2 * k + 5] = 1e-40f;                               // a denormal
  x[2 * k + 260] = NAN;                                // a NaN in the short last chunk
  for (int qmax : {2047, 8191, 32767}) {
    std::vector<int16_t> q0(m * k), q1(m * k);
    std::vector<float> s0(m * 2), s1(m * 2);
    std::vector<int32_t> b0(m * k / 16), b1(m * k / 16);
    const qgemm::QActs ref{m, k, 2, qmax, q0.data(), s0.data(), b0.data()};
    qgemm::quantize_acts_ref(x.data(), 0, m, ref);
    EXPECT_EQ(s0[2], 0.0f);
    EXPECT_TRUE(std::isnan(s0[5]));
    for (const QKernels* kr : families()) {
      const qgemm::QActs a{m, k, 2, qmax, q1.data(), s1.data(), b1.data()};
      kr->quantize(x.data(), 0, m, a);
      EXPECT_EQ(q0, q1) << kr->name << " qmax " << qmax;
      EXPECT_EQ(b0, b1) << kr->name;
      for (size_t i = 0; i < s0.size(); ++i)
        EXPECT_EQ(std::bit_cast<uint32_t>(s0[i]), std::bit_cast<uint32_t>(s1[i])) << kr->name;
    }
  }
}

TEST(QGemm, ExtremeCodesScalesAndActivationsStayExact) {
  // The integer paths at their bounds (the AVX2 byte kernels' int16 sums, qgemm_avx2_bytes.h,
  // and every int32 accumulator): every code at its largest, sub-scales at their extremes,
  // every activation code at +-act_qmax (x = +-1 gives a = +-qmax), mixed signs per row.
  const int64_t n = 37, k = 768;
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ5_K, DType::kQ5_0, DType::kQ4_0,
                     DType::kQ8_0}) {
    const int64_t bb = dtype_block_bytes(type), blocks = k / dtype_block_elems(type);
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * blocks * bb), 0xFF);
    const uint16_t d = f32_to_f16(0.01f);
    for (int64_t b = 0; b < n * blocks; ++b) {
      uint8_t* blk = bytes->data() + b * bb;
      if (type == DType::kQ6_K) {
        auto* q6 = reinterpret_cast<quant::BlockQ6_K*>(blk);
        for (int s = 0; s < 16; ++s) q6->scales[s] = (b + s) % 3 == 0 ? 127 : -128;
        q6->d = d;
      } else if (type == DType::kQ8_0) {
        std::memcpy(blk, &d, 2);
        for (int i = 2; i < bb; ++i) blk[i] = (b + i) % 2 == 0 ? 0x80 : 0x7F;  // -128 / 127
      } else {
        std::memcpy(blk, &d, 2);  // d (and the K-quants' dmin): scales, mins and codes at 0xFF
        if (type == DType::kQ4_K || type == DType::kQ5_K) std::memcpy(blk + 2, &d, 2);
      }
    }
    WeightMatrix w;
    w.data = bytes->data();
    w.dtype = type;
    w.rows = n;
    w.cols = k;
    w.storage = bytes;
    for (int64_t m : {1, 2, 3, 4, 6, 7}) {
      std::vector<float> x(static_cast<size_t>(m * k));
      for (int64_t i = 0; i < m * k; ++i) x[i] = (i * 7 + i / 5) % 3 == 0 ? -1.0f : 1.0f;
      if (m > 1) std::fill(x.begin() + k, x.begin() + 2 * k, -1.0f);  // a row all at -qmax
      std::vector<float> want(static_cast<size_t>(m * n));
      gemm_quant_recipe_ref(x.data(), m, w, want.data());
      WeightMatrix pw = w;
      prepare_weight(pw);
      for (const QKernels* kr : families()) {
        KernelOverride use(kr);
        std::vector<float> got(want.size(), NAN);
        gemm(x.data(), m, pw, got.data(), nullptr);
        expect_same_bits(got, want, std::string(dtype_name(type)) + " " + kr->name + " M=" +
                                        std::to_string(m));
      }
    }
  }
}

TEST(QGemm, RepackedSizeStaysCloseToTheFile) {
  // The tiles keep each type's bit width: at most 12 % over the file's bytes (Q2_K's separate
  // scale and min bytes), and a few percent for the common types.
  for (DType t : kTypes) {
    const int64_t n = 64, k = 1024;
    const QuantWeight q = make_weight(t, n, k, 1);
    WeightMatrix w = q.w;
    prepare_weight(w);
    ASSERT_TRUE(quant_gemm_ready(w));
    const auto p = qgemm::repack(t, q.w.data, n, k);
    const double ratio = double(p->tiles * p->tile_bytes) / double(n * dtype_row_bytes(t, k));
    EXPECT_LE(ratio, t == DType::kQ2_K ? 1.2 : 1.12) << dtype_name(t);
    if (t == DType::kQ4_K || t == DType::kQ6_K || t == DType::kQ8_0 || t == DType::kQ4_0) {
      EXPECT_LE(ratio, 1.04) << dtype_name(t);
    }
  }
}

}  // namespace
}  // namespace llmserve
