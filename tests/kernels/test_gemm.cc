// GEMM (kernels/gemm.h) against a float64 reference computed here, for every weight dtype,
// both kernel families (AVX-512 when the CPU has it, and the forced AVX2 fallback), with and
// without a thread pool, at odd shapes that exercise every tile tail.
//
// Tolerance: the reference uses the same (rounded) weights in float64, so the only error is
// float32 accumulation: |err| <= 1e-5 * sum_k |x_k * w_k| + 1e-6 (blocked fp32 sums of ~1000
// terms stay far below this; a wrong element is off by O(sum |x w|)).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/gemm.h"

namespace llmserve {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// A weight matrix stored in `dtype` plus the float values it actually holds.
struct TestWeight {
  std::vector<float> f32;        // storage when dtype is f32
  std::vector<uint16_t> half;    // storage when dtype is f16 / bf16
  std::vector<float> used;       // the values the kernels see, as float
  WeightMatrix w;
};

TestWeight make_weight(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  TestWeight t;
  t.f32 = random_vec(static_cast<size_t>(n * k), seed);
  t.used = t.f32;
  if (dtype != DType::kF32) {
    t.half.resize(t.f32.size());
    for (size_t i = 0; i < t.f32.size(); ++i) {
      t.half[i] = dtype == DType::kF16 ? f32_to_f16(t.f32[i]) : f32_to_bf16(t.f32[i]);
      t.used[i] = dtype == DType::kF16 ? f16_to_f32(t.half[i]) : bf16_to_f32(t.half[i]);
    }
  }
  t.w.data = dtype == DType::kF32 ? static_cast<const void*>(t.f32.data())
                                  : static_cast<const void*>(t.half.data());
  t.w.dtype = dtype;
  t.w.rows = n;
  t.w.cols = k;
  return t;
}

/// ref[i, j] = sum_k x[i, k] w[j, k] in float64; mag[i, j] = sum_k |x w| (for the bound).
void reference(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
               int64_t k, std::vector<double>& ref, std::vector<double>& mag) {
  ref.assign(static_cast<size_t>(m * n), 0.0);
  mag.assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, a = 0;
      const float* xi = x.data() + i * k;
      const float* wj = w.data() + j * k;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double p = static_cast<double>(xi[kk]) * wj[kk];
        s += p;
        a += std::fabs(p);
      }
      ref[i * n + j] = s;
      mag[i * n + j] = a;
    }
  }
}

double tol(double mag) { return 1e-5 * mag + 1e-6; }

struct Config {
  CpuIsa isa;
  int threads;  // 0 = no pool
};

class Gemm : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    set_cpu_isa_for_testing(GetParam().isa);
    if (GetParam().threads > 0) pool_ = std::make_unique<ThreadPool>(GetParam().threads);
  }
  void TearDown() override { set_cpu_isa_for_testing(CpuIsa::kAvx512Bf16); }
  ThreadPool* pool() { return pool_.get(); }
  std::unique_ptr<ThreadPool> pool_;
};

struct Shape {
  int64_t m, n, k;
};

std::vector<Shape> shapes() {
  const int64_t ms[] = {1, 2, 3, 7, 8, 13, 17, 32, 100, 512};
  const int64_t ns[] = {1, 17, 33, 250, 64};
  const int64_t ks[] = {1, 15, 48, 100, 1027, 0};
  std::vector<Shape> out;
  int idx = 0;
  for (int64_t m : ms) {
    for (int rep = 0; rep < 3; ++rep, ++idx) {
      int64_t n = ns[(idx * 7 + rep) % 5], k = ks[(idx * 5 + rep * 2) % 6];
      if (m * n * k > 20'000'000) k = 100;  // keep the float64 reference quick
      out.push_back({m, n, k});
    }
  }
  out.push_back({512, 250, 1027});
  out.push_back({100, 33, 1027});
  out.push_back({16, 250, 1027});
  out.push_back({4, 1000, 300});
  return out;
}

TEST(GemmIsa, NamesFollowDispatch) {
  set_cpu_isa_for_testing(CpuIsa::kAvx2);
  EXPECT_EQ(std::string(gemm_isa()), "avx2");
  set_cpu_isa_for_testing(CpuIsa::kAvx512Bf16);
  if (cpu_isa() >= CpuIsa::kAvx512) {
    EXPECT_EQ(std::string(gemm_isa()), "avx512");
  }
}

TEST_P(Gemm, MatchesFloat64ReferenceStoreAndAccumulate) {
  int case_idx = 0;
  for (const Shape& s : shapes()) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      ++case_idx;
      const auto x = random_vec(static_cast<size_t>(s.m * s.k), 10 + case_idx);
      const TestWeight tw = make_weight(dtype, s.n, s.k, 100 + case_idx);
      std::vector<double> ref, mag;
      reference(x, tw.used, s.m, s.n, s.k, ref, mag);
      WeightMatrix prepared = tw.w;
      prepare_weight(prepared);
      for (const bool use_prepared : {false, true}) {
      const bool accumulate = (case_idx + use_prepared) % 2 == 0;
      const auto y0 = random_vec(static_cast<size_t>(s.m * s.n), 1000 + case_idx);
      std::vector<float> y = accumulate ? y0 : std::vector<float>(y0.size(), 1e30f);
      gemm(x.data(), s.m, use_prepared ? prepared : tw.w, y.data(), pool(),
           accumulate ? GemmOutput::kAccumulate : GemmOutput::kStore);
      int bad = 0;
      for (int64_t i = 0; i < s.m * s.n && bad < 5; ++i) {
        const double want = ref[i] + (accumulate ? y0[i] : 0.0);
        if (!(std::fabs(y[i] - want) <= tol(mag[i] + (accumulate ? std::fabs(y0[i]) : 0.0)))) {
          ++bad;
          ADD_FAILURE() << "m=" << s.m << " n=" << s.n << " k=" << s.k << " dtype="
                        << dtype_name(dtype) << (accumulate ? " accumulate" : " store")
                        << (use_prepared ? " prepared" : "") << " at (" << i / s.n << ", "
                        << i % s.n << "): got " << y[i] << " want " << want;
        }
      }
      }
    }
  }
}

/// Rewrites y = 2 y + 1 on every tile it is handed and counts visits per element.
class CountingEpilogue : public GemmEpilogue {
 public:
  CountingEpilogue(int64_t m, int64_t n, int64_t align)
      : n_(n), align_(align), visits_(static_cast<size_t>(m * n)) {}
  int64_t column_alignment() const override { return align_; }
  void apply(int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* y,
             int64_t ldy) const override {
    if (n0 % align_ != 0 || (n1 % align_ != 0 && n1 != n_) || n0 >= n1 || m0 >= m1 ||
        ldy != n_) {
      misaligned_.fetch_add(1);
    }
    for (int64_t i = m0; i < m1; ++i) {
      for (int64_t j = n0; j < n1; ++j) {
        y[i * ldy + j] = 2.0f * y[i * ldy + j] + 1.0f;
        visits_[i * n_ + j].fetch_add(1);
      }
    }
  }
  int64_t n_, align_;
  mutable std::vector<std::atomic<int>> visits_;
  mutable std::atomic<int> misaligned_{0};
};

TEST_P(Gemm, EpilogueSeesEveryFinalElementOnceAligned) {
  const struct {
    int64_t m, n, k, align;
  } cases[] = {{1, 250, 64, 1},   {3, 256, 100, 64},  {8, 384, 48, 128}, {13, 250, 33, 48},
               {32, 250, 100, 64}, {100, 200, 64, 16}, {512, 96, 40, 48}, {64, 17, 20, 64},
               {40, 1000, 30, 1},   {200, 64, 300, 64}};
  int idx = 0;
  for (const auto& c : cases) {
    for (bool accumulate : {false, true}) {
      ++idx;
      const auto x = random_vec(static_cast<size_t>(c.m * c.k), 7 + idx);
      TestWeight tw = make_weight(DType::kBF16, c.n, c.k, 70 + idx);
      if (idx % 4 >= 2) prepare_weight(tw.w);  // both layouts, both modes
      std::vector<double> ref, mag;
      reference(x, tw.used, c.m, c.n, c.k, ref, mag);
      const auto y0 = random_vec(static_cast<size_t>(c.m * c.n), 700 + idx);
      std::vector<float> y = y0;
      CountingEpilogue epi(c.m, c.n, c.align);
      gemm(x.data(), c.m, tw.w, y.data(), pool(),
           accumulate ? GemmOutput::kAccumulate : GemmOutput::kStore, &epi);
      EXPECT_EQ(epi.misaligned_.load(), 0) << "m=" << c.m << " n=" << c.n;
      int bad = 0;
      for (int64_t i = 0; i < c.m * c.n && bad < 5; ++i) {
        const double base = ref[i] + (accumulate ? y0[i] : 0.0);
        const double want = 2.0 * base + 1.0;
        if (epi.visits_[i].load() != 1 ||
            !(std::fabs(y[i] - want) <= 2.0 * tol(mag[i] + std::fabs(y0[i])) + 1e-6)) {
          ++bad;
          ADD_FAILURE() << "m=" << c.m << " n=" << c.n << " align=" << c.align
                        << (tw.w.packed ? " prepared" : "") << " at ("
                        << i / c.n << ", " << i % c.n << "): visits " << epi.visits_[i].load()
                        << " got " << y[i] << " want " << want;
        }
      }
    }
  }
}

TEST_P(Gemm, SiluMulMatchesSeparateComputation) {
  // F = 64, 96, 256 are panel multiples (prepared weights pair gate/up panels); the others
  // fall back to the row-major layout.
  const Shape cases[] = {{1, 17, 100},  {2, 250, 64},  {5, 64, 1027}, {8, 33, 48},
                         {16, 100, 15}, {32, 256, 100}, {100, 70, 64}, {512, 40, 100},
                         {3, 96, 300},  {40, 64, 33},  {1, 256, 64}};
  int idx = 0;
  for (const Shape& s : cases) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      ++idx;
      const int64_t f = s.n;
      const auto x = random_vec(static_cast<size_t>(s.m * s.k), 3 + idx);
      // Scale so gate values reach the saturating parts of silu.
      TestWeight tw = make_weight(dtype, 2 * f, s.k, 30 + idx);
      if (idx % 2 == 0 || f % 32 == 0) prepare_weight(tw.w);
      std::vector<double> ref, mag;
      reference(x, tw.used, s.m, 2 * f, s.k, ref, mag);
      std::vector<float> out(static_cast<size_t>(s.m * f), 1e30f);
      gemm_silu_mul(x.data(), s.m, tw.w, out.data(), pool());
      int bad = 0;
      for (int64_t i = 0; i < s.m && bad < 5; ++i) {
        for (int64_t j = 0; j < f && bad < 5; ++j) {
          const double g = ref[i * 2 * f + j], u = ref[i * 2 * f + f + j];
          const double silu = g / (1.0 + std::exp(-g));
          const double want = silu * u;
          const double bound = 1.1 * std::fabs(u) * tol(mag[i * 2 * f + j]) +
                               1.1 * std::fabs(g) * tol(mag[i * 2 * f + f + j]) +
                               1e-5 * std::fabs(want) + 1e-6;
          if (!(std::fabs(out[i * f + j] - want) <= bound)) {
            ++bad;
            ADD_FAILURE() << "m=" << s.m << " f=" << f << " k=" << s.k << " dtype="
                          << dtype_name(dtype) << (tw.w.packed ? " prepared" : "") << " at (" << i << ", " << j << "): got "
                          << out[i * f + j] << " want " << want;
          }
        }
      }
    }
  }
}

TEST_P(Gemm, PreparedWeightGivesSameResults) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const Shape s : {Shape{1, 250, 1027}, Shape{8, 100, 64}, Shape{100, 250, 300}}) {
      const auto x = random_vec(static_cast<size_t>(s.m * s.k), 5);
      TestWeight tw = make_weight(dtype, s.n, s.k, 6);
      std::vector<float> y1(static_cast<size_t>(s.m * s.n)), y2(y1.size());
      gemm(x.data(), s.m, tw.w, y1.data(), pool());
      WeightMatrix prepared = tw.w;
      prepare_weight(prepared);
      EXPECT_EQ(prepared.dtype, dtype);
      EXPECT_EQ(prepared.rows, s.n);
      EXPECT_EQ(prepared.cols, s.k);
      gemm(x.data(), s.m, prepared, y2.data(), pool());
      std::vector<double> ref, mag;
      reference(x, tw.used, s.m, s.n, s.k, ref, mag);
      for (size_t i = 0; i < y1.size(); ++i) {
        ASSERT_LE(std::fabs(y2[i] - ref[i]), tol(mag[i])) << dtype_name(dtype) << " " << i;
      }
    }
  }
}

// Batch invariance (docs/batch_invariance.md): row i of an M-row call has exactly the bits
// of the 1-row call on x[i], for every M (small-M direct panels, large-M converted panels,
// the dot path of row-major W), every weight dtype, prepared or not, store / accumulate and
// the fused SwiGLU. K = 300 spans two K blocks; N = 100 and F = 64 leave column tails.
TEST_P(Gemm, RowsAreBitwiseIndependentOfM) {
  constexpr int64_t kMaxM = 200, kK = 300, kN = 100, kF = 64;
  const auto x = random_vec(static_cast<size_t>(kMaxM * kK), 11);
  const auto y0 = random_vec(static_cast<size_t>(kMaxM * kN), 12);  // accumulate target
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= 16; ++m) ms.push_back(m);
  for (int64_t m : {17, 29, 33, 100, 128, 129}) ms.push_back(m);
  ms.push_back(kMaxM);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (bool prepared : {false, true}) {
      TestWeight tw = make_weight(dtype, kN, kK, 13);
      TestWeight tg = make_weight(dtype, 2 * kF, kK, 14);
      WeightMatrix w = tw.w, gu = tg.w;
      if (prepared) {
        prepare_weight(w);
        prepare_weight(gu, WeightUse::kSiluMul);
      }
      // One-row references.
      std::vector<float> one(static_cast<size_t>(kMaxM * kN)), one_acc(y0);
      std::vector<float> one_silu(static_cast<size_t>(kMaxM * kF));
      for (int64_t i = 0; i < kMaxM; ++i) {
        gemm(&x[i * kK], 1, w, &one[i * kN], pool());
        gemm(&x[i * kK], 1, w, &one_acc[i * kN], pool(), GemmOutput::kAccumulate);
        gemm_silu_mul(&x[i * kK], 1, gu, &one_silu[i * kF], pool());
      }
      for (int64_t m : ms) {
        std::vector<float> y(static_cast<size_t>(m * kN)), acc(y0.begin(), y0.begin() + m * kN);
        std::vector<float> silu(static_cast<size_t>(m * kF));
        gemm(x.data(), m, w, y.data(), pool());
        gemm(x.data(), m, w, acc.data(), pool(), GemmOutput::kAccumulate);
        gemm_silu_mul(x.data(), m, gu, silu.data(), pool());
        const std::string what = std::string(dtype_name(dtype)) +
                                 (prepared ? " prepared" : " row-major") + " M=" +
                                 std::to_string(m);
        for (int64_t e = 0; e < m * kN; ++e) {
          ASSERT_EQ(y[e], one[e]) << what << " row " << e / kN << " col " << e % kN;
          ASSERT_EQ(acc[e], one_acc[e]) << what << " (accumulate) row " << e / kN;
        }
        for (int64_t e = 0; e < m * kF; ++e) {
          ASSERT_EQ(silu[e], one_silu[e]) << what << " (silu_mul) row " << e / kF;
        }
      }
    }
  }
}

TEST(PrepareWeight, ReleasesTheInMemoryCopyOnlyWhenPanelsServeEveryPath) {
  ThreadPool pool2(2);
  for (const int64_t f : {64, 33}) {  // 64: panel multiple; 33: gemm_silu_mul needs rows
    TestWeight gate = make_weight(DType::kBF16, f, 100, 11), up = make_weight(DType::kBF16, f, 100, 12);
    const WeightMatrix parts[] = {gate.w, up.w};
    auto stacked = concat_rows(parts);
    ASSERT_TRUE(stacked.ok());
    WeightMatrix for_gemm = *stacked, for_silu = *stacked;
    prepare_weight(for_gemm, WeightUse::kGemm);
    prepare_weight(for_silu, WeightUse::kSiluMul);
    EXPECT_EQ(for_gemm.data, nullptr);  // gemm() reads only the panels
    EXPECT_EQ(for_silu.data == nullptr, f % 32 == 0) << "f=" << f;
    // Both still compute the right thing after the release.
    const auto x = random_vec(3 * 100, 13);
    std::vector<float> want(3 * 2 * f), got(3 * 2 * f), silu_want(3 * f), silu_got(3 * f);
    gemm(x.data(), 3, *stacked, want.data(), &pool2);
    gemm(x.data(), 3, for_gemm, got.data(), &pool2);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4);
    gemm_silu_mul(x.data(), 3, *stacked, silu_want.data(), &pool2);
    gemm_silu_mul(x.data(), 3, for_silu, silu_got.data(), &pool2);
    for (size_t i = 0; i < silu_want.size(); ++i) ASSERT_NEAR(silu_got[i], silu_want[i], 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Isa, Gemm,
    ::testing::Values(Config{CpuIsa::kAvx512Bf16, 0}, Config{CpuIsa::kAvx512Bf16, 2},
                      Config{CpuIsa::kAvx2, 0}, Config{CpuIsa::kAvx2, 2}),
    [](const ::testing::TestParamInfo<Config>& info) {
      return std::string(info.param.isa == CpuIsa::kAvx2 ? "avx2" : "best") +
             (info.param.threads > 0 ? "_pool2" : "_nopool");
    });

TEST(ConcatRows, SameDtypeStacksRows) {
  TestWeight a = make_weight(DType::kBF16, 3, 5, 1), b = make_weight(DType::kBF16, 2, 5, 2);
  const WeightMatrix parts[] = {a.w, b.w};
  auto r = concat_rows(parts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dtype, DType::kBF16);
  EXPECT_EQ(r->rows, 5);
  EXPECT_EQ(r->cols, 5);
  EXPECT_NE(r->storage, nullptr);
  const auto* d = static_cast<const uint16_t*>(r->data);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(d[i], a.half[i]);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(d[15 + i], b.half[i]);
  // Copies share the storage and stay valid after the parts go away.
  WeightMatrix copy = *r;
  a = TestWeight{};
  EXPECT_EQ(static_cast<const uint16_t*>(copy.data)[20], b.half[5]);
}

TEST(ConcatRows, MixedDtypesBecomeFloat32) {
  TestWeight a = make_weight(DType::kBF16, 2, 4, 1), b = make_weight(DType::kF32, 1, 4, 2),
             c = make_weight(DType::kF16, 2, 4, 3);
  const WeightMatrix parts[] = {a.w, b.w, c.w};
  auto r = concat_rows(parts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dtype, DType::kF32);
  EXPECT_EQ(r->rows, 5);
  const auto* d = static_cast<const float*>(r->data);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d[i], a.used[i]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d[8 + i], b.used[i]);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d[12 + i], c.used[i]);
}

TEST(ConcatRows, Errors) {
  TestWeight a = make_weight(DType::kF32, 2, 4, 1), b = make_weight(DType::kF32, 2, 5, 2);
  const WeightMatrix parts[] = {a.w, b.w};
  EXPECT_FALSE(concat_rows(parts).ok());
  EXPECT_FALSE(concat_rows(std::span<const WeightMatrix>()).ok());
}

}  // namespace
}  // namespace llmserve
