// Private to flash_avx2.cc / flash_avx512.cc: the flash-attention kernels written once over a
// vector traits class V (AVX2: __m256, AVX-512: __m512) and instantiated by each ISA's
// translation unit with that ISA's compiler flags. Everything has internal linkage (anonymous
// namespace) and calls no inline library functions, so the AVX-512 instantiation can never
// be picked by the linker for code that runs on an AVX2-only CPU.
//
// The including file includes <immintrin.h> and flash_kernels.h first and defines V with:
// vec, L (lanes), tile constants (kQkNi, kQkNj, kPvMi, kPvNd, kDecGb, kDecNd, kRows), zero,
// load, store, set1, fma, add, mul, max, exp2 (exp2(-inf) = 0), mask_after (lanes whose
// query position < kv position -> -inf), hmax, hsum, reduce_rows (L vectors of L lanes ->
// one vector of their L sums), loadkv<D> (L cache elements of dtype D as f32).
//
// Prefill orientation. Scores are computed transposed, S^T[j][i] for KV row j and query
// row i, with query rows in the vector lanes: the micro-kernel broadcasts K[j][d] and
// multiplies it into Q^T[d][i..i+L) (Q transposed once per work item), so the online softmax
// (running max m, running sum l per query row) is purely vertical: no horizontal reductions
// in the inner loops. O[i][d] += P^T[j][i] * V[j][d] broadcasts P and vectorises over d.
//
// Decode orientation. One query token, group rows per KV head: each K row is loaded once
// and dotted (vectorised over d) with every query head of its group; the L partial-sum
// vectors of L consecutive K rows are reduced together by a transpose-add tree.
#pragma once

#include <cstdint>
#include <cstring>

namespace llmserve::flash_detail {
namespace {

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }
inline float fmax_(float a, float b) { return a > b ? a : b; }
constexpr float kNegInf = -__builtin_inff();

inline float scalar_from(const void* base, DType d, int64_t idx) {
  if (d == DType::kF32) return static_cast<const float*>(base)[idx];
  const uint16_t h = static_cast<const uint16_t*>(base)[idx];
  if (d == DType::kBF16) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  }
  return _cvtsh_ss(h);
}

inline int64_t slot_offset(const KvSource& kv, int32_t p) {
  return (static_cast<int64_t>(kv.block_table[p / kv.block_size]) * kv.block_size +
          p % kv.block_size) * kv.slot_stride;
}

// Copies one head_dim row at element offset `off` of a cache tensor into dst as f32,
// zero-padded to hdp (a multiple of L).
template <class V>
void convert_row(const void* base, DType d, int64_t off, int32_t hd, int32_t hdp, float* dst) {
  constexpr int L = V::L;
  int32_t i = 0;
  if (d == DType::kF32) {
    for (; i + L <= hd; i += L) V::store(dst + i, V::template loadkv<DType::kF32>(base, off + i));
  } else if (d == DType::kBF16) {
    for (; i + L <= hd; i += L) V::store(dst + i, V::template loadkv<DType::kBF16>(base, off + i));
  } else {
    for (; i + L <= hd; i += L) V::store(dst + i, V::template loadkv<DType::kF16>(base, off + i));
  }
  for (; i < hd; ++i) dst[i] = scalar_from(base, d, off + i);
  for (; i < hdp; ++i) dst[i] = 0.0f;
}

// ---------------------------------------------------------------------------------------
// Prefill micro-kernels.

// S^T[j][i0 + 0..NI*L) for NJ K rows: acc[j][i] += K[j][d] * Q^T[d][i], d < hd.
template <class V, int NI, int NJ>
void qk_block(const float* qt, int64_t ldq, const float* const* krow, int32_t hd, float* s,
              int64_t lds) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  vec acc[NJ][NI];
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NI; ++i) acc[j][i] = V::zero();
  }
  const float* kp[NJ];
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) kp[j] = krow[j];
  for (int32_t d = 0; d < hd; ++d) {
    vec qv[NI];
#pragma GCC unroll 4
    for (int i = 0; i < NI; ++i) qv[i] = V::load(qt + d * ldq + i * L);
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) {
      const vec b = V::set1(kp[j][d]);
#pragma GCC unroll 4
      for (int i = 0; i < NI; ++i) acc[j][i] = V::fma(b, qv[i], acc[j][i]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NI; ++i) V::store(s + j * lds + i * L, acc[j][i]);
  }
}

// O[mi][d0 + 0..ND*L) += sum_j P(mi, j) * V[j][d0 + ...], P(mi, j) = p[mi * p_rs + j * p_js].
template <class V, DType D, int MI, int ND>
void pv_block(const float* p, int64_t p_rs, int64_t p_js, const void* const* vrow, int32_t bc,
              int32_t d0, float* o, int64_t ldo) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  vec acc[MI][ND];
#pragma GCC unroll 8
  for (int m = 0; m < MI; ++m) {
#pragma GCC unroll 4
    for (int n = 0; n < ND; ++n) acc[m][n] = V::load(o + m * ldo + n * L);
  }
  for (int32_t j = 0; j < bc; ++j) {
    vec vv[ND];
#pragma GCC unroll 4
    for (int n = 0; n < ND; ++n) vv[n] = V::template loadkv<D>(vrow[j], d0 + n * L);
    const float* pj = p + j * p_js;
#pragma GCC unroll 8
    for (int m = 0; m < MI; ++m) {
      const vec b = V::set1(pj[m * p_rs]);
#pragma GCC unroll 4
      for (int n = 0; n < ND; ++n) acc[m][n] = V::fma(b, vv[n], acc[m][n]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MI; ++m) {
#pragma GCC unroll 4
    for (int n = 0; n < ND; ++n) V::store(o + m * ldo + n * L, acc[m][n]);
  }
}

template <class V, DType D, int MI>
void pv_dispatch_nd(int nd, const float* p, int64_t p_rs, int64_t p_js, const void* const* vrow,
                    int32_t bc, int32_t d0, float* o, int64_t ldo) {
  constexpr int N = V::kPvNd;
  switch (nd) {
    case 1: return pv_block<V, D, MI, 1>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    case 2: return pv_block<V, D, MI, (N >= 2 ? 2 : 1)>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    case 3: return pv_block<V, D, MI, (N >= 3 ? 3 : 1)>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    default: return pv_block<V, D, MI, N>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
  }
}

// ---------------------------------------------------------------------------------------
// Prefill: one tile of query rows against its causal context, KV tiles of kPrefillKvTile.

struct PrefillLayout {
  int64_t qt, s, o, m, l, alpha, qpos, kbuf, vbuf, kptr, vptr, total;
};

template <class V>
PrefillLayout prefill_layout(int32_t rows, int32_t hd) {
  constexpr int64_t Bc = kPrefillKvTile, NJ = V::kQkNj;
  const int64_t rp = round_up(rows, V::L), hdp = round_up(hd, V::L);
  PrefillLayout y;
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t r = at;
    at += round_up(n, 16);
    return r;
  };
  y.qt = take(hd * rp);
  y.s = take((Bc + NJ) * rp);
  y.o = take(rp * hdp);
  y.m = take(rp);
  y.l = take(rp);
  y.alpha = take(rp);
  y.qpos = take(rp);
  y.kbuf = take(Bc * hdp);
  y.vbuf = take(Bc * hdp);
  y.kptr = take(2 * (Bc + NJ));  // pointers, two floats each
  y.vptr = take(2 * (Bc + NJ));
  y.total = at;
  return y;
}

template <class V>
int64_t prefill_scratch_floats(int32_t rows, int32_t head_dim) {
  return prefill_layout<V>(rows, head_dim).total;
}

template <class V>
void prefill(const PrefillTile& t, float* scratch) {
  using vec = typename V::vec;
  constexpr int L = V::L, NI = V::kQkNi, NJ = V::kQkNj, MI = V::kPvMi, ND = V::kPvNd;
  constexpr int32_t Bc = kPrefillKvTile;
  static_assert(L % MI == 0, "PV row block must divide the lane count");
  const int32_t G = t.group, hd = t.head_dim;
  const int32_t hdp = static_cast<int32_t>(round_up(hd, L)), nv = hdp / L;
  const int32_t R = t.num_tokens * G, Rp = static_cast<int32_t>(round_up(R, L));
  const PrefillLayout y = prefill_layout<V>(R, hd);
  float* qt = scratch + y.qt;
  float* s = scratch + y.s;
  float* o = scratch + y.o;
  float* m = scratch + y.m;
  float* l = scratch + y.l;
  float* alpha = scratch + y.alpha;
  float* qpos = scratch + y.qpos;
  float* kbuf = scratch + y.kbuf;
  float* vbuf = scratch + y.vbuf;
  const float** kp = reinterpret_cast<const float**>(scratch + y.kptr);
  const void** vp = reinterpret_cast<const void**>(scratch + y.vptr);
  const KvSource& kv = t.kv;
  const bool direct = kv.dtype == DType::kF32 && hd % L == 0;
  const int64_t head_off = static_cast<int64_t>(t.kv_head) * hd;

  // Q^T, pre-scaled into the log2 domain; padding rows are zero and sit at the last row's
  // position (they compute harmless finite values that are never written out).
  for (int32_t i = 0; i < Rp; ++i) {
    const int32_t ii = imin(i, R - 1);
    qpos[i] = static_cast<float>(t.first_pos + ii / G);
    m[i] = kNegInf;
    l[i] = 0.0f;
    if (i < R) {
      const float* qr = t.q + (i / G) * t.q_stride + (i % G) * hd;
      for (int32_t d = 0; d < hd; ++d) qt[static_cast<int64_t>(d) * Rp + i] = qr[d] * t.scale_log2;
    } else {
      for (int32_t d = 0; d < hd; ++d) qt[static_cast<int64_t>(d) * Rp + i] = 0.0f;
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(Rp) * hdp; ++i) o[i] = 0.0f;

  const int32_t kv_end = t.first_pos + t.num_tokens;  // last position + 1
  for (int32_t kv0 = 0; kv0 < kv_end; kv0 += Bc) {
    const int32_t bc = imin(Bc, kv_end - kv0);
    for (int32_t j = 0; j < bc; ++j) {
      const int64_t off = slot_offset(kv, kv0 + j) + head_off;
      if (direct) {
        kp[j] = static_cast<const float*>(kv.k) + off;
        vp[j] = static_cast<const float*>(kv.v) + off;
      } else {
        convert_row<V>(kv.k, kv.dtype, off, hd, hdp, kbuf + static_cast<int64_t>(j) * hdp);
        convert_row<V>(kv.v, kv.dtype, off, hd, hdp, vbuf + static_cast<int64_t>(j) * hdp);
        kp[j] = kbuf + static_cast<int64_t>(j) * hdp;
        vp[j] = vbuf + static_cast<int64_t>(j) * hdp;
      }
    }
    const int32_t bcn = static_cast<int32_t>(round_up(bc, NJ));
    for (int32_t j = bc; j < bcn; ++j) kp[j] = kp[0];

    // S^T = K Q^T for this KV tile.
    for (int32_t j0 = 0; j0 < bcn; j0 += NJ) {
      for (int32_t i0 = 0; i0 < Rp; i0 += NI * L) {
        float* sb = s + static_cast<int64_t>(j0) * Rp + i0;
        switch (imin(NI, (Rp - i0) / L)) {
          case 1: qk_block<V, 1, NJ>(qt + i0, Rp, kp + j0, hd, sb, Rp); break;
          case 2: qk_block<V, (NI >= 2 ? 2 : 1), NJ>(qt + i0, Rp, kp + j0, hd, sb, Rp); break;
          case 3: qk_block<V, (NI >= 3 ? 3 : 1), NJ>(qt + i0, Rp, kp + j0, hd, sb, Rp); break;
          default: qk_block<V, NI, NJ>(qt + i0, Rp, kp + j0, hd, sb, Rp); break;
        }
      }
    }

    // Online softmax, L query rows at a time. The first tile holds position 0, which every
    // query sees, so m is finite from then on; masked scores become exp2(-inf) = 0.
    const bool diag = kv0 + bc - 1 > t.first_pos;
    for (int32_t i = 0; i < Rp; i += L) {
      const vec m_old = V::load(m + i);
      vec mx = m_old;
      if (diag) {
        const vec qp = V::load(qpos + i);
        for (int32_t j = 0; j < bc; ++j) {
          float* sp = s + static_cast<int64_t>(j) * Rp + i;
          const vec x = V::mask_after(V::load(sp), qp, static_cast<float>(kv0 + j));
          V::store(sp, x);
          mx = V::max(mx, x);
        }
      } else {
        for (int32_t j = 0; j < bc; ++j) mx = V::max(mx, V::load(s + static_cast<int64_t>(j) * Rp + i));
      }
      vec sum = V::zero();
      for (int32_t j = 0; j < bc; ++j) {
        float* sp = s + static_cast<int64_t>(j) * Rp + i;
        const vec p = V::exp2(V::sub(V::load(sp), mx));
        V::store(sp, p);
        sum = V::add(sum, p);
      }
      const vec a = V::exp2(V::sub(m_old, mx));
      V::store(l + i, V::fma(V::load(l + i), a, sum));
      V::store(m + i, mx);
      V::store(alpha + i, a);
    }
    if (kv0 > 0) {
      for (int32_t i = 0; i < Rp; ++i) {
        if (alpha[i] == 1.0f) continue;
        const vec a = V::set1(alpha[i]);
        float* orow = o + static_cast<int64_t>(i) * hdp;
        for (int32_t d = 0; d < hdp; d += L) V::store(orow + d, V::mul(V::load(orow + d), a));
      }
    }

    // O += P V.
    for (int32_t i0 = 0; i0 < Rp; i0 += MI) {
      for (int32_t d0 = 0; d0 < nv; d0 += ND) {
        pv_dispatch_nd<V, DType::kF32, MI>(imin(ND, nv - d0), s + i0, 1, Rp, vp, bc, d0 * L,
                                          o + static_cast<int64_t>(i0) * hdp + d0 * L, hdp);
      }
    }
  }

  for (int32_t i = 0; i < R; ++i) {
    const float inv = 1.0f / l[i];
    const float* orow = o + static_cast<int64_t>(i) * hdp;
    float* dst = t.out + (i / G) * t.q_stride + (i % G) * hd;
    for (int32_t d = 0; d < hd; ++d) dst[d] = orow[d] * inv;
  }
}

// ---------------------------------------------------------------------------------------
// Decode: one query token, all KV heads, context [kv_begin, kv_end) in chunks of Bd rows.

constexpr int32_t kDecodeChunk = kPrefillKvTile;
constexpr int32_t kDecodeScoreGroup = 8;  // query heads per pass over a K row

struct DecodeLayout {
  int64_t qs, o, m, l, s, red, kbuf, vbuf, slot, kptr, vptr, total;
};

template <class V>
DecodeLayout decode_layout(int32_t n_kv, int32_t group, int32_t hd) {
  constexpr int64_t L = V::L, Bd = kDecodeChunk;
  const int64_t nh = static_cast<int64_t>(n_kv) * group, hdp = round_up(hd, L);
  DecodeLayout y;
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t r = at;
    at += round_up(n, 16);
    return r;
  };
  y.qs = take(nh * hdp);
  y.o = take(nh * hdp);
  y.m = take(nh);
  y.l = take(nh);
  y.s = take(group * Bd);
  y.red = take(kDecodeScoreGroup * L * L);
  y.kbuf = take(Bd * hdp);
  y.vbuf = take(Bd * hdp);
  y.slot = take(2 * Bd);
  y.kptr = take(2 * Bd);
  y.vptr = take(2 * Bd);
  y.total = at;
  return y;
}

template <class V>
int64_t decode_scratch_floats(int32_t n_kv, int32_t group, int32_t head_dim) {
  return decode_layout<V>(n_kv, group, head_dim).total;
}

// s[g][jb + 0..L) for GB query heads and the K rows kp[0..bcp) (bcp a multiple of L).
template <class V, DType D, int GB>
void decode_scores(const void* const* kp, int32_t bcp, const float* qs, int64_t hdp, int32_t nv,
                   float* s, float* red) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  for (int32_t jb = 0; jb < bcp; jb += L) {
    for (int jj = 0; jj < L; ++jj) {
      const void* kr = kp[jb + jj];
      vec acc[GB];
#pragma GCC unroll 8
      for (int g = 0; g < GB; ++g) acc[g] = V::zero();
      for (int32_t dv = 0; dv < nv; ++dv) {
        const vec k = V::template loadkv<D>(kr, dv * L);
#pragma GCC unroll 8
        for (int g = 0; g < GB; ++g) acc[g] = V::fma(k, V::load(qs + g * hdp + dv * L), acc[g]);
      }
#pragma GCC unroll 8
      for (int g = 0; g < GB; ++g) V::store(red + (g * L + jj) * L, acc[g]);
    }
#pragma GCC unroll 8
    for (int g = 0; g < GB; ++g) V::store(s + g * kDecodeChunk + jb, V::reduce_rows(red + g * L * L));
  }
}

template <class V, DType D>
void decode_head(const void* const* kp, const void* const* vp, int32_t bc, int32_t G, int32_t nv,
                 int64_t hdp, const float* qs, float* o, float* m, float* l, float* s,
                 float* red) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const int32_t bcp = static_cast<int32_t>(round_up(bc, L));
  for (int32_t g0 = 0; g0 < G; g0 += kDecodeScoreGroup) {
    const float* q = qs + g0 * hdp;
    float* sg = s + g0 * kDecodeChunk;
    switch (imin(kDecodeScoreGroup, G - g0)) {
      case 1: decode_scores<V, D, 1>(kp, bcp, q, hdp, nv, sg, red); break;
      case 2: decode_scores<V, D, 2>(kp, bcp, q, hdp, nv, sg, red); break;
      case 3: decode_scores<V, D, 3>(kp, bcp, q, hdp, nv, sg, red); break;
      case 4: decode_scores<V, D, 4>(kp, bcp, q, hdp, nv, sg, red); break;
      case 5: decode_scores<V, D, 5>(kp, bcp, q, hdp, nv, sg, red); break;
      case 6: decode_scores<V, D, 6>(kp, bcp, q, hdp, nv, sg, red); break;
      case 7: decode_scores<V, D, 7>(kp, bcp, q, hdp, nv, sg, red); break;
      default: decode_scores<V, D, 8>(kp, bcp, q, hdp, nv, sg, red); break;
    }
  }
  for (int32_t g = 0; g < G; ++g) {
    float* sr = s + g * kDecodeChunk;
    for (int32_t j = bc; j < bcp; ++j) sr[j] = kNegInf;
    vec mx = V::set1(kNegInf);
    for (int32_t j = 0; j < bcp; j += L) mx = V::max(mx, V::load(sr + j));
    const float m_old = m[g];
    const float m_new = fmax_(m_old, V::hmax(mx));
    const vec mv = V::set1(m_new);
    vec sum = V::zero();
    for (int32_t j = 0; j < bcp; j += L) {
      const vec p = V::exp2(V::sub(V::load(sr + j), mv));
      V::store(sr + j, p);
      sum = V::add(sum, p);
    }
    const float a = __builtin_exp2f(m_old - m_new);  // 0 on the first chunk (m_old = -inf)
    l[g] = l[g] * a + V::hsum(sum);
    m[g] = m_new;
    if (a != 1.0f) {
      const vec av = V::set1(a);
      float* og = o + g * hdp;
      for (int32_t d = 0; d < nv * L; d += L) V::store(og + d, V::mul(V::load(og + d), av));
    }
  }
  constexpr int GB = V::kDecGb, ND = V::kDecNd;
  for (int32_t g0 = 0; g0 < G; g0 += GB) {
    const int gb = imin(GB, G - g0);
    for (int32_t d0 = 0; d0 < nv; d0 += ND) {
      const int nd = imin(ND, nv - d0);
      const float* p = s + g0 * kDecodeChunk;
      float* ob = o + g0 * hdp + d0 * L;
      // Dispatch (gb, nd) to the register tile; the common shapes are exact.
      if (gb == GB && nd == ND) {
        pv_block<V, D, GB, ND>(p, kDecodeChunk, 1, vp, bc, d0 * L, ob, hdp);
      } else {
        switch (gb) {
          case 1: pv_dispatch_nd<V, D, 1>(nd, p, kDecodeChunk, 1, vp, bc, d0 * L, ob, hdp); break;
          case 2: pv_dispatch_nd<V, D, (GB >= 2 ? 2 : 1)>(nd, p, kDecodeChunk, 1, vp, bc, d0 * L, ob, hdp); break;
          case 3: pv_dispatch_nd<V, D, (GB >= 3 ? 3 : 1)>(nd, p, kDecodeChunk, 1, vp, bc, d0 * L, ob, hdp); break;
          default: pv_dispatch_nd<V, D, GB>(nd, p, kDecodeChunk, 1, vp, bc, d0 * L, ob, hdp); break;
        }
      }
    }
  }
}

template <class V>
void decode(const DecodeTask& t, float* scratch) {
  constexpr int L = V::L;
  constexpr int32_t Bd = kDecodeChunk;
  const int32_t G = t.group, hd = t.head_dim, nkv = t.n_kv_heads, nh = nkv * G;
  const int64_t hdp = round_up(hd, L);
  const int32_t nv = static_cast<int32_t>(hdp / L);
  const DecodeLayout y = decode_layout<V>(nkv, G, hd);
  float* qs = scratch + y.qs;
  float* o = scratch + y.o;
  float* m = scratch + y.m;
  float* l = scratch + y.l;
  float* s = scratch + y.s;
  float* red = scratch + y.red;
  float* kbuf = scratch + y.kbuf;
  float* vbuf = scratch + y.vbuf;
  int64_t* slot = reinterpret_cast<int64_t*>(scratch + y.slot);
  const void** kp = reinterpret_cast<const void**>(scratch + y.kptr);
  const void** vp = reinterpret_cast<const void**>(scratch + y.vptr);
  const KvSource& kv = t.kv;
  const bool direct = hd % L == 0;  // convert on load; else via zero-padded f32 rows
  const int64_t esz = kv.dtype == DType::kF32 ? 4 : 2;

  for (int32_t h = 0; h < nh; ++h) {
    for (int32_t d = 0; d < hdp; ++d) {
      qs[h * hdp + d] = d < hd ? t.q[static_cast<int64_t>(h) * hd + d] * t.scale_log2 : 0.0f;
      o[h * hdp + d] = 0.0f;
    }
    m[h] = kNegInf;
    l[h] = 0.0f;
  }
  for (int32_t c0 = t.kv_begin; c0 < t.kv_end; c0 += Bd) {
    const int32_t bc = imin(Bd, t.kv_end - c0);
    const int32_t bcp = static_cast<int32_t>(round_up(bc, L));
    for (int32_t j = 0; j < bc; ++j) slot[j] = slot_offset(kv, c0 + j);
    for (int32_t j = bc; j < bcp; ++j) slot[j] = slot[0];
    for (int32_t kh = 0; kh < nkv; ++kh) {
      const int64_t head_off = static_cast<int64_t>(kh) * hd;
      if (direct) {
        for (int32_t j = 0; j < bcp; ++j) {
          kp[j] = static_cast<const char*>(kv.k) + (slot[j] + head_off) * esz;
          vp[j] = static_cast<const char*>(kv.v) + (slot[j] + head_off) * esz;
        }
      } else {
        for (int32_t j = 0; j < bc; ++j) {
          convert_row<V>(kv.k, kv.dtype, slot[j] + head_off, hd, static_cast<int32_t>(hdp), kbuf + j * hdp);
          convert_row<V>(kv.v, kv.dtype, slot[j] + head_off, hd, static_cast<int32_t>(hdp), vbuf + j * hdp);
          kp[j] = kbuf + j * hdp;
          vp[j] = vbuf + j * hdp;
        }
        for (int32_t j = bc; j < bcp; ++j) kp[j] = kp[0];
      }
      const float* qh = qs + static_cast<int64_t>(kh) * G * hdp;
      float* oh = o + static_cast<int64_t>(kh) * G * hdp;
      const DType d = direct ? kv.dtype : DType::kF32;
      if (d == DType::kF32) {
        decode_head<V, DType::kF32>(kp, vp, bc, G, nv, hdp, qh, oh, m + kh * G, l + kh * G, s, red);
      } else if (d == DType::kBF16) {
        decode_head<V, DType::kBF16>(kp, vp, bc, G, nv, hdp, qh, oh, m + kh * G, l + kh * G, s, red);
      } else {
        decode_head<V, DType::kF16>(kp, vp, bc, G, nv, hdp, qh, oh, m + kh * G, l + kh * G, s, red);
      }
    }
  }
  for (int32_t h = 0; h < nh; ++h) {
    const float* oh = o + h * hdp;
    if (t.out != nullptr) {
      const float inv = 1.0f / l[h];
      float* dst = t.out + static_cast<int64_t>(h) * hd;
      for (int32_t d = 0; d < hd; ++d) dst[d] = oh[d] * inv;
    } else {
      float* dst = t.part + static_cast<int64_t>(h) * (hd + 2);
      dst[0] = m[h];
      dst[1] = l[h];
      for (int32_t d = 0; d < hd; ++d) dst[2 + d] = oh[d];
    }
  }
}

template <class V>
const FlashKernels& make_table(const char* isa) {
  static const FlashKernels k{isa,
                              V::L,
                              V::kRows,
                              &prefill_scratch_floats<V>,
                              &prefill<V>,
                              &decode_scratch_floats<V>,
                              &decode<V>};
  return k;
}

}  // namespace
}  // namespace llmserve::flash_detail
