// Private to gemm_avx2.cc / gemm_avx512.cc: the GEMM kernels written once over a vector
// traits class V (AVX2: __m256, AVX-512: __m512), instantiated by each ISA's translation unit
// with that ISA's compiler flags. Everything here has internal linkage (anonymous namespace)
// so the two instantiations never meet at link time. The including file includes
// <immintrin.h>, "common/dtype.h" and "kernels/cpu/gemm_kernels.h" first and defines V.
//
// V provides: vec, L (lanes), zero, load, load_n (first n < L lanes, rest 0), loadw<D> /
// loadw_n<D> (L elements of a W row in dtype D converted to f32), store, store_n, fma, add,
// mul, set1, reduce4 (four horizontal sums -> out[0..3]), exp.

namespace llmserve::gemm_detail {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------------------
// Small M: dot-product orientation. A tile of kDotRows W rows x MB x rows; each W vector is
// loaded (and converted) once and multiplied into all MB rows; 16-lane (8-lane) partial sums
// are reduced at the end.
template <class V, DType D, int MB>
void dot_tile(const float* x, int64_t ldx, const void* const* rows, int64_t k, float* out) {
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
               float* out) {
  static_assert(V::kDotMaxMb <= 6);
  switch (mb) {
    case 1: return dot_tile<V, D, 1>(x, ldx, rows, k, out);
    case 2: return dot_tile<V, D, (V::kDotMaxMb >= 2 ? 2 : 1)>(x, ldx, rows, k, out);
    case 3: return dot_tile<V, D, (V::kDotMaxMb >= 3 ? 3 : 1)>(x, ldx, rows, k, out);
    case 4: return dot_tile<V, D, (V::kDotMaxMb >= 4 ? 4 : 1)>(x, ldx, rows, k, out);
    case 5: return dot_tile<V, D, (V::kDotMaxMb >= 5 ? 5 : 1)>(x, ldx, rows, k, out);
    default: return dot_tile<V, D, (V::kDotMaxMb >= 6 ? 6 : 1)>(x, ldx, rows, k, out);
  }
}

template <class V>
void dot(DType dtype, int mb, const float* x, int64_t ldx, const void* const* rows, int64_t k,
         float* out) {
  switch (dtype) {
    case DType::kF32: return dot_dtype<V, DType::kF32>(mb, x, ldx, rows, k, out);
    case DType::kF16: return dot_dtype<V, DType::kF16>(mb, x, ldx, rows, k, out);
    case DType::kBF16: return dot_dtype<V, DType::kBF16>(mb, x, ldx, rows, k, out);
  }
}

// ---------------------------------------------------------------------------------------
// Large M: GotoBLAS-style microkernel over packed panels. x packed [kc][MR], W packed
// [kc][NV * L] in float32; MR x NV vector accumulators; each x element is broadcast once per
// k and multiplied into NV W vectors.
template <class V, int MR, int NV>
void micro(const float* xp, const float* wp, int64_t kc, float* c, int64_t ldc, int m_valid,
           int n_valid, bool accumulate) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  vec acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = V::zero();
  }
  for (int64_t k = 0; k < kc; ++k) {
    vec b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = V::load(wp + j * L);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vec a = V::set1(xp[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fma(a, b[j], acc[i][j]);
    }
    xp += MR;
    wp += NV * L;
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

template <class V, int MR>
void pack_x(const float* x, int64_t ldx, int64_t m_valid, int64_t k, float* dst) {
  for (int64_t i = 0; i < MR; ++i) {
    if (i < m_valid) {
      const float* xi = x + i * ldx;
      for (int64_t kk = 0; kk < k; ++kk) dst[kk * MR + i] = xi[kk];
    } else {
      for (int64_t kk = 0; kk < k; ++kk) dst[kk * MR + i] = 0.0f;
    }
  }
}

template <DType D>
inline float scalar_w(const void* base, int64_t idx) {
  if constexpr (D == DType::kF32) {
    return static_cast<const float*>(base)[idx];
  } else if constexpr (D == DType::kBF16) {
    // Local conversions (not dtype.h's inline functions: an out-of-line copy compiled with
    // AVX-512 enabled must never be picked by the linker for baseline code).
    const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(base)[idx]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  } else {
    return _cvtsh_ss(static_cast<const uint16_t*>(base)[idx]);
  }
}

inline const void* advance(const void* base, DType d, int64_t elems) {
  return static_cast<const uint8_t*>(base) + elems * static_cast<int64_t>(dtype_size(d));
}

template <class V, int NR, DType D>
void pack_w_dtype(const void* w, int64_t ldw, int64_t n_valid, int64_t k0, int64_t kc,
                  float* dst) {
  for (int64_t j = 0; j < NR; ++j) {
    if (j < n_valid) {
      const void* row = advance(w, D, j * ldw + k0);
      for (int64_t kk = 0; kk < kc; ++kk) dst[kk * NR + j] = scalar_w<D>(row, kk);
    } else {
      for (int64_t kk = 0; kk < kc; ++kk) dst[kk * NR + j] = 0.0f;
    }
  }
}

template <class V, int NR>
void pack_w(DType dtype, const void* w, int64_t ldw, int64_t n_valid, int64_t k0, int64_t kc,
            float* dst) {
  switch (dtype) {
    case DType::kF32: return pack_w_dtype<V, NR, DType::kF32>(w, ldw, n_valid, k0, kc, dst);
    case DType::kF16: return pack_w_dtype<V, NR, DType::kF16>(w, ldw, n_valid, k0, kc, dst);
    case DType::kBF16: return pack_w_dtype<V, NR, DType::kBF16>(w, ldw, n_valid, k0, kc, dst);
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
  k.pack_x = &pack_x<V, V::kMr>;
  k.pack_w = &pack_w<V, V::kNv * V::L>;
  k.micro = &micro<V, V::kMr, V::kNv>;
  k.silu_mul = &silu_mul<V>;
  return k;
}

}  // namespace
}  // namespace llmserve::gemm_detail
