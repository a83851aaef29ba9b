// Reference GEMMs over quantized (or mixed-type) weights; see gemm_quant_ref.h.
#include "kernels/quant/gemm_quant_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "quant/dequantize_ref.h"

namespace llmserve {
namespace {

/// Weight rows dequantized together: each activation row is read once per panel.
constexpr int64_t kPanelRows = 4;
/// Output columns per work item before rounding up to the epilogue alignment.
constexpr int64_t kItemCols = 16;
/// Below this many multiply-adds a call runs on the calling thread alone.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;

/// The rows of W segment by segment: a matrix in one dtype, or WeightMatrix::parts.
class WeightRows {
 public:
  explicit WeightRows(const WeightMatrix& w) : cols_(w.cols) {
    if (w.parts != nullptr) {
      for (const WeightMatrix& p : *w.parts) add(p);
    } else {
      add(w);
    }
    LLMS_CHECK(rows_ == w.rows, "weight parts hold {} rows, the matrix {}", rows_, w.rows);
  }

  /// Dequantizes W row r into out[0, cols).
  void dequantize(int64_t r, float* out) const {
    for (const Segment& s : segments_) {
      if (r < s.first + s.rows) {
        dequantize_row_ref(s.dtype, s.data + (r - s.first) * s.row_bytes, out, cols_);
        return;
      }
    }
    LLMS_CHECK(false, "weight row {} out of range ({} rows)", r, rows_);
  }

 private:
  struct Segment {
    const uint8_t* data;
    DType dtype;
    int64_t first, rows, row_bytes;
  };
  void add(const WeightMatrix& p) {
    LLMS_CHECK(p.cols == cols_ && (p.data != nullptr || p.rows == 0),
               "quantized GEMM: weight part without row-major data");
    segments_.push_back({static_cast<const uint8_t*>(p.data), p.dtype, rows_, p.rows,
                         dtype_row_bytes(p.dtype, p.cols)});
    rows_ += p.rows;
  }
  int64_t cols_;
  int64_t rows_ = 0;
  std::vector<Segment> segments_;
};

/// Runs body(c0, c1) over column ranges [c0, c1) of `n` columns, each starting at a multiple
/// of `unit`, on the pool (or inline for small work). Which thread computes a range never
/// changes what it computes.
template <typename Body>
void for_each_item(int64_t n, int64_t unit, int64_t work, ThreadPool* pool, const Body& body) {
  const int64_t items = (n + unit - 1) / unit;
  auto run = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) body(i * unit, std::min(n, (i + 1) * unit));
  };
  if (pool == nullptr || pool->num_threads() <= 1 || items <= 1 || work < kMinParallelWork) {
    run(0, items);
  } else {
    pool->parallel_for(items, run);
  }
}

/// Thread-local float scratch of at least n floats.
float* scratch(std::vector<float>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

}  // namespace

float dot_ref(const float* x, const float* w, int64_t k) {
  constexpr int kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      lane[j] += static_cast<double>(x[i + j]) * static_cast<double>(w[i + j]);
  for (int j = 0; i < k; ++i, ++j) lane[j] += static_cast<double>(x[i]) * static_cast<double>(w[i]);
  const double sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                     ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  return static_cast<float>(sum);
}

void gemm_quant_ref(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool* pool,
                    GemmOutput mode, const GemmEpilogue* epilogue) {
  const int64_t n = w.rows, k = w.cols;
  if (m <= 0 || n <= 0) return;
  const WeightRows rows(w);
  const bool accumulate = mode == GemmOutput::kAccumulate;
  const int64_t align = epilogue != nullptr ? std::max<int64_t>(1, epilogue->column_alignment()) : 1;
  const int64_t unit = (kItemCols + align - 1) / align * align;
  for_each_item(n, unit, m * n * k, pool, [&](int64_t c0, int64_t c1) {
    thread_local std::vector<float> buf;
    float* wrow = scratch(buf, kPanelRows * k);
    for (int64_t p0 = c0; p0 < c1; p0 += kPanelRows) {
      const int64_t np = std::min(kPanelRows, c1 - p0);
      for (int64_t p = 0; p < np; ++p) rows.dequantize(p0 + p, wrow + p * k);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < np; ++p) {
          const float v = dot_ref(x + i * k, wrow + p * k, k);
          float& out = y[i * n + p0 + p];
          out = accumulate ? out + v : v;
        }
      }
    }
    if (epilogue != nullptr) epilogue->apply(0, m, c0, c1, y, n);
  });
}

void gemm_silu_mul_quant_ref(const float* x, int64_t m, const WeightMatrix& gate_up, float* out,
                             ThreadPool* pool) {
  const int64_t f = gate_up.rows / 2, k = gate_up.cols;
  if (m <= 0 || f <= 0) return;
  const WeightRows rows(gate_up);
  for_each_item(f, kItemCols, 2 * m * f * k, pool, [&](int64_t c0, int64_t c1) {
    thread_local std::vector<float> buf;
    float* gate = scratch(buf, 2 * k);
    float* up = gate + k;
    for (int64_t j = c0; j < c1; ++j) {
      rows.dequantize(j, gate);
      rows.dequantize(f + j, up);
      for (int64_t i = 0; i < m; ++i) {
        const float g = dot_ref(x + i * k, gate, k);
        const float u = dot_ref(x + i * k, up, k);
        out[i * f + j] = g / (1.0f + std::exp(-g)) * u;
      }
    }
  });
}

}  // namespace llmserve
