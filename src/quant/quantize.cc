// Block quantizers (see quantize.h for the method). Packing follows the layouts documented in
// quant/block_formats.h (ggml-common.h), i.e. the exact inverse of dequantize_ref.cc; every
// error below is measured with the dequantizer's own float arithmetic (dl = d * sc, then
// dl * q - ml), so the state kept is the best one as the file will decode it.
#include "quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/thread_pool.h"
#include "quant/block_formats.h"
#include "quant/quantize_fit.h"

namespace llmserve {
namespace {

using namespace quant;

/// float -> f16 bits, saturating at +-65504 (a scale beyond half range would become inf).
uint16_t f16_bits(float v) { return f32_to_f16(std::clamp(v, -65504.0f, 65504.0f)); }
/// v as the f16 the file stores, widened back.
float f16_round(float v) { return f16_to_f32(f16_bits(v)); }

template <typename B>
void store(const B& b, void* out, int64_t i) {
  std::memcpy(static_cast<uint8_t*>(out) + i * static_cast<int64_t>(sizeof(B)), &b, sizeof(B));
}

// ---- 32-value blocks ---------------------------------------------------------------------

/// Symmetric block: scale fitted, rounded to f16, codes re-rounded for the stored scale.
float symmetric_block(const float* x, int qmin, int qmax, int8_t* q, uint16_t* d_bits) {
  const float s = fit_symmetric(x, nullptr, kQK, qmin, qmax, q);
  *d_bits = f16_bits(s);
  const float d = f16_to_f32(*d_bits);
  for (int i = 0; i < kQK; ++i) q[i] = static_cast<int8_t>(d != 0 ? round_code(x[i] / d, qmin, qmax) : 0);
  return d;
}

/// Affine block (Q4_1/Q5_1: free offset), scale and offset rounded to f16, codes re-rounded.
void affine_block(const float* x, int qmax, float rmin, int nstep, uint8_t* q, uint16_t* d_bits,
                  uint16_t* m_bits) {
  const AffineFit f = fit_affine(x, nullptr, kQK, qmax, /*offset_nonpositive=*/false, rmin, 0.1f,
                                 nstep, q);
  *d_bits = f16_bits(f.scale);
  *m_bits = f16_bits(f.offset);
  const float d = f16_to_f32(*d_bits), m = f16_to_f32(*m_bits);
  for (int i = 0; i < kQK; ++i)
    q[i] = static_cast<uint8_t>(d != 0 ? round_code((x[i] - m) / d, 0, qmax) : 0);
}

/// Nibbles of a 32-value block: qs[j] = code j | code (j + 16) << 4 (low 4 bits of each).
void pack_nibbles32(const uint8_t* u, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = (u[j] & 0xF) | (u[j + kQK / 2] & 0xF) << 4;
}

/// Fifth bits of a 32-value block: bit j of the little-endian uint32 is bit 4 of code j.
void pack_high_bits32(const uint8_t* u, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kQK; ++j) h |= static_cast<uint32_t>((u[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

void q8_0_block(const float* x, BlockQ8_0& b) {
  symmetric_block(x, -127, 127, b.qs, &b.d);  // +-127 as ggml: int8 dot kernels negate codes
}

/// Q4_0 / Q5_0 codes of `bits` bits: q in [-2^(bits-1), 2^(bits-1) - 1] stored as q + 2^(bits-1).
void offset_codes(const float* x, int bits, uint8_t* u, uint16_t* d_bits) {
  const int half = 1 << (bits - 1);
  int8_t q[kQK];
  symmetric_block(x, -half, half - 1, q, d_bits);
  for (int i = 0; i < kQK; ++i) u[i] = static_cast<uint8_t>(q[i] + half);
}

void q4_0_block(const float* x, BlockQ4_0& b) {
  uint8_t u[kQK];
  offset_codes(x, 4, u, &b.d);
  pack_nibbles32(u, b.qs);
}

void q5_0_block(const float* x, BlockQ5_0& b) {
  uint8_t u[kQK];
  offset_codes(x, 5, u, &b.d);
  pack_nibbles32(u, b.qs);
  pack_high_bits32(u, b.qh);
}

void q4_1_block(const float* x, BlockQ4_1& b) {
  uint8_t u[kQK];
  affine_block(x, 15, -1.0f, 20, u, &b.d, &b.m);
  pack_nibbles32(u, b.qs);
}

void q5_1_block(const float* x, BlockQ5_1& b) {
  uint8_t u[kQK];
  affine_block(x, 31, -0.5f, 15, u, &b.d, &b.m);
  pack_nibbles32(u, b.qs);
  pack_high_bits32(u, b.qh);
}

// ---- Q4_K / Q5_K: 8 affine sub-blocks of 32 ----------------------------------------------

constexpr int kSub = 32, kNumSub = kQK_K / kSub;

/// A K-quant super-block as the file stores it (d, dmin already f16-rounded).
struct AffineK {
  float d = 0, dmin = 0;
  uint8_t sc[kNumSub] = {}, mn[kNumSub] = {};
  uint8_t q[kQK_K] = {};
  double error = 0;
};

/// Up to two integer candidates around v (its floor and ceiling), clamped to [lo, hi].
int candidates(float v, int lo, int hi, int* out) {
  if (!std::isfinite(v)) {
    out[0] = v > 0 ? hi : lo;
    return 1;
  }
  const int f = static_cast<int>(std::clamp(std::floor(v), static_cast<float>(lo), static_cast<float>(hi)));
  out[0] = f;
  if (f + 1 <= hi && static_cast<float>(f) < v) {
    out[1] = f + 1;
    return 2;
  }
  return 1;
}

/// For sub-block j of `k` (values x, ideal scale s and negated offset mneg), picks the 6-bit
/// sc/mn among the neighbours of s / d and mneg / dmin with the codes re-rounded; returns the
/// sub-block's error and writes sc, mn and codes into k.
double choose_affine_sub(const float* x, float s, float mneg, int qmax, int j, AffineK& k) {
  int scs[2], mns[2];
  const int nsc = k.d > 0 ? candidates(s / k.d, 0, 63, scs) : (scs[0] = 0, 1);
  const int nmn = k.dmin > 0 ? candidates(mneg / k.dmin, 0, 63, mns) : (mns[0] = 0, 1);
  double best = -1;
  uint8_t codes[kSub];
  for (int a = 0; a < nsc; ++a) {
    for (int b = 0; b < nmn; ++b) {
      const float dl = k.d * static_cast<float>(scs[a]), ml = k.dmin * static_cast<float>(mns[b]);
      const float idl = dl != 0 ? 1.0f / dl : 0.0f;
      float err = 0;
      for (int i = 0; i < kSub; ++i) {
        codes[i] = static_cast<uint8_t>(round_code((x[i] + ml) * idl, 0, qmax));
        const float e = (dl * static_cast<float>(codes[i]) - ml) - x[i];
        err += e * e;
      }
      if (best < 0 || err < best) {
        best = err;
        k.sc[j] = static_cast<uint8_t>(scs[a]);
        k.mn[j] = static_cast<uint8_t>(mns[b]);
        std::memcpy(k.q + kSub * j, codes, kSub);
      }
    }
  }
  return best;
}

void choose_all_affine(const float* x, const float* s, const float* mneg, int qmax, AffineK& k) {
  k.error = 0;
  for (int j = 0; j < kNumSub; ++j)
    k.error += choose_affine_sub(x + kSub * j, s[j], mneg[j], qmax, j, k);
}

/// The f16 super-block scale for sub-block scales up to `max_v` stored as codes up to `top`.
float super_scale(float max_v, int top) { return max_v > 0 ? f16_round(max_v / top) : 0.0f; }

/// Fits a Q4_K (qmax 15) or Q5_K (qmax 31) super-block of 256 values.
AffineK fit_affine_k(const float* x, int qmax, float rmin, int nstep) {
  float s[kNumSub], mneg[kNumSub];
  AffineK k;
  float max_s = 0, max_m = 0;
  for (int j = 0; j < kNumSub; ++j) {
    const AffineFit f = fit_affine(x + kSub * j, nullptr, kSub, qmax, /*offset_nonpositive=*/true,
                                   rmin, 0.1f, nstep, k.q + kSub * j);
    s[j] = f.scale;
    mneg[j] = -f.offset;
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, mneg[j]);
  }
  k.d = super_scale(max_s, 63);
  k.dmin = super_scale(max_m, 63);
  choose_all_affine(x, s, mneg, qmax, k);
  // Rounds of least squares for (d, dmin) over all 256 values given the integer codes and
  // sub-scales: x ~ d * (sc q) - dmin * mn. Then the sub-scales are re-chosen for the new
  // super-scales (codes re-rounded). Keeps the best state.
  AffineK cur = k;
  for (int round = 0; round < 4; ++round) {
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int i = 0; i < kQK_K; ++i) {
      const double a = double(cur.sc[i / kSub]) * cur.q[i], b = cur.mn[i / kSub];
      saa += a * a;
      sab += a * b;
      sbb += b * b;
      sxa += x[i] * a;
      sxb += x[i] * b;
    }
    if (saa <= 0) break;
    double d = sxa / saa, dmin = 0;
    const double det = saa * sbb - sab * sab;
    if (sbb > 0 && det > 0) {
      d = (sxa * sbb - sab * sxb) / det;
      dmin = (sab * sxa - saa * sxb) / det;
      if (dmin < 0) {
        dmin = 0;
        d = sxa / saa;
      }
    }
    if (!(d > 0)) break;
    cur.d = f16_round(static_cast<float>(d));
    cur.dmin = f16_round(static_cast<float>(dmin));
    choose_all_affine(x, s, mneg, qmax, cur);
    if (!(cur.error < k.error)) break;
    k = cur;
  }
  return k;
}

/// The 12 scale bytes of Q4_K/Q5_K (the inverse of get_scale_min_k4, block_formats.h).
void pack_scales_k4(const uint8_t* sc, const uint8_t* mn, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < kNumSub; ++j) {
    if (j < 4) {
      out[j] |= sc[j] & 63;
      out[j + 4] |= mn[j] & 63;
    } else {
      out[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | (mn[j] & 0xF) << 4);
      out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

/// Low nibbles of a K-quant super-block: element 64 c + 32 h + l is nibble h of qs[32 c + l].
void pack_nibbles256(const uint8_t* q, uint8_t* qs) {
  for (int c = 0; c < kQK_K / 64; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 0xF) | (q[64 * c + 32 + l] & 0xF) << 4);
}

/// The fields Q4_K and Q5_K share (d, dmin, scales, low nibbles) of a fitted super-block.
template <typename B>
AffineK affine_k_block(const float* x, int qmax, float rmin, int nstep, B& b) {
  const AffineK k = fit_affine_k(x, qmax, rmin, nstep);
  b.d = f16_bits(k.d);
  b.dmin = f16_bits(k.dmin);
  pack_scales_k4(k.sc, k.mn, b.scales);
  pack_nibbles256(k.q, b.qs);
  return k;
}

void q4_k_block(const float* x, BlockQ4_K& b) { affine_k_block(x, 15, -1.0f, 20, b); }

void q5_k_block(const float* x, BlockQ5_K& b) {
  const AffineK k = affine_k_block(x, 31, -0.5f, 15, b);
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int e = 0; e < kQK_K; ++e) b.qh[e % 32] |= static_cast<uint8_t>(((k.q[e] >> 4) & 1) << (e / 32));
}

// ---- Q6_K: 16 symmetric sub-blocks of 16 -------------------------------------------------

constexpr int kSub6 = 16, kNumSub6 = kQK_K / kSub6;

struct SymK {
  float d = 0;
  int8_t sc[kNumSub6] = {};
  int8_t q[kQK_K] = {};  // in [-32, 31]
  double error = 0;
};

double choose_sym_sub(const float* x, float s, int j, SymK& k) {
  int scs[2];
  const int n = k.d != 0 ? candidates(s / k.d, -128, 127, scs) : (scs[0] = 0, 1);
  double best = -1;
  int8_t codes[kSub6];
  for (int a = 0; a < n; ++a) {
    const float dl = k.d * static_cast<float>(scs[a]);
    const float idl = dl != 0 ? 1.0f / dl : 0.0f;
    float err = 0;
    for (int i = 0; i < kSub6; ++i) {
      codes[i] = static_cast<int8_t>(round_code(x[i] * idl, -32, 31));
      const float e = dl * static_cast<float>(codes[i]) - x[i];
      err += e * e;
    }
    if (best < 0 || err < best) {
      best = err;
      k.sc[j] = static_cast<int8_t>(scs[a]);
      std::memcpy(k.q + kSub6 * j, codes, kSub6);
    }
  }
  return best;
}

void choose_all_sym(const float* x, const float* s, SymK& k) {
  k.error = 0;
  for (int j = 0; j < kNumSub6; ++j) k.error += choose_sym_sub(x + kSub6 * j, s[j], j, k);
}

SymK fit_q6_k(const float* x) {
  float s[kNumSub6];
  SymK k;
  float ref = 0;  // the sub-block scale of largest magnitude, signed
  for (int j = 0; j < kNumSub6; ++j) {
    s[j] = fit_symmetric(x + kSub6 * j, nullptr, kSub6, -32, 31, k.q + kSub6 * j);
    if (std::fabs(s[j]) > std::fabs(ref)) ref = s[j];
  }
  if (ref == 0) return k;  // all zero
  // The largest scale maps to sub-scale -128 (one step more than +127), as ggml does.
  k.d = f16_round(-ref / 128.0f);
  choose_all_sym(x, s, k);
  SymK cur = k;
  for (int round = 0; round < 4; ++round) {
    double saa = 0, sxa = 0;
    for (int i = 0; i < kQK_K; ++i) {
      const double a = double(cur.sc[i / kSub6]) * cur.q[i];
      saa += a * a;
      sxa += x[i] * a;
    }
    if (saa <= 0) break;
    cur.d = f16_round(static_cast<float>(sxa / saa));
    if (cur.d == 0) break;
    choose_all_sym(x, s, cur);
    if (!(cur.error < k.error)) break;
    k = cur;
  }
  return k;
}

void q6_k_block(const float* x, BlockQ6_K& b) {
  const SymK k = fit_q6_k(x);
  std::memset(&b, 0, sizeof(b));
  b.d = f16_bits(k.d);
  for (int j = 0; j < kNumSub6; ++j) b.scales[j] = k.sc[j];
  for (int e = 0; e < kQK_K; ++e) {
    const int u = k.q[e] + 32, h = e / 128, p = (e % 128) / 32, l = e % 32;
    b.ql[64 * h + 32 * (p % 2) + l] |= static_cast<uint8_t>((u & 0xF) << (4 * (p / 2)));
    b.qh[32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * p));
  }
}

/// Applies `fn(x_block, block)` to each of the n / Elems blocks of type B.
template <typename B, int Elems, typename Fn>
void each_block(const float* x, void* out, int64_t n, Fn fn) {
  for (int64_t i = 0; i < n / Elems; ++i) {
    B b;
    fn(x + i * Elems, b);
    store(b, out, i);
  }
}

}  // namespace

bool can_quantize(DType type) {
  switch (type) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ8_0: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void quantize_row(DType type, const float* x, void* out, int64_t n) {
  LLMS_CHECK(n >= 0 && n % dtype_block_elems(type) == 0,
             "quantize_row: {} elements are not whole {} blocks of {}", n, dtype_name(type),
             dtype_block_elems(type));
  auto* bytes = static_cast<uint8_t*>(out);
  switch (type) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == DType::kF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    case DType::kQ4_0: return each_block<BlockQ4_0, kQK>(x, out, n, q4_0_block);
    case DType::kQ4_1: return each_block<BlockQ4_1, kQK>(x, out, n, q4_1_block);
    case DType::kQ5_0: return each_block<BlockQ5_0, kQK>(x, out, n, q5_0_block);
    case DType::kQ5_1: return each_block<BlockQ5_1, kQK>(x, out, n, q5_1_block);
    case DType::kQ8_0: return each_block<BlockQ8_0, kQK>(x, out, n, q8_0_block);
    case DType::kQ4_K: return each_block<BlockQ4_K, kQK_K>(x, out, n, q4_k_block);
    case DType::kQ5_K: return each_block<BlockQ5_K, kQK_K>(x, out, n, q5_k_block);
    case DType::kQ6_K: return each_block<BlockQ6_K, kQK_K>(x, out, n, q6_k_block);
    default:
      LLMS_CHECK(false, "quantize_row: no quantizer for {}", dtype_name(type));
  }
}

Status quantize_rows(DType type, const float* x, void* out, int64_t rows, int64_t n,
                     ThreadPool* pool) {
  for (int64_t i = 0; i < rows * n; ++i)
    if (!std::isfinite(x[i]))
      return InvalidArgument("value {} at row {}, column {} is not finite", x[i], i / n, i % n);
  const int64_t row_bytes = dtype_row_bytes(type, n);
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      quantize_row(type, x + r * n, static_cast<uint8_t*>(out) + r * row_bytes, n);
  };
  if (pool && rows > 1) {
    pool->parallel_for(rows, body);
  } else {
    body(0, rows);
  }
  return Status::Ok();
}

}  // namespace llmserve
