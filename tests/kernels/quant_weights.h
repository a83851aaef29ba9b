// Quantized test weights built from real blocks (llama-quantize's bytes in
// ../shared/testdata/quant_vectors, rearranged into the shape wanted) and their float values,
// shared by the quantized GEMM tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "quant/dequantize_ref.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

/// A GEMM epilogue that records every tile it is handed (checking the column alignment it
/// asked for and that no element comes twice), then doubles the tile.
class RecordingEpilogue final : public GemmEpilogue {
 public:
  RecordingEpilogue(int64_t align, int64_t n) : align_(align), n_(n) {}
  int64_t column_alignment() const override { return align_; }
  void apply(int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* y,
             int64_t ldy) const override {
    EXPECT_EQ(n0 % align_, 0);
    EXPECT_TRUE(n1 % align_ == 0 || n1 == n_);
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = m0; i < m1; ++i)
      for (int64_t j = n0; j < n1; ++j) {
        EXPECT_TRUE(seen_.insert({i, j}).second) << "element seen twice";
        y[i * ldy + j] *= 2;
      }
  }
  size_t seen() const { return seen_.size(); }

 private:
  int64_t align_, n_;
  mutable std::mutex mu_;
  mutable std::set<std::pair<int64_t, int64_t>> seen_;
};

constexpr DType kTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1,
                            DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K,
                            DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

inline const GgufFile& vectors() {
  static const GgufFile g = [] {
    auto f = GgufFile::open(std::string(LLMSERVE_SHARED_DIR) + "/testdata/quant_vectors/vectors.gguf");
    if (!f.ok()) {
      ADD_FAILURE() << f.status().message();
      std::abort();
    }
    return std::move(*f);
  }();
  return g;
}

inline std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// W[n, k] of `type` built from real blocks, and the float values it holds.
struct QuantWeight {
  std::shared_ptr<std::vector<uint8_t>> bytes;
  std::vector<float> values;  // dequantized, [n, k]
  WeightMatrix w;
  WeightMatrix f32;  // the same values as a float32 matrix
};

inline QuantWeight make_weight(DType type, int64_t n, int64_t k, uint32_t seed) {
  const TensorView* src = vectors().find_tensor(dtype_ggml_name(type));
  EXPECT_NE(src, nullptr);
  const int64_t bb = dtype_block_bytes(type), be = dtype_block_elems(type);
  const int64_t src_blocks = static_cast<int64_t>(src->nbytes) / bb, blocks = k / be;
  QuantWeight q;
  q.bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * blocks * bb));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t from = (seed + r * 131 + b * 17) % src_blocks;
      std::memcpy(q.bytes->data() + (r * blocks + b) * bb,
                  static_cast<const uint8_t*>(src->data) + from * bb, static_cast<size_t>(bb));
    }
  q.values.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    dequantize_row_ref(type, q.bytes->data() + r * blocks * bb, q.values.data() + r * k, k);
  q.w.data = q.bytes->data();
  q.w.dtype = type;
  q.w.rows = n;
  q.w.cols = k;
  q.w.storage = q.bytes;
  q.f32.data = q.values.data();
  q.f32.dtype = DType::kF32;
  q.f32.rows = n;
  q.f32.cols = k;
  return q;
}

/// sum_k |x w| per output element (the error bound's scale).
inline std::vector<double> magnitudes(const std::vector<float>& x, const std::vector<float>& w,
                               int64_t m, int64_t n, int64_t k) {
  std::vector<double> mag(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double a = 0;
      for (int64_t kk = 0; kk < k; ++kk) a += std::fabs(double(x[i * k + kk]) * w[j * k + kk]);
      mag[i * n + j] = a;
    }
  return mag;
}

}  // namespace
}  // namespace llmserve
