#include "quant/quantize_fit.h"

#include <cmath>
#include <cstring>
#include <utility>

namespace llmserve::quant {
namespace {

constexpr int kMaxGroup = 256;

// Eight floats as one GCC/Clang vector (AVX with the x86-64-v3 baseline). Every operation is
// elementwise IEEE arithmetic and sums run in 8 fixed lanes, so results are the same on every
// machine and at every optimisation level.
using V8 = float __attribute__((vector_size(32)));

inline V8 load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline V8 splat(float f) { return V8{} + f; }
inline float hsum(V8 a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

/// The integers nearest to v in [lo, hi] (ties to even; NaN gives lo), as floats.
inline V8 round_clamped(V8 v, V8 lo, V8 hi) {
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  const V8 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds |v| < 2^22 to an integer
  return (v + magic) - magic;
}

/// Unit weights for w == nullptr.
struct Ones {
  float v[kMaxGroup];
  constexpr Ones() : v() {
    for (float& x : v) x = 1.0f;
  }
};
constexpr Ones kOnes;

inline const float* weights_or_ones(const float* w) { return w ? w : kOnes.v; }

/// Sums of a symmetric candidate: sum w x q and sum w q^2. The least-squares scale for these
/// codes is sxq / sqq and the error falls by sxq^2 / sqq below sum w x^2.
struct SymSums {
  float sxq = 0, sqq = 0;
  double gain() const { return sqq > 0 ? double(sxq) * sxq / sqq : 0.0; }
};

SymSums symmetric_sums(const float* x, const float* w, int n, float iscale, V8 lo, V8 hi) {
  const V8 is = splat(iscale);
  V8 a = {}, b = {};
  for (int i = 0; i < n; i += 8) {
    const V8 xv = load8(x + i);
    const V8 r = round_clamped(is * xv, lo, hi);
    const V8 wr = load8(w + i) * r;
    a += wr * xv;
    b += wr * r;
  }
  return {hsum(a), hsum(b)};
}

/// Weighted moments of a group that do not depend on the codes.
struct Moments {
  float sw = 0, sx = 0, sxx = 0;
};

/// Least-squares (scale, offset) for the codes round((x - base) * iscale) in [0, top], and
/// its error (in closed form from the moments: sum w (s q + m - x)^2 expanded).
AffineFit affine_candidate(const float* x, const float* w, int n, float iscale, float base,
                           float top, const Moments& mo, bool offset_nonpositive) {
  const V8 is = splat(iscale), vb = splat(base), lo = V8{}, hi = splat(top);
  V8 a = {}, b = {}, c = {};
  for (int i = 0; i < n; i += 8) {
    const V8 xv = load8(x + i);
    const V8 q = round_clamped((xv - vb) * is, lo, hi);
    const V8 wq = load8(w + i) * q;
    a += wq;
    b += wq * q;
    c += wq * xv;
  }
  const float sl = hsum(a), sll = hsum(b), sxl = hsum(c);
  double scale = 0, offset = 0;
  const double det = double(mo.sw) * sll - double(sl) * sl;
  if (det > 0) {
    scale = (double(mo.sw) * sxl - double(mo.sx) * sl) / det;
    offset = (double(sll) * mo.sx - double(sl) * sxl) / det;
  } else {
    offset = mo.sw > 0 ? double(mo.sx) / mo.sw : 0;  // all codes equal: the mean
  }
  if (offset_nonpositive && offset > 0) {
    offset = 0;
    scale = sll > 0 ? double(sxl) / sll : 0;
  }
  AffineFit f;
  f.scale = static_cast<float>(scale);
  f.offset = static_cast<float>(offset);
  const double s = f.scale, m = f.offset;
  const double err = s * s * sll + 2 * s * m * sl + m * m * mo.sw - 2 * s * sxl -
                     2 * m * mo.sx + mo.sxx;
  f.error = static_cast<float>(std::fmax(err, 0.0));
  return f;
}

}  // namespace

float fit_symmetric(const float* x, const float* w_in, int n, int qmin, int qmax, int8_t* q,
                    float* error) {
  const float* w = weights_or_ones(w_in);
  float amax = 0, xm = 0;  // largest magnitude and its signed value
  double sxx = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      xm = x[i];
    }
    sxx += w[i] * double(x[i]) * x[i];
  }
  if (amax == 0.0f) {
    std::memset(q, 0, static_cast<size_t>(n));
    if (error) *error = 0;
    return 0.0f;
  }
  const V8 lo = splat(static_cast<float>(qmin)), hi = splat(static_cast<float>(qmax));
  SymSums best;
  float best_iscale = 0;
  auto consider = [&](float iscale) {
    const SymSums s = symmetric_sums(x, w, n, iscale, lo, hi);
    if (best_iscale == 0 || s.gain() > best.gain()) {
      best = s;
      best_iscale = iscale;
      return true;
    }
    return false;
  };
  // Where the extreme value xm lands: on the code of largest magnitude, and (for lopsided
  // ranges such as [-8, 7]) also on the other side's end; each with a grid of inverse scales
  // from 1.2 codes short of that end (clipping xm often pays at 4 bits) to 0.6 beyond it.
  struct Side {
    float target, sign;  // iscale * xm = sign * target
  };
  Side sides[2] = {{static_cast<float>(qmax), 1.0f}, {static_cast<float>(-qmin), -1.0f}};
  const int nsides = -qmin == qmax ? 1 : 2;
  if (-qmin > qmax) std::swap(sides[0], sides[1]);
  for (int side = 0; side < nsides; ++side) {
    for (int k = -12; k <= 6; ++k) {
      const float t = sides[side].target + 0.1f * static_cast<float>(k);
      if (t > 0.5f) consider(sides[side].sign * t / xm);
    }
  }
  float scale = best.sqq > 0 ? best.sxq / best.sqq : 0.0f;
  // Lloyd refinement: nearest codes for the current scale, then the least-squares scale.
  for (int iter = 0; iter < 8 && scale != 0.0f; ++iter) {
    if (!consider(1.0f / scale)) break;
    scale = best.sxq / best.sqq;
  }
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(round_code(best_iscale * x[i], qmin, qmax));
  if (error) *error = static_cast<float>(std::fmax(sxx - best.gain(), 0.0));
  return scale;
}

AffineFit fit_affine(const float* x, const float* w_in, int n, int qmax, bool offset_nonpositive,
                     float rmin, float rdelta, int nstep, uint8_t* q) {
  const float* w = weights_or_ones(w_in);
  float lo = x[0], hi = x[0];
  Moments mo;
  for (int i = 0; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
    mo.sw += w[i];
    mo.sx += w[i] * x[i];
    mo.sxx += w[i] * x[i] * x[i];
  }
  if (offset_nonpositive && lo > 0) lo = 0;
  if (hi == lo) {  // constant group (or zeros): codes 0, offset = the value
    std::memset(q, 0, static_cast<size_t>(n));
    AffineFit f;
    f.offset = lo;
    return f;
  }
  const float top = static_cast<float>(qmax);
  AffineFit best;
  float best_iscale = 0, best_base = 0;
  auto consider = [&](float iscale, float base) {
    const AffineFit f = affine_candidate(x, w, n, iscale, base, top, mo, offset_nonpositive);
    if (best_iscale == 0 || f.error < best.error) {
      best = f;
      best_iscale = iscale;
      best_base = base;
      return true;
    }
    return false;
  };
  consider(top / (hi - lo), lo);
  for (int k = 0; k <= nstep; ++k)
    consider((top + rmin + rdelta * static_cast<float>(k)) / (hi - lo), lo);
  // Lloyd refinement from the best candidate.
  for (int iter = 0; iter < 8 && best.scale > 0; ++iter)
    if (!consider(1.0f / best.scale, best.offset)) break;
  for (int i = 0; i < n; ++i)
    q[i] = static_cast<uint8_t>(round_code(best_iscale * (x[i] - best_base), 0, qmax));
  return best;
}

}  // namespace llmserve::quant
