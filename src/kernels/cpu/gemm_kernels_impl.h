// Private to gemm_avx2.cc / gemm_avx512.cc: the GEMM kernels written once over a vector
// traits class V (AVX2: __m256, AVX-512: __m512), instantiated by each ISA's translation unit
// with that ISA's compiler flags. Everything here has internal linkage (anonymous namespace)
// so the two instantiations never meet at link time. The including file includes
// <immintrin.h>, "common/dtype.h" and "kernels/cpu/gemm_kernels.h" first and defines V.
//
// V provides: vec, L (lanes), zero, load, load_n (first n < L lanes, rest 0), loadw<D> /
// loadw_n<D> (L elements of a row-major W row in dtype D converted to f32), load_panel<D>
// (the kNv vectors of one prepared-panel row, sub-panel `sub`), store, store_n, fma, fms
// (a b - c), add, sub, mul, div, min, max, abs, select_neg (x's sign bit set ? a : b), set1,
// round, pow2i, reduce4 (four horizontal sums -> out[0..3]), transpose, exp.

namespace llmserve::gemm_detail {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline const void* advance(const void* base, DType d, int64_t elems) {
  return static_cast<const uint8_t*>(base) + elems * static_cast<int64_t>(dtype_size(d));
}

// ---------------------------------------------------------------------------------------
// Small M: dot-product orientation. A tile of kDotRows W rows x MB x rows; each W vector is
// loaded (and converted) once and multiplied into all MB rows; 16-lane (8-lane) partial sums
// are reduced at the end.
template <class V, DType D, int MB>
void dot_tile(const float* x, int64_t ldx, const void* const* rows, int64_t k, int64_t pf,
              float* out) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  static_assert(kDotRows == 4);
  vec acc[MB][4];
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i) {
    acc[i][0] = V::zero();
    acc[i][1] = V::zero();
    acc[i][2] = V::zero();
    acc[i][3] = V::zero();
  }
  const void* r0 = rows[0];
  const void* r1 = rows[1];
  const void* r2 = rows[2];
  const void* r3 = rows[3];
  int64_t kk = 0;
  for (; kk + L <= k; kk += L) {
    if (pf > 0) {
      _mm_prefetch(static_cast<const char*>(advance(r0, D, kk + pf)), _MM_HINT_T0);
      _mm_prefetch(static_cast<const char*>(advance(r1, D, kk + pf)), _MM_HINT_T0);
      _mm_prefetch(static_cast<const char*>(advance(r2, D, kk + pf)), _MM_HINT_T0);
      _mm_prefetch(static_cast<const char*>(advance(r3, D, kk + pf)), _MM_HINT_T0);
    }
    const vec w0 = V::template loadw<D>(r0, kk);
    const vec w1 = V::template loadw<D>(r1, kk);
    const vec w2 = V::template loadw<D>(r2, kk);
    const vec w3 = V::template loadw<D>(r3, kk);
#pragma GCC unroll 8
    for (int i = 0; i < MB; ++i) {
      const vec xv = V::load(x + i * ldx + kk);
      acc[i][0] = V::fma(xv, w0, acc[i][0]);
      acc[i][1] = V::fma(xv, w1, acc[i][1]);
      acc[i][2] = V::fma(xv, w2, acc[i][2]);
      acc[i][3] = V::fma(xv, w3, acc[i][3]);
    }
  }
  if (kk < k) {
    const int n = static_cast<int>(k - kk);
    const vec w0 = V::template loadw_n<D>(r0, kk, n);
    const vec w1 = V::template loadw_n<D>(r1, kk, n);
    const vec w2 = V::template loadw_n<D>(r2, kk, n);
    const vec w3 = V::template loadw_n<D>(r3, kk, n);
#pragma GCC unroll 8
    for (int i = 0; i < MB; ++i) {
      const vec xv = V::load_n(x + i * ldx + kk, n);
      acc[i][0] = V::fma(xv, w0, acc[i][0]);
      acc[i][1] = V::fma(xv, w1, acc[i][1]);
      acc[i][2] = V::fma(xv, w2, acc[i][2]);
      acc[i][3] = V::fma(xv, w3, acc[i][3]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i) V::reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3], out + 4 * i);
}

template <class V, DType D>
void dot_dtype(int mb, const float* x, int64_t ldx, const void* const* rows, int64_t k,
               int64_t pf, float* out) {
  static_assert(V::kDotMaxMb <= 6);
  switch (mb) {
    case 1: return dot_tile<V, D, 1>(x, ldx, rows, k, pf, out);
    case 2: return dot_tile<V, D, (V::kDotMaxMb >= 2 ? 2 : 1)>(x, ldx, rows, k, pf, out);
    case 3: return dot_tile<V, D, (V::kDotMaxMb >= 3 ? 3 : 1)>(x, ldx, rows, k, pf, out);
    case 4: return dot_tile<V, D, (V::kDotMaxMb >= 4 ? 4 : 1)>(x, ldx, rows, k, pf, out);
    case 5: return dot_tile<V, D, (V::kDotMaxMb >= 5 ? 5 : 1)>(x, ldx, rows, k, pf, out);
    default: return dot_tile<V, D, (V::kDotMaxMb >= 6 ? 6 : 1)>(x, ldx, rows, k, pf, out);
  }
}

template <class V>
void dot(DType dtype, int mb, const float* x, int64_t ldx, const void* const* rows, int64_t k,
         int64_t pf, float* out) {
  switch (dtype) {
    case DType::kF32: return dot_dtype<V, DType::kF32>(mb, x, ldx, rows, k, pf, out);
    case DType::kF16: return dot_dtype<V, DType::kF16>(mb, x, ldx, rows, k, pf, out);
    case DType::kBF16: return dot_dtype<V, DType::kBF16>(mb, x, ldx, rows, k, pf, out);
    default: LLMS_CHECK(false, "float GEMM kernel called with {}", dtype_name(dtype));
  }
}

/// Prefetches the cache lines of [p, p + bytes) (bytes a multiple of 64, p line-aligned when
/// the panels are).
inline void prefetch_lines(const uint8_t* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
}

// ---------------------------------------------------------------------------------------
// GotoBLAS-style microkernel: x packed [kc][MR] f32, W micro-panel (kc x NV*L) in dtype D with
// row stride ldw; MR x NV vector accumulators; each x element is broadcast once per k and
// multiplied into NV W vectors (converted in registers when D is 16-bit).
// Batch invariance: every output element is one FMA chain over k = 0..kc-1 in order, started
// from zero, whatever MR, NV, m_valid or the caller's blocking: its bits do not depend on how
// many rows share the call (no k-parity split of the accumulators for small MR, which would
// reassociate the sum for M <= 3 only).
template <class V, DType D, int MR, int NV>
void micro(const float* xp, const void* w, int sub, int64_t ldw, int64_t kc, float* c,
           int64_t ldc, int m_valid, int n_valid, bool accumulate, int64_t pf_bytes) {
  static_assert(NV == V::kNv);
  using vec = typename V::vec;
  constexpr int L = V::L;
  constexpr int64_t esize = D == DType::kF32 ? 4 : 2;
  vec acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = V::zero();
  }
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t wstep = ldw * esize;
  int64_t k = 0;
  for (; k < kc; ++k) {
    if (pf_bytes > 0) prefetch_lines(wb + pf_bytes, wstep);
    vec b[NV];
    V::template load_panel<D>(wb, sub, b);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vec a = V::set1(xp[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fma(a, b[j], acc[i][j]);
    }
    xp += MR;
    wb += wstep;
  }
  if (m_valid == MR && n_valid == NV * L) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        vec v = acc[i][j];
        if (accumulate) v = V::add(v, V::load(ci + j * L));
        V::store(ci + j * L, v);
      }
    }
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    if (i >= m_valid) break;
    float* ci = c + i * ldc;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const int n = n_valid - j * L;
      if (n <= 0) break;
      vec v = acc[i][j];
      if (n >= L) {
        if (accumulate) v = V::add(v, V::load(ci + j * L));
        V::store(ci + j * L, v);
      } else {
        if (accumulate) v = V::add(v, V::load_n(ci + j * L, n));
        V::store_n(ci + j * L, v, n);
      }
    }
  }
}

// Small M (MR <= 3): two prepared panels (panel_stride bytes apart, both fully valid) at once,
// so there are twice as many independent FMA chains (the loads, not the FMA latency, set
// the pace). Each output element is still one FMA chain over k in order, so the result
// equals two micro() calls bit for bit (batch invariance: splitting the k range across
// accumulators instead would reassociate the sum for small M only).
template <class V, DType D, int MR>
void micro2(const float* xp, const void* w, int64_t panel_stride, int sub, int64_t ldw,
            int64_t kc, float* c, int64_t ldc, int m_valid, bool accumulate, int64_t pf_bytes) {
  constexpr int NV = V::kNv;
  using vec = typename V::vec;
  constexpr int L = V::L;
  constexpr int64_t esize = D == DType::kF32 ? 4 : 2;
  vec acc[MR][2 * NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < 2 * NV; ++j) acc[i][j] = V::zero();
  }
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t wstep = ldw * esize;
  for (int64_t k = 0; k < kc; ++k) {
    if (pf_bytes > 0) {
      prefetch_lines(wb + pf_bytes, wstep);
      prefetch_lines(wb + panel_stride + pf_bytes, wstep);
    }
    vec b[2 * NV];
    V::template load_panel<D>(wb, sub, b);
    V::template load_panel<D>(wb + panel_stride, sub, b + NV);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vec a = V::set1(xp[i]);
#pragma GCC unroll 8
      for (int j = 0; j < 2 * NV; ++j) acc[i][j] = V::fma(a, b[j], acc[i][j]);
    }
    xp += MR;
    wb += wstep;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    if (i >= m_valid) break;
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      float* ci = c + i * ldc + p * kPanel;
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        vec v = acc[i][p * NV + j];
        if (accumulate) v = V::add(v, V::load(ci + j * L));
        V::store(ci + j * L, v);
      }
    }
  }
}

template <class V>
void micro2_any(DType wtype, int mr, const float* xp, const void* w, int64_t panel_stride,
                int sub, int64_t ldw, int64_t kc, float* c, int64_t ldc, int m_valid,
                bool accumulate, int64_t pf_bytes) {
  auto run = [&]<DType D>() {
    switch (mr) {
      case 1: return micro2<V, D, 1>(xp, w, panel_stride, sub, ldw, kc, c, ldc, m_valid, accumulate, pf_bytes);
      case 2: return micro2<V, D, 2>(xp, w, panel_stride, sub, ldw, kc, c, ldc, m_valid, accumulate, pf_bytes);
      default: return micro2<V, D, 3>(xp, w, panel_stride, sub, ldw, kc, c, ldc, m_valid, accumulate, pf_bytes);
    }
  };
  switch (wtype) {
    case DType::kF32: return run.template operator()<DType::kF32>();
    case DType::kF16: return run.template operator()<DType::kF16>();
    case DType::kBF16: return run.template operator()<DType::kBF16>();
    default: LLMS_CHECK(false, "float GEMM kernel called with {}", dtype_name(wtype));
  }
}

template <class V, DType D, int MR>
void micro_mr(int mr, const float* xp, const void* w, int sub, int64_t ldw, int64_t kc,
              float* c, int64_t ldc, int m_valid, int n_valid, bool accumulate,
              int64_t pf_bytes) {
  if constexpr (MR > 1) {
    if (mr < MR) {
      return micro_mr<V, D, MR - 1>(mr, xp, w, sub, ldw, kc, c, ldc, m_valid, n_valid,
                                    accumulate, pf_bytes);
    }
  }
  micro<V, D, MR, V::kNv>(xp, w, sub, ldw, kc, c, ldc, m_valid, n_valid, accumulate, pf_bytes);
}

template <class V>
void micro_any(DType wtype, int mr, const float* xp, const void* w, int sub, int64_t ldw,
               int64_t kc, float* c, int64_t ldc, int m_valid, int n_valid, bool accumulate,
               int64_t pf_bytes) {
  switch (wtype) {
    case DType::kF32:
      return micro_mr<V, DType::kF32, V::kMr>(mr, xp, w, sub, ldw, kc, c, ldc, m_valid, n_valid,
                                              accumulate, pf_bytes);
    case DType::kF16:
      return micro_mr<V, DType::kF16, V::kMr>(mr, xp, w, sub, ldw, kc, c, ldc, m_valid, n_valid,
                                              accumulate, pf_bytes);
    case DType::kBF16:
      return micro_mr<V, DType::kBF16, V::kMr>(mr, xp, w, sub, ldw, kc, c, ldc, m_valid,
                                               n_valid, accumulate, pf_bytes);
    default: LLMS_CHECK(false, "float GEMM kernel called with {}", dtype_name(wtype));
  }
}

/// dst[k][mr] = x[0:m_valid, k] (zero rows past m_valid): L x L register transposes.
template <class V>
void pack_x(const float* x, int64_t ldx, int64_t m_valid, int64_t k, int mr, float* dst) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  if (mr == 1) {  // one row (decode): dst[k][1] is the row itself; the L x L transposes
                  // and one-lane stores below took 37 % of a [64, 1024] one-row GEMM
    if (m_valid >= 1) {
      std::memcpy(dst, x, static_cast<size_t>(k) * sizeof(float));
    } else {
      std::memset(dst, 0, static_cast<size_t>(k) * sizeof(float));
    }
    return;
  }
  for (int64_t k0 = 0; k0 < k; k0 += L) {
    const int kn = static_cast<int>(min64(L, k - k0));
    vec r[L];
#pragma GCC unroll 16
    for (int i = 0; i < L; ++i) {
      if (i < m_valid && i < mr) {
        r[i] = kn == L ? V::load(x + i * ldx + k0) : V::load_n(x + i * ldx + k0, kn);
      } else {
        r[i] = V::zero();
      }
    }
    V::transpose(r);
    for (int t = 0; t < kn; ++t) V::store_n(dst + (k0 + t) * mr, r[t], mr);
  }
}

/// dst[kc][kPanel] = W[0:n_valid, k0:k0+kc] in float32 (zero columns past n_valid): rows are
/// loaded L elements at a time (converted on load) and transposed in registers.
template <class V, DType D>
void pack_w_dtype(const void* w, int64_t ldw, int64_t n_valid, int64_t k0, int64_t kc,
                  float* dst) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  static_assert(kPanel % L == 0);
  for (int64_t kb = 0; kb < kc; kb += L) {
    const int kn = static_cast<int>(min64(L, kc - kb));
#pragma GCC unroll 4
    for (int g = 0; g < kPanel / L; ++g) {
      vec r[L];
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) {
        const int64_t row = g * L + i;
        if (row < n_valid) {
          const void* p = advance(w, D, row * ldw);
          r[i] = kn == L ? V::template loadw<D>(p, k0 + kb)
                         : V::template loadw_n<D>(p, k0 + kb, kn);
        } else {
          r[i] = V::zero();
        }
      }
      V::transpose(r);
      for (int t = 0; t < kn; ++t) V::store(dst + (kb + t) * kPanel + g * L, r[t]);
    }
  }
}

template <class V>
void pack_w(DType dtype, const void* w, int64_t ldw, int64_t n_valid, int64_t k0, int64_t kc,
            float* dst) {
  switch (dtype) {
    case DType::kF32: return pack_w_dtype<V, DType::kF32>(w, ldw, n_valid, k0, kc, dst);
    case DType::kF16: return pack_w_dtype<V, DType::kF16>(w, ldw, n_valid, k0, kc, dst);
    case DType::kBF16: return pack_w_dtype<V, DType::kBF16>(w, ldw, n_valid, k0, kc, dst);
    default: LLMS_CHECK(false, "float GEMM kernel called with {}", dtype_name(dtype));
  }
}

/// dst[kc][kPanel] (float32, natural column order) from kc rows of a prepared panel.
template <class V, DType D>
void convert_dtype(const void* src, int64_t kc, float* dst) {
  using vec = typename V::vec;
  constexpr int L = V::L, NV = V::kNv;
  constexpr int64_t row_bytes = kPanel * (D == DType::kF32 ? 4 : 2);
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t k = 0; k < kc; ++k, p += row_bytes, dst += kPanel) {
#pragma GCC unroll 2
    for (int sub = 0; sub < kPanel / (NV * L); ++sub) {
      vec b[NV];
      V::template load_panel<D>(p, sub, b);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) V::store(dst + sub * NV * L + j * L, b[j]);
    }
  }
}

template <class V>
void convert(DType dtype, const void* src, int64_t kc, float* dst) {
  switch (dtype) {
    case DType::kF32: return convert_dtype<V, DType::kF32>(src, kc, dst);
    case DType::kF16: return convert_dtype<V, DType::kF16>(src, kc, dst);
    case DType::kBF16: return convert_dtype<V, DType::kBF16>(src, kc, dst);
    default: LLMS_CHECK(false, "float GEMM kernel called with {}", dtype_name(dtype));
  }
}

// ---------------------------------------------------------------------------------------
template <class V>
void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const vec one = V::set1(1.0f);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const vec gv = V::load(g + i);
    const vec e = V::exp(V::mul(gv, V::set1(-1.0f)));
    V::store(out + i, V::mul(V::div(gv, V::add(one, e)), V::load(u + i)));
  }
  if (i < n) {
    const int r = static_cast<int>(n - i);
    const vec gv = V::load_n(g + i, r);
    const vec e = V::exp(V::mul(gv, V::set1(-1.0f)));
    V::store_n(out + i, V::mul(V::div(gv, V::add(one, e)), V::load_n(u + i, r)), r);
  }
}

// gelu_tanh(x) = 0.5 x (1 + tanh(w / 2)) = x sigmoid(w) = x / (1 + e^-w), w = 2 sqrt(2/pi)
// (x + 0.044715 x^3) (ops.h gelu_tanh_mul). w is odd and increasing in x, so with
// t = e^-|w| = 2^-y in (0, 1], y = |w| log2(e) = B1 |x| + B3 |x|^3: x >= 0 gives x / (1 + t),
// x < 0 gives x t / (1 + t) (no cancellation). For x << 0 the result is proportional to 2^-y
// with y up to ~126, and one rounding of y would cost |y| 2^-24 relative (~100 ulp), so y is
// kept as a float pair hi + lo (FMA-exact products, a two-sum); 2^-y = 2^-n 2^r with
// n = round(hi) and r = (n - hi) - lo in [-0.5, 0.5] by Cephes' exp2f polynomial (~2 ulp);
// 2^-n is applied in two factors so that results below 2^-126 underflow gradually (one
// rounding). |x| is clamped at 64 (t = 0 long before), so no inf or NaN for finite x.
template <class V>
typename V::vec gelu_tanh(typename V::vec x) {
  using vec = typename V::vec;
  constexpr double kB1 = 2.0 * 0.797884560802865355879892 * 1.442695040888963407359924;
  constexpr double kB3 = kB1 * 0.044715;
  constexpr float b1h = static_cast<float>(kB1), b1l = static_cast<float>(kB1 - b1h);
  constexpr float b3h = static_cast<float>(kB3), b3l = static_cast<float>(kB3 - b3h);
  const vec ax = V::min(V::abs(x), V::set1(64.0f));
  const vec a2 = V::mul(ax, ax), a2l = V::fms(ax, ax, a2);
  const vec a3 = V::mul(a2, ax), a3l = V::fma(a2l, ax, V::fms(a2, ax, a3));
  const vec q = V::mul(V::set1(b1h), ax);
  const vec ql = V::fma(V::set1(b1l), ax, V::fms(V::set1(b1h), ax, q));
  const vec p = V::mul(V::set1(b3h), a3);
  const vec pl = V::fma(V::set1(b3l), a3, V::fma(V::set1(b3h), a3l, V::fms(V::set1(b3h), a3, p)));
  const vec s = V::add(p, q), bv = V::sub(s, p);
  const vec sl = V::add(V::add(V::sub(p, V::sub(s, bv)), V::sub(q, bv)), V::add(pl, ql));
  const vec hi = V::min(s, V::set1(200.0f));  // 2^-200: 0 after the scaling below
  const vec n = V::round(hi);
  const vec r = V::sub(V::sub(n, hi), sl);  // n - hi is exact
  vec e = V::set1(1.535336188319500e-4f);
  e = V::fma(e, r, V::set1(1.339887440266574e-3f));
  e = V::fma(e, r, V::set1(9.618437357674640e-3f));
  e = V::fma(e, r, V::set1(5.550332471162809e-2f));
  e = V::fma(e, r, V::set1(2.402264791363012e-1f));
  e = V::fma(e, r, V::set1(6.931472028550421e-1f));
  e = V::fma(e, r, V::set1(1.0f));
  // t = tn * 2^-n2 with tn = e 2^-n1 normal; x t as (x tn) 2^-n2 rounds once below 2^-126
  // (x clamped like |x|: below -64 the product is 0 either way; max(-64, NaN) is NaN).
  const vec n1 = V::min(n, V::set1(120.0f)), n2 = V::sub(n, n1);
  const vec tn = V::mul(e, V::pow2i(V::sub(V::zero(), n1))), sc = V::pow2i(V::sub(V::zero(), n2));
  const vec num = V::select_neg(x, V::mul(V::mul(V::max(V::set1(-64.0f), x), tn), sc), x);
  return V::div(num, V::add(V::set1(1.0f), V::mul(tn, sc)));
}

template <class V>
void gelu_tanh_mul(const float* g, const float* u, float* out, int64_t n) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const vec gv = V::load(g + i), uv = V::load(u + i);
    V::store(out + i, V::mul(gelu_tanh<V>(gv), uv));
  }
  if (i < n) {
    const int r = static_cast<int>(n - i);
    const vec gv = V::load_n(g + i, r), uv = V::load_n(u + i, r);
    V::store_n(out + i, V::mul(gelu_tanh<V>(gv), uv), r);
  }
}

/// Cephes-style expf on vectors (relative error ~2 ulp over the clamped range).
template <class V>
typename V::vec exp_poly(typename V::vec x) {
  using vec = typename V::vec;
  x = V::min(V::max(x, V::set1(-87.0f)), V::set1(88.0f));
  const vec fx = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  vec r = V::fma(fx, V::set1(-0.693359375f), x);
  r = V::fma(fx, V::set1(2.12194440e-4f), r);
  vec p = V::set1(1.9875691500E-4f);
  p = V::fma(p, r, V::set1(1.3981999507E-3f));
  p = V::fma(p, r, V::set1(8.3334519073E-3f));
  p = V::fma(p, r, V::set1(4.1665795894E-2f));
  p = V::fma(p, r, V::set1(1.6666665459E-1f));
  p = V::fma(p, r, V::set1(5.0000001201E-1f));
  p = V::fma(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  return V::mul(p, V::pow2i(fx));
}

template <class V>
GemmKernels make_kernels(const char* name) {
  GemmKernels k{};
  k.name = name;
  k.mr = V::kMr;
  k.nr = V::kNv * V::L;
  k.dot_max_mb = V::kDotMaxMb;
  k.dot = &dot<V>;
  k.pack_x = &pack_x<V>;
  k.pack_w = &pack_w<V>;
  k.convert = &convert<V>;
  k.micro = &micro_any<V>;
  k.micro2 = &micro2_any<V>;
  k.silu_mul = &silu_mul<V>;
  k.gelu_tanh_mul = &gelu_tanh_mul<V>;
  return k;
}

}  // namespace
}  // namespace llmserve::gemm_detail
