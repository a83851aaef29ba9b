// Quantizers (quant/quantize.h) checked by round trip through the reference dequantizer:
//  - values that a type represents exactly come back exactly (this pins every bit of the
//    packing: a misplaced nibble, scale or sign would show);
//  - on random rows (Gaussian and heavy-tailed Student-t(4), row scales from 1e-3 to 10) the
//    relative RMSE stays under a per-type bound and below that of a naive max-based quantizer
//    of the same type (scale = max / levels, no search), and no value is off by more than a
//    per-type number of quantization steps;
//  - zeros, constants and outliers; determinism across thread counts; non-finite input;
//  - every tensor of ../shared/testdata/models/quantized/llama-q that llama-quantize wrote
//    has a lower squared error against the F32 weights when we quantize it to the same type.
// The bounds are measured figures with a small margin (docs/models.md gives the comparison with
// llama-quantize's reference quantizers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "quant/dequantize_ref.h"
#include "quant/quantize.h"
#include "quant/quantize_fit.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(dtype_row_bytes(t, n)));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row_ref(t, q.data(), y.data(), n);
  return y;
}

double sq_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return e;
}

double sq_norm(const std::vector<float>& x) {
  double e = 0;
  for (float v : x) e += double(v) * v;
  return e;
}

float f16r(float v) { return f16_to_f32(f32_to_f16(v)); }
float rnd(float v, float lo, float hi) { return std::clamp(std::nearbyint(v), lo, hi); }

// ---- a naive max-based quantizer, as values (no packing): the baseline to beat -------------

/// x ~ d q, d = (signed max-magnitude value) / -lo, q in [lo, hi]: ggml's simple rule for
/// Q4_0/Q5_0 (amax / hi for a symmetric range, Q8_0).
void naive_symmetric(const float* x, int n, int lo, int hi, float* y) {
  float amax = 0, xm = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), xm = x[i];
  const float d = f16r(-lo == hi ? amax / hi : xm / lo);
  for (int i = 0; i < n; ++i) y[i] = d != 0 ? d * rnd(x[i] / d, lo, hi) : 0;
}

/// x ~ d q + m with d = (max - min) / top, m = min.
void naive_affine(const float* x, int n, int top, float* y) {
  const float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  const float d = f16r((hi - lo) / top), m = f16r(lo);
  for (int i = 0; i < n; ++i) y[i] = d != 0 ? d * rnd((x[i] - m) / d, 0, top) + m : m;
}

/// K-quant super-blocks with sub-block scale (max - min) / top (min <= 0), 6-bit sc/mn
/// relative to the largest.
void naive_affine_k(const float* x, int top, float* y) {
  float s[8], mn[8], max_s = 0, max_m = 0;
  for (int j = 0; j < 8; ++j) {
    const float lo = std::min(0.0f, *std::min_element(x + 32 * j, x + 32 * j + 32));
    const float hi = *std::max_element(x + 32 * j, x + 32 * j + 32);
    s[j] = (hi - lo) / top;
    mn[j] = -lo;
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, mn[j]);
  }
  const float d = f16r(max_s / 63), dmin = f16r(max_m / 63);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * (d > 0 ? rnd(s[j] / d, 0, 63) : 0);
    const float ml = dmin * (dmin > 0 ? rnd(mn[j] / dmin, 0, 63) : 0);
    for (int i = 32 * j; i < 32 * j + 32; ++i)
      y[i] = (dl != 0 ? dl * rnd((x[i] + ml) / dl, 0, top) : 0) - ml;
  }
}

/// Q6_K with sub-block scale xm / -32 and 8-bit sc relative to the largest.
void naive_q6_k(const float* x, float* y) {
  float s[16], ref = 0;
  for (int j = 0; j < 16; ++j) {
    float amax = 0, xm = 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i)
      if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), xm = x[i];
    s[j] = xm / -32;
    if (std::fabs(s[j]) > std::fabs(ref)) ref = s[j];
  }
  const float d = f16r(-ref / 128);
  for (int j = 0; j < 16; ++j) {
    const float dl = d != 0 ? d * rnd(s[j] / d, -128, 127) : 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i) y[i] = dl != 0 ? dl * rnd(x[i] / dl, -32, 31) : 0;
  }
}

std::vector<float> naive(DType t, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  const int n = static_cast<int>(x.size());
  for (int b = 0; b < n; b += static_cast<int>(dtype_block_elems(t))) {
    switch (t) {
      case DType::kQ8_0: naive_symmetric(&x[b], 32, -127, 127, &y[b]); break;
      case DType::kQ4_0: naive_symmetric(&x[b], 32, -8, 7, &y[b]); break;
      case DType::kQ5_0: naive_symmetric(&x[b], 32, -16, 15, &y[b]); break;
      case DType::kQ4_1: naive_affine(&x[b], 32, 15, &y[b]); break;
      case DType::kQ5_1: naive_affine(&x[b], 32, 31, &y[b]); break;
      case DType::kQ4_K: naive_affine_k(&x[b], 15, &y[b]); break;
      case DType::kQ5_K: naive_affine_k(&x[b], 31, &y[b]); break;
      case DType::kQ6_K: naive_q6_k(&x[b], &y[b]); break;
      default:
        ADD_FAILURE() << "no naive quantizer for " << dtype_name(t);
    }
  }
  return y;
}

// ---- random rows --------------------------------------------------------------------------

/// 48 rows of 512 values; row r has scale 10^(-3 + 4 r / 47).
std::vector<std::vector<float>> random_rows(bool heavy_tails, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0, 1);
  std::student_t_distribution<float> t4(4);
  std::vector<std::vector<float>> rows(48, std::vector<float>(512));
  for (size_t r = 0; r < rows.size(); ++r) {
    const float scale = std::pow(10.0f, -3.0f + 4.0f * r / 47.0f);
    for (float& v : rows[r]) v = scale * (heavy_tails ? t4(rng) : gauss(rng));
  }
  return rows;
}

struct Bounds {
  double rel_rmse_gauss;  // sqrt(sum err^2 / sum x^2) over all Gaussian rows
  double vs_naive;        // our squared error / the naive one's, at most (both data sets)
  double max_steps;       // |err| <= max_steps * (block amax / codes per sign) for every value
};

Bounds bounds_of(DType t) {
  // Measured (the printout: relative RMSE, error^2 vs naive on Gaussian / t(4) rows, worst
  // error) plus a small margin.
  switch (t) {
    case DType::kQ8_0: return {0.0050, 0.94, 1.0};   // 0.00485; 0.877 / 0.914; 0.89
    case DType::kQ4_0: return {0.080, 0.95, 1.1};    // 0.0781; 0.873 / 0.923; 0.96
    case DType::kQ4_1: return {0.068, 0.83, 1.25};   // 0.0660; 0.773 / 0.803; 1.06
    case DType::kQ5_0: return {0.0395, 0.94, 1.1};   // 0.0384; 0.895 / 0.918; 0.97
    case DType::kQ5_1: return {0.0337, 0.84, 1.1};   // 0.0327; 0.814 / 0.802; 0.89
    case DType::kQ4_K: return {0.069, 0.83, 1.0};    // 0.0667; 0.789 / 0.808; 0.67
    case DType::kQ5_K: return {0.0347, 0.86, 1.0};   // 0.0337; 0.839 / 0.832; 0.70
    case DType::kQ6_K: return {0.0170, 0.88, 1.0};   // 0.0164; 0.808 / 0.857; 0.67
    default: return {0, 0, 0};
  }
}

/// Codes on each side of zero: what one quantization step of a block is relative to its amax.
double levels(DType t) {
  switch (t) {
    case DType::kQ8_0: return 127;
    case DType::kQ4_0: return 8;
    case DType::kQ5_0: return 16;
    case DType::kQ4_1: case DType::kQ4_K: return 7.5;
    case DType::kQ5_1: case DType::kQ5_K: return 15.5;
    case DType::kQ6_K: return 32;
    default: return 1;
  }
}

class Quantizer : public ::testing::TestWithParam<DType> {};

TEST_P(Quantizer, RandomRowsBeatNaiveAndStayInBounds) {
  const DType t = GetParam();
  const Bounds b = bounds_of(t);
  const int64_t block = dtype_block_elems(t);
  for (bool heavy : {false, true}) {
    double err = 0, norm = 0, err_naive = 0, worst_steps = 0;
    for (const std::vector<float>& x : random_rows(heavy, heavy ? 7 : 3)) {
      const std::vector<float> y = round_trip(t, x), z = naive(t, x);
      err += sq_error(x, y);
      err_naive += sq_error(x, z);
      norm += sq_norm(x);
      for (size_t s = 0; s < x.size(); s += block) {
        float amax = 0;
        for (size_t i = s; i < s + block; ++i) amax = std::max(amax, std::fabs(x[i]));
        const double step = amax / levels(t);
        for (size_t i = s; i < s + block; ++i)
          worst_steps = std::max(worst_steps, std::fabs(double(x[i]) - y[i]) / step);
      }
    }
    const double rel = std::sqrt(err / norm), ratio = err / err_naive;
    std::printf("%-5s %-8s relative RMSE %.5f (naive %.5f), error^2 vs naive %.3f, worst "
                "error %.2f steps\n", std::string(dtype_name(t)).c_str(),
                heavy ? "t(4)" : "gaussian", rel, std::sqrt(err_naive / norm), ratio, worst_steps);
    if (!heavy) {
      EXPECT_LE(rel, b.rel_rmse_gauss) << dtype_name(t);
    }
    EXPECT_LE(ratio, b.vs_naive) << dtype_name(t) << (heavy ? " t(4)" : " gaussian");
    EXPECT_LE(worst_steps, b.max_steps) << dtype_name(t);
  }
}

// Values a type holds exactly (power-of-two scales, codes spanning each block's range) must
// come back bit for bit: the fits find them and the packing puts every field where the
// dequantizer reads it.
std::vector<float> representable(DType t, std::mt19937& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int n = 512;
  std::vector<float> x(n);
  const int elems = static_cast<int>(dtype_block_elems(t));
  for (int b = 0; b < n; b += elems) {
    float* y = &x[b];
    switch (t) {
      case DType::kQ8_0: case DType::kQ4_0: case DType::kQ5_0: {
        const int lo = t == DType::kQ8_0 ? -127 : t == DType::kQ4_0 ? -8 : -16;
        const int hi = t == DType::kQ8_0 ? 127 : -lo - 1;
        const float d = std::ldexp(1.0f, uni(-12, -4));
        for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(i == 0 ? lo : uni(lo, hi));
        break;
      }
      case DType::kQ4_1: case DType::kQ5_1: {
        const int top = t == DType::kQ4_1 ? 15 : 31;
        const float d = std::ldexp(1.0f, uni(-12, -4)), m = -d * static_cast<float>(uni(0, 40));
        for (int i = 0; i < 32; ++i)
          y[i] = d * static_cast<float>(i == 0 ? 0 : i == 1 ? top : uni(0, top)) + m;
        break;
      }
      case DType::kQ4_K: case DType::kQ5_K: {
        const int top = t == DType::kQ4_K ? 15 : 31;
        const float d = std::ldexp(1.0f, uni(-14, -6)), dmin = std::ldexp(1.0f, uni(-14, -6));
        for (int j = 0; j < 8; ++j) {
          const int sc = j == 0 ? 63 : uni(1, 63), mn = j == 1 ? 63 : uni(0, 63);
          const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
          for (int i = 0; i < 32; ++i) {
            const int q = i == 0 ? 0 : i == 1 ? top : uni(0, top);
            y[32 * j + i] = dl * static_cast<float>(q) - ml;
          }
        }
        break;
      }
      case DType::kQ6_K: {
        const float d = std::ldexp(1.0f, uni(-16, -8));
        for (int j = 0; j < 16; ++j) {
          int sc = j == 0 ? -128 : uni(-127, 127);
          if (sc == 0) sc = 1;
          const float dl = d * static_cast<float>(sc);
          for (int i = 0; i < 16; ++i) {
            const int q = i == 0 ? -32 : i == 1 ? 31 : uni(-32, 31);
            y[16 * j + i] = dl * static_cast<float>(q);
          }
        }
        break;
      }
      default: ADD_FAILURE();
    }
    // Shuffle within each (sub-)block so the extreme codes are not always first.
    const int group = t == DType::kQ6_K ? 16 : 32;
    for (int g = 0; g < elems; g += group) std::shuffle(y + g, y + g + group, rng);
  }
  return x;
}

TEST_P(Quantizer, RepresentableValuesComeBackExactly) {
  const DType t = GetParam();
  std::mt19937 rng(11);
  for (int rep = 0; rep < 20; ++rep) {
    const std::vector<float> x = representable(t, rng);
    const std::vector<float> y = round_trip(t, x);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << dtype_name(t) << " " << i;
  }
}

TEST_P(Quantizer, ZerosConstantsAndOutliers) {
  const DType t = GetParam();
  const std::vector<float> zeros(512, 0.0f);
  EXPECT_EQ(round_trip(t, zeros), zeros);
  for (float c : {0.375f, -0.375f}) {  // f16-exact constants
    const std::vector<float> x(512, c), y = round_trip(t, x);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], c, 1e-3 * std::fabs(c)) << dtype_name(t);
  }
  // One huge value among small ones: the outlier survives, the rest keeps its sign.
  std::vector<float> x(512, 0.01f);
  x[100] = 1000.0f;
  const std::vector<float> y = round_trip(t, x);
  EXPECT_NEAR(y[100], 1000.0f, 1000.0f / levels(t)) << dtype_name(t);
  for (size_t i = 256; i < x.size(); ++i) EXPECT_NEAR(y[i], 0.01f, 1e-3) << dtype_name(t);
}

INSTANTIATE_TEST_SUITE_P(Types, Quantizer, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(QuantizeRows, SameBytesWithAndWithoutThreads) {
  const auto rows = random_rows(false, 5);
  std::vector<float> x;
  for (const auto& r : rows) x.insert(x.end(), r.begin(), r.end());
  ThreadPool pool(2);
  for (DType t : kTypes) {
    const int64_t n = 512, m = static_cast<int64_t>(rows.size());
    std::vector<uint8_t> a(static_cast<size_t>(m * dtype_row_bytes(t, n))), b(a.size());
    ASSERT_TRUE(quantize_rows(t, x.data(), a.data(), m, n).ok());
    ASSERT_TRUE(quantize_rows(t, x.data(), b.data(), m, n, &pool).ok());
    EXPECT_EQ(a, b) << dtype_name(t);
    // Row r of the batch equals quantize_row on that row alone.
    std::vector<uint8_t> one(static_cast<size_t>(dtype_row_bytes(t, n)));
    quantize_row(t, x.data() + 17 * n, one.data(), n);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), a.begin() + 17 * dtype_row_bytes(t, n)));
  }
}

TEST(QuantizeRows, RefusesNonFiniteValues) {
  std::vector<float> x(64, 1.0f);
  x[37] = std::nanf("");
  std::vector<uint8_t> out(static_cast<size_t>(2 * dtype_row_bytes(DType::kQ8_0, 32)));
  Status st = quantize_rows(DType::kQ8_0, x.data(), out.data(), 2, 32);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("row 1, column 5"), std::string::npos) << st.message();
  x[37] = INFINITY;
  EXPECT_FALSE(quantize_rows(DType::kQ8_0, x.data(), out.data(), 2, 32).ok());
}

TEST(QuantizeRows, FloatTypesAreConversions) {
  const std::vector<float> x = {1.0f, -2.5f, 3.140625f, 1e-3f};
  EXPECT_EQ(round_trip(DType::kF32, x), x);
  const std::vector<float> h = round_trip(DType::kF16, x), b = round_trip(DType::kBF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], f16_to_f32(f32_to_f16(x[i])));
    EXPECT_EQ(b[i], bf16_to_f32(f32_to_bf16(x[i])));
  }
  EXPECT_TRUE(can_quantize(DType::kQ6_K));
  EXPECT_FALSE(can_quantize(DType::kQ2_K));
  EXPECT_FALSE(can_quantize(DType::kIQ4_NL));
}

// ---- the group fits -----------------------------------------------------------------------

TEST(Fits, SymmetricErrorIsTheErrorOfTheCodes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0, 1);
  for (int rep = 0; rep < 50; ++rep) {
    float x[32];
    for (float& v : x) v = g(rng);
    int8_t q[32];
    float err = -1;
    const float s = quant::fit_symmetric(x, nullptr, 32, -8, 7, q, &err);
    double e = 0;
    for (int i = 0; i < 32; ++i) {
      ASSERT_GE(q[i], -8);
      ASSERT_LE(q[i], 7);
      e += (x[i] - s * q[i]) * (x[i] - s * q[i]);
    }
    EXPECT_NEAR(err, e, 1e-4 * (1 + e));
    // No better scale for these codes: the derivative of the error in s is zero.
    double dx = 0;
    for (int i = 0; i < 32; ++i) dx += (x[i] - s * q[i]) * q[i];
    EXPECT_NEAR(dx, 0.0, 1e-4);
  }
}

TEST(Fits, WeightsPullTheFitTowardsHeavyElements) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0, 1);
  double plain = 0, weighted = 0;
  for (int rep = 0; rep < 200; ++rep) {
    float x[32], w[32];
    for (int i = 0; i < 32; ++i) {
      x[i] = g(rng);
      w[i] = i < 4 ? 100.0f : 1.0f;  // the first four elements matter most
    }
    uint8_t q1[32], q2[32];
    const quant::AffineFit a = quant::fit_affine(x, nullptr, 32, 15, false, -1, 0.1f, 20, q1);
    const quant::AffineFit b = quant::fit_affine(x, w, 32, 15, false, -1, 0.1f, 20, q2);
    for (int i = 0; i < 4; ++i) {
      plain += std::pow(x[i] - (a.scale * q1[i] + a.offset), 2);
      weighted += std::pow(x[i] - (b.scale * q2[i] + b.offset), 2);
    }
  }
  EXPECT_LT(weighted, 0.5 * plain);
}

TEST(Fits, RoundCodeClampsAndRoundsToEven) {
  EXPECT_EQ(quant::round_code(2.5f, -8, 7), 2);
  EXPECT_EQ(quant::round_code(3.5f, -8, 7), 4);
  EXPECT_EQ(quant::round_code(-100.0f, -8, 7), -8);
  EXPECT_EQ(quant::round_code(INFINITY, -8, 7), 7);
  EXPECT_EQ(quant::round_code(std::nanf(""), 0, 15), 0);
}

// ---- against llama-quantize ----------------------------------------------------------------

std::string llama_q(const std::string& file) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/quantized/llama-q/" + file;
}

/// Dequantized values of a GGUF tensor.
std::vector<float> values(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t n = t.shape.back(), rows = t.numel() / n, rb = dtype_row_bytes(t.dtype, n);
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row_ref(t.dtype, static_cast<const uint8_t*>(t.data) + r * rb, &out[r * n], n);
  return out;
}

// Every tensor llama-quantize wrote for llama-q, quantized by us to the same type from the same
// F32 weights: our squared error against the F32 weights is lower, tensor by tensor.
TEST(AgainstLlamaQuantize, LowerWeightErrorOnEveryTensorOfLlamaQ) {
  auto f32 = GgufFile::open(llama_q("model-F32.gguf"));
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  for (const char* file : {"Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    auto theirs = GgufFile::open(llama_q(std::string("model-") + file + ".gguf"));
    ASSERT_TRUE(theirs.ok()) << theirs.status().message();
    double ours_total = 0, theirs_total = 0;
    for (const TensorView& t : theirs->tensors()) {
      if (!is_quantized(t.dtype)) continue;
      const TensorView* src = f32->find_tensor(t.name);
      ASSERT_NE(src, nullptr) << t.name;
      const std::vector<float> x = values(*src), their = values(t);
      const int64_t n = t.shape.back(), rows = t.numel() / n;
      std::vector<uint8_t> q(static_cast<size_t>(rows * dtype_row_bytes(t.dtype, n)));
      ASSERT_TRUE(quantize_rows(t.dtype, x.data(), q.data(), rows, n).ok());
      TensorView mine = t;
      mine.data = q.data();
      const double e_ours = sq_error(x, values(mine)), e_theirs = sq_error(x, their);
      EXPECT_LT(e_ours, e_theirs) << file << " " << t.name << " " << dtype_name(t.dtype);
      ours_total += e_ours;
      theirs_total += e_theirs;
    }
    std::printf("%-7s squared weight error, ours / llama-quantize: %.3f\n", file,
                ours_total / theirs_total);
  }
}

}  // namespace
}  // namespace llmserve
