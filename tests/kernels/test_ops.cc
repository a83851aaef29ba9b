// Kernels against float64 textbook formulas at odd sizes, for every weight dtype.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/ops.h"

namespace llmserve {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct MatmulCase {
  DType dtype;
  int64_t m, n, k;
};

class Matmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(Matmul, MatchesFloat64Reference) {
  const auto [dtype, m, n, k] = GetParam();
  const auto x = random_vec(m * k, 1);
  const auto wf = random_vec(n * k, 2);
  // Store W in the dtype under test; the reference uses the same rounded values.
  std::vector<uint16_t> w16(n * k);
  std::vector<float> w_used(n * k);
  const void* wdata = wf.data();
  for (int64_t i = 0; i < n * k; ++i) {
    if (dtype == DType::kF16) w16[i] = f32_to_f16(wf[i]), w_used[i] = f16_to_f32(w16[i]);
    else if (dtype == DType::kBF16) w16[i] = f32_to_bf16(wf[i]), w_used[i] = bf16_to_f32(w16[i]);
    else w_used[i] = wf[i];
  }
  if (dtype != DType::kF32) wdata = w16.data();
  ThreadPool pool(2);
  std::vector<float> y(m * n);
  gemm(x.data(), m, WeightMatrix{wdata, dtype, n, k}, y.data(), &pool);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t l = 0; l < k; ++l) ref += double(x[i * k + l]) * w_used[j * k + l];
      ASSERT_NEAR(y[i * n + j], ref, 1e-4 * std::sqrt(double(k)) + 1e-5) << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Matmul,
                         ::testing::Values(MatmulCase{DType::kF32, 1, 7, 3},
                                           MatmulCase{DType::kF32, 5, 300, 67},
                                           MatmulCase{DType::kF16, 3, 129, 100},
                                           MatmulCase{DType::kBF16, 4, 257, 45},
                                           MatmulCase{DType::kBF16, 1, 1024, 256}));

TEST(Ops, RmsNormMatchesFormula) {
  const int64_t n = 37;
  const auto x = random_vec(n, 3), w = random_vec(n, 4);
  std::vector<float> out(n);
  rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], w[i] * x[i] * scale, 1e-5);
}

TEST(Ops, FusedAddRmsNormAddsThenNormalises) {
  const int64_t n = 43;  // not a multiple of the vector width
  auto x = random_vec(n, 6);
  const auto x0 = x, delta = random_vec(n, 7), w = random_vec(n, 8);
  std::vector<float> out(n);
  fused_add_rmsnorm(x.data(), delta.data(), w.data(), out.data(), n, 1e-6f);
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = double(x0[i]) + delta[i];
    EXPECT_NEAR(x[i], v, 1e-6);
    ss += v * v;
  }
  const double scale = 1.0 / std::sqrt(ss / n + 1e-6);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(out[i], w[i] * (double(x0[i]) + delta[i]) * scale, 1e-5);
}

TEST(Ops, RopeRotatesPairsByPositionTimesFrequency) {
  const int32_t heads = 2, hd = 8, pos = 5;
  std::vector<float> inv(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / hd);
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kRotateHalf}) {
    const auto x = random_vec(heads * hd, 5);
    auto y = x;
    rope(y.data(), heads, hd, pos, inv.data(), style);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const int a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
        const int b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + hd / 2;
        const double ang = pos * std::pow(10000.0, -2.0 * i / hd);
        const double x0 = x[h * hd + a], x1 = x[h * hd + b];
        EXPECT_NEAR(y[h * hd + a], x0 * std::cos(ang) - x1 * std::sin(ang), 1e-5);
        EXPECT_NEAR(y[h * hd + b], x0 * std::sin(ang) + x1 * std::cos(ang), 1e-5);
      }
  }
}

TEST(Ops, SiluMul) {
  const float g[3] = {-2.0f, 0.0f, 3.0f}, u[3] = {1.5f, 2.0f, -1.0f};
  float out[3];
  silu_mul(g, u, out, 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);
}

// Double-precision twin of gelu_tanh (transformers' gelu_pytorch_tanh):
// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written with the identity
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): the literal form cancels to 0 in double already
// from x ~ -5 on (1 + tanh(u) < 1e-16), where the true value is still ~1e-9.
double gelu_tanh_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}
double gelu_tanh_literal(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// The float32 ulp at w's magnitude (subnormal spacing below 2^-126).
double ulp_at(double w) {
  const int e = w == 0 ? -126 : std::max(std::ilogb(w), -126);
  return std::ldexp(1.0, e - 23);
}

TEST(Ops, GeluTanhTwinIsTheLiteralFormula) {
  // Where the literal formula does not cancel (x >= -3) the two twins agree to double rounding.
  for (double x = -3.0; x <= 20.0; x += 1.0 / 128) {
    const double a = gelu_tanh_ref(x), b = gelu_tanh_literal(x);
    ASSERT_LE(std::fabs(a - b), 1e-13 * std::fabs(b) + 1e-300) << x;
  }
  // Spot values: gelu_tanh(1) = 0.841192, gelu_tanh(-1) = -0.158808 (PyTorch's).
  EXPECT_NEAR(gelu_tanh_ref(1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(gelu_tanh_ref(-1.0), -0.15880800939172324, 1e-15);
}

// gelu_tanh_mul against the float64 twin, both kernel families: a dense grid over [-20, 20],
// random values, tiny and huge magnitudes (|x| up to 1e4 and FLT_MAX), up = 1 (the activation
// alone) and random up; odd lengths (vector tails); out aliasing gate and up.
TEST(Ops, GeluTanhMulMatchesFloat64) {
  std::vector<float> g;
  for (int i = -20 * 256; i <= 20 * 256; ++i) g.push_back(static_cast<float>(i) / 256.0f);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-20.0f, 20.0f);
  for (int i = 0; i < 20000; ++i) g.push_back(uni(rng));
  for (float m = 1e-38f; m < 1e4f; m *= 1.37f) {
    g.push_back(m);
    g.push_back(-m);
  }
  for (float x : {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f, 1e4f, -1e4f, 9999.5f, -9999.5f,
                  1e30f, -1e30f, FLT_MAX, -FLT_MAX, -10.0f, -10.1f, -12.0f, -13.7f, -20.0f})
    g.push_back(x);
  g.push_back(0.5f);  // odd length: both vector tails are exercised
  const size_t n = g.size();
  std::vector<float> ones(n, 1.0f), up(n);
  std::uniform_real_distribution<float> uu(-2.0f, 2.0f);
  for (auto& x : up) x = uu(rng);
  const CpuIsa native = cpu_isa();
  for (CpuIsa isa : {native, CpuIsa::kAvx2}) {
    set_cpu_isa_for_testing(isa);
    double worst_act = 0, worst_mul = 0;
    for (int pass = 0; pass < 2; ++pass) {
      const std::vector<float>& u = pass == 0 ? ones : up;
      std::vector<float> out(n, NAN);
      gelu_tanh_mul(g.data(), u.data(), out.data(), static_cast<int64_t>(n));
      double& worst = pass == 0 ? worst_act : worst_mul;
      for (size_t i = 0; i < n; ++i) {
        const double want = gelu_tanh_ref(g[i]) * u[i];
        ASSERT_FALSE(std::isnan(out[i])) << g[i];
        if (std::fabs(want) > FLT_MAX) continue;  // FLT_MAX * up > 1: inf is right
        ASSERT_FALSE(std::isinf(out[i])) << g[i];
        const double err = std::fabs(out[i] - want) / ulp_at(want);
        worst = std::max(worst, err);
        // 4 ulp for the activation, one more rounding for the product with up.
        ASSERT_LE(err, pass == 0 ? 4.0 : 5.0)
            << "x=" << g[i] << " up=" << u[i] << " got " << out[i] << " want " << want
            << (isa == CpuIsa::kAvx2 ? " avx2" : "");
      }
      // Aliasing: out = gate and out = up give the same bits.
      std::vector<float> ag = g, au = u;
      gelu_tanh_mul(ag.data(), u.data(), ag.data(), static_cast<int64_t>(n));
      gelu_tanh_mul(g.data(), au.data(), au.data(), static_cast<int64_t>(n));
      ASSERT_EQ(std::memcmp(ag.data(), out.data(), n * 4), 0);
      ASSERT_EQ(std::memcmp(au.data(), out.data(), n * 4), 0);
      // Every length up to two vectors: tails leave the elements past n alone.
      for (int64_t len = 0; len <= 33; ++len) {
        std::vector<float> o(len + 1, -7.0f);
        gelu_tanh_mul(g.data() + 100, u.data() + 100, o.data(), len);
        for (int64_t i = 0; i < len; ++i) ASSERT_EQ(o[i], out[100 + i]) << len;
        ASSERT_EQ(o[len], -7.0f) << len;
      }
    }
    if (std::getenv("OPS_TEST_VERBOSE"))
      std::printf("gelu_tanh_mul %s: max %.2f ulp (up = 1), %.2f ulp (random up)\n",
                  cpu_isa_name(cpu_isa()), worst_act, worst_mul);
  }
  set_cpu_isa_for_testing(native);
  // Sign and limits: gelu_tanh(x) -> x for x >> 0, -> -0 for x << 0, gelu(0) = 0.
  float x[4] = {1e4f, -1e4f, 0.0f, FLT_MAX}, one[4] = {1, 1, 1, 1}, y[4];
  gelu_tanh_mul(x, one, y, 4);
  EXPECT_EQ(y[0], 1e4f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], FLT_MAX);
}

// Paged attention through a scrambled block table equals dense causal attention over the
// same K/V computed in float64.
TEST(Attention, ReferenceBackendMatchesDenseCausalSoftmax) {
  const int32_t n_heads = 4, n_kv = 2, hd = 6, bs = 3, num_blocks = 8;
  const std::vector<int32_t> seq_lens = {7, 4};  // seq 0: 3 new tokens, seq 1: 4 (full prefill)
  const std::vector<int32_t> num_q = {3, 4};
  const std::vector<int32_t> tables = {5, 0, 7, /*pad*/ 1, 6, 2, 3, 4};  // [2, 4]
  auto backend = make_attention_backend("reference");
  ASSERT_TRUE(backend.ok());
  const int64_t row = n_kv * hd;
  std::vector<float> kc(size_t(num_blocks) * bs * row), vc(kc.size());
  // Write every position's K/V (past ones as if earlier steps had written them).
  std::vector<std::vector<float>> K(2), V(2);
  for (int s = 0; s < 2; ++s) {
    K[s] = random_vec(seq_lens[s] * row, 10 + s);
    V[s] = random_vec(seq_lens[s] * row, 20 + s);
    for (int p = 0; p < seq_lens[s]; ++p) {
      const int64_t slot = int64_t{tables[s * 4 + p / bs]} * bs + p % bs;
      std::copy_n(&K[s][p * row], row, &kc[slot * row]);
      std::copy_n(&V[s][p * row], row, &vc[slot * row]);
    }
  }
  const int32_t T = num_q[0] + num_q[1];
  const auto q = random_vec(T * n_heads * hd, 30);
  const std::vector<int32_t> qsl = {0, num_q[0], T};
  AttentionMetadata meta;
  meta.num_seqs = 2;
  meta.num_tokens = T;
  meta.query_start_loc = qsl.data();
  meta.seq_lens = seq_lens.data();
  meta.block_tables = tables.data();
  meta.max_blocks_per_seq = 4;
  meta.block_size = bs;
  const AttentionShape shape{n_heads, n_kv, hd, 1.0f / std::sqrt(float(hd))};
  std::vector<float> out(T * n_heads * hd);
  (*backend)->forward(meta, shape, q.data(), {kc.data(), vc.data()}, out.data(), nullptr);
  for (int s = 0; s < 2; ++s)
    for (int j = 0; j < num_q[s]; ++j) {
      const int t = qsl[s] + j, pos = seq_lens[s] - num_q[s] + j;
      for (int h = 0; h < n_heads; ++h) {
        const int kvh = h / (n_heads / n_kv);
        std::vector<double> w(pos + 1);
        double mx = -1e300, sum = 0;
        for (int p = 0; p <= pos; ++p) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += double(q[(t * n_heads + h) * hd + i]) * K[s][p * row + kvh * hd + i];
          w[p] = d / std::sqrt(double(hd));
          mx = std::max(mx, w[p]);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int i = 0; i < hd; ++i) {
          double o = 0;
          for (int p = 0; p <= pos; ++p) o += w[p] / sum * V[s][p * row + kvh * hd + i];
          EXPECT_NEAR(out[(t * n_heads + h) * hd + i], o, 1e-5) << s << " " << j << " " << h;
        }
      }
    }
}

// Soft-capping against std::tanh in double: a few ulp of the cap, odd, saturating, no NaN.
TEST(Ops, SoftcapMatchesFloat64) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) / 40.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX}) x.push_back(v);
  x.push_back(0.25f);  // odd length
  const CpuIsa native = cpu_isa();
  for (CpuIsa isa : {native, CpuIsa::kAvx2}) {
    set_cpu_isa_for_testing(isa);
    for (float cap : {3.0f, 30.0f}) {
      std::vector<float> y = x;
      softcap_inplace(y.data(), static_cast<int64_t>(y.size()), cap);
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = cap * std::tanh(static_cast<double>(x[i]) / cap);
        ASSERT_FALSE(std::isnan(y[i])) << x[i];
        EXPECT_NEAR(y[i], want, 4e-7 * cap) << x[i] << " cap " << cap;
        EXPECT_LE(std::fabs(y[i]), cap) << x[i];
      }
    }
  }
  set_cpu_isa_for_testing(native);
}

}  // namespace
}  // namespace llmserve
