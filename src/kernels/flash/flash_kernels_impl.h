// Private to flash_avx2.cc / flash_avx512.cc: the flash-attention kernels written once over a
// vector traits class V (AVX2: __m256, AVX-512: __m512) and instantiated by each ISA's
// translation unit with that ISA's compiler flags. Everything has internal linkage (anonymous
// namespace) and calls no inline library functions, so the AVX-512 instantiation can never
// be picked by the linker for code that runs on an AVX2-only CPU.
//
// The including file includes <immintrin.h> and flash_kernels.h first and defines V with:
// vec, L (lanes), tile constants (kQkNi, kQkNj, kPvMi, kPvNd, kDecGb, kDecNd, kRows), zero,
// load, store, set1, fma, add, mul, max, exp2 (exp2(-inf) = 0), tanh (a few ulp for every
// float, +-1 past |x| ~ 9, NaN stays NaN), mask_after (lanes whose query position < kv
// position -> -inf), hmax, hsum, reduce_rows (L vectors of L lanes -> one vector of their L
// sums), loadkv<D> (L cache elements of dtype D as f32).
//
// Prefill orientation. Scores are computed transposed, S^T[j][i] for KV row j and query
// row i, with query rows in the vector lanes: the micro-kernel broadcasts K[j][d] and
// multiplies it into Q^T[d][i..i+L) (Q transposed once per work item), so the online softmax
// (running max m, running sum l per query row) is purely vertical: no horizontal reductions
// in the inner loops. O[i][d] += P^T[j][i] * V[j][d] broadcasts P and vectorises over d.
// A single-token tile (a decode token under batch invariance) whose GQA group G leaves
// RR = L / G = 2 or 4 KV rows per vector keeps its scores packed instead: lane g * RR + r
// holds (head g, row r of the group), for the scores (qk_grouped), the softmax
// (softmax_grouped) and P in PV, so no lane idles; each score, max, weight and sum is the
// same arithmetic in the same order as in the row-lane layout, so the bits are the same.
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
inline int32_t imax(int32_t a, int32_t b) { return a > b ? a : b; }
inline float fmax_(float a, float b) { return a > b ? a : b; }
constexpr float kNegInf = -__builtin_inff();
// Positions of a decode token's context whose K and V rows are requested (into L2) before
// its walk starts (bench_attention, one sequence at context 128, rows from DRAM: 23 -> 21 us
// AVX-512, 21 -> 17 us AVX2).
constexpr int32_t kPrefetchContext = 256;

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

// out[j] = element offset of position p0 + j's slot, j < n: one division per call, then
// walks the blocks.
inline void slot_offsets(const KvSource& kv, int32_t p0, int32_t n, int64_t* out) {
  if (n <= 0) return;
  int32_t b = p0 / kv.block_size, i = p0 - b * kv.block_size;
  int64_t base = static_cast<int64_t>(kv.block_table[b]) * kv.block_size;
  for (int32_t j = 0; j < n; ++j) {
    out[j] = (base + i) * kv.slot_stride;
    if (++i == kv.block_size && j + 1 < n) {  // next block only if a position follows: the
      i = 0;                                    // table may end exactly here
      base = static_cast<int64_t>(kv.block_table[++b]) * kv.block_size;
    }
  }
}

template <_mm_hint Hint = _MM_HINT_T0>
inline void prefetch_row(const void* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(row) + b, Hint);
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

// Logit soft-capping (Gemma 2's attn_logit_softcapping) on n scores (n a multiple of L) in
// the log2 domain: s2 = s * log2(e) -> c2 * tanh(s2 / c2), c2 = softcap * log2(e), which is
// log2(e) * softcap * tanh(s / softcap). Elementwise: a row's result never depends on the
// other rows of its tile (batch invariance). Applied to fresh (finite) scores, before any
// mask writes -inf.
template <class V>
void softcap_scores(float* s, int64_t n, float c2) {
  constexpr int L = V::L;
  const typename V::vec c = V::set1(c2), inv = V::set1(1.0f / c2);
  for (int64_t i = 0; i < n; i += L) V::store(s + i, V::mul(c, V::tanh(V::mul(V::load(s + i), inv))));
}

// y[i] = tanh(x[i]) (FlashKernels::tanh; y may alias x).
template <class V>
void tanh_array(const float* x, float* y, int64_t n) {
  constexpr int L = V::L;
  int64_t i = 0;
  for (; i + L <= n; i += L) V::store(y + i, V::tanh(V::load(x + i)));
  if (i < n) {
    alignas(64) float buf[L] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    V::store(buf, V::tanh(V::load(buf)));
    for (int64_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
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
// 16-bit V rows are widened two vectors at a time (V::load2: bf16 in the even/odd order).
// With RRP > 1, P is in a single-token tile's packed score layout: P(mi, j) = p[mi * p_rs +
// (j / RRP) * p_js + j % RRP] (softmax_grouped).
template <class V, DType D, int MI, int ND, int RRP = 1>
void pv_block(const float* p, int64_t p_rs, int64_t p_js, const void* const* vrow, int32_t bc,
              int32_t d0, float* o, int64_t ldo) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  static_assert(D == DType::kF32 || ND % 2 == 0, "16-bit V is loaded in pairs of vectors");
  vec acc[MI][ND];
#pragma GCC unroll 8
  for (int m = 0; m < MI; ++m) {
#pragma GCC unroll 4
    for (int n = 0; n < ND; ++n) acc[m][n] = V::load(o + m * ldo + n * L);
  }
  for (int32_t j = 0; j < bc; ++j) {
    vec vv[ND];
    if constexpr (D == DType::kF32) {
#pragma GCC unroll 4
      for (int n = 0; n < ND; ++n) vv[n] = V::load(static_cast<const float*>(vrow[j]) + d0 + n * L);
    } else {
#pragma GCC unroll 4
      for (int n = 0; n < ND; n += 2) V::template load2<D>(vrow[j], d0 + n * L, vv[n], vv[n + 1]);
    }
    const float* pj = p + (j / RRP) * p_js + j % RRP;
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

template <class V, DType D, int MI, int RRP = 1>
void pv_dispatch_nd(int nd, const float* p, int64_t p_rs, int64_t p_js, const void* const* vrow,
                    int32_t bc, int32_t d0, float* o, int64_t ldo) {
  constexpr int N = V::kPvNd;
  switch (nd) {
    case 1: return pv_block<V, D, MI, 1, RRP>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    case 2: return pv_block<V, D, MI, (N >= 2 ? 2 : 1), RRP>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    case 3: return pv_block<V, D, MI, (N >= 3 ? 3 : 1), RRP>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    default: return pv_block<V, D, MI, N, RRP>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
  }
}

// pv_dispatch_nd for 16-bit V read in place (pairs of vectors: nd even) over a single-token
// tile's packed P (RRP = rr, 2 or 4).
template <class V, DType D, int MI>
void pv_pairs(int rr, int nd, const float* p, int64_t p_rs, int64_t p_js, const void* const* vrow,
              int32_t bc, int32_t d0, float* o, int64_t ldo) {
  constexpr int N = V::kPvNd;
  static_assert(N % 2 == 0, "16-bit V is loaded in pairs of vectors");
  if (rr == 2) {
    if (nd == N) return pv_block<V, D, MI, N, 2>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
    return pv_block<V, D, MI, 2, 2>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
  }
  if (nd == N) return pv_block<V, D, MI, N, 4>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
  return pv_block<V, D, MI, 2, 4>(p, p_rs, p_js, vrow, bc, d0, o, ldo);
}

// ---------------------------------------------------------------------------------------
// Prefill: one tile of query rows against its causal context, KV tiles of kPrefillKvTile.

struct PrefillLayout {
  int64_t qt, s, o, m, l, alpha, qpos, kbuf, vbuf, kptr, vptr, slot, total;
  int64_t qt_head, o_head, row_head;  // per-KV-head strides of qt, o and m / l / alpha
  int64_t kt, qpk, qpk_head;          // single-token tiles: K^T of a KV tile, packed Q
};

template <class V>
PrefillLayout prefill_layout(int32_t rows, int32_t hd, int32_t heads) {
  constexpr int64_t Bc = kPrefillKvTile, NJ = V::kQkNj;
  const int64_t rp = round_up(rows, V::L), hdp = round_up(hd, V::L);
  PrefillLayout y;
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t r = at;
    at += round_up(n, 16);
    return r;
  };
  y.qt_head = round_up(hd * rp, 16);
  y.o_head = round_up(rp * hdp, 16);
  y.row_head = round_up(rp, 16);
  y.qt = take(heads * y.qt_head);
  y.s = take((Bc + NJ) * rp);
  y.o = take(heads * y.o_head);
  y.m = take(heads * y.row_head);
  y.l = take(heads * y.row_head);
  y.alpha = take(heads * y.row_head);
  y.qpos = take(rp);
  y.kbuf = take(Bc * hdp);
  y.vbuf = take(Bc * hdp);
  y.kptr = take(2 * (Bc + NJ));  // pointers, two floats each
  y.vptr = take(2 * (Bc + NJ));
  y.slot = take(4 * Bc);  // this tile's and the next tile's slot offsets
  y.qpk_head = hdp * V::L;
  y.kt = take(hdp * Bc);
  y.qpk = take(heads * y.qpk_head);
  y.total = at;
  return y;
}

// Scores of a single-token tile whose group G divides L (RR = L / G KV rows per vector):
// lanes hold (head g, row r) at g * RR + r, so one FMA serves RR rows of all G heads (the
// generic qk_block would leave L - G lanes idle). kt = K^T of the KV tile ([d][Bc], rows
// past bc hold finite padding); qpk[d][g * RR + r] = Q^T[d][g]. S^T[j][g] = the same FMA
// chain over d = 0..hd-1 from zero as qk_block's (K[j][d] * Q^T[d][g] + acc): bit for bit
// the same scores (batch invariance: decode tokens match prompt tokens).
template <class V, int RR>
void qk_packed(const float* kt, const float* qpk, int32_t hd, int32_t bc, int32_t G, float* s,
               int64_t lds) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  constexpr int32_t Bc = kPrefillKvTile;
  constexpr int NA = 8 * RR <= Bc ? 8 : Bc / RR;  // independent accumulators (row groups)
  alignas(64) float tmp[NA * L];
  for (int32_t jb = 0; jb < bc; jb += NA * RR) {
    vec acc[NA];
#pragma GCC unroll 8
    for (int a = 0; a < NA; ++a) acc[a] = V::zero();
    for (int32_t d = 0; d < hd; ++d) {
      const vec q = V::load(qpk + static_cast<int64_t>(d) * L);
      const float* kd = kt + static_cast<int64_t>(d) * Bc + jb;
#pragma GCC unroll 8
      for (int a = 0; a < NA; ++a) {
        if (jb + a * RR < Bc) acc[a] = V::fma(V::template bcast<RR>(kd + a * RR), q, acc[a]);
      }
    }
#pragma GCC unroll 8
    for (int a = 0; a < NA; ++a) V::store(tmp + a * L, acc[a]);
    const int32_t rows = imin(NA * RR, bc - jb);
    for (int32_t j = 0; j < rows; ++j) {
      const float* src = tmp + (j / RR) * L + j % RR;
      float* dst = s + (jb + j) * lds;
      for (int32_t g = 0; g < G; ++g) dst[g] = src[g * RR];
    }
  }
}

// The grouped K layout of a single-token tile (RR = 2 or 4 rows per group): group gi holds
// rows gi * RR .. gi * RR + RR - 1 of the KV tile, hd * RR floats, as RR-float columns (one
// per dimension: K[gi * RR + r][d], r < RR) in the order two or three per-128-bit-lane
// unpack steps leave them (pack_rows): within each L-dimension block, dimension dd sits at
// column group_column<L, RR>(dd). Qk_packed's broadcasts need exactly such columns; building
// them this way costs L / 2 (RR = 2) or L (RR = 4) shuffles per RR x L block instead of a full
// L x L transpose's L log2(L) per L x L block (which GCC also spilled to the stack), and it
// serves RR = 2 (GQA group 8 on AVX-512, group 4 on AVX2), which K^T's RR-float broadcasts
// did not.
template <int L, int RR>
constexpr int group_column(int dd) {
  if constexpr (RR == 2) return (dd % 4 >= 2 ? L / 2 : 0) + 2 * (dd / 4) + dd % 2;
  else return (dd % 4) * (L / 4) + dd / 4;
}

// Rows row[0..RR) (dimensions d0 .. d0 + L - 1 of each) -> RR * L floats at dst, column
// group_column(dd) holding dimension d0 + dd of the RR rows.
template <class V, int RR>
__attribute__((always_inline)) inline void pack_rows(const float* const* row, int32_t d0, float* dst) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const vec r0 = V::load(row[0] + d0), r1 = V::load(row[1] + d0);
  if constexpr (RR == 2) {
    V::store(dst, V::unpacklo(r0, r1));      // per 128-bit lane k: dims 4k, 4k + 1
    V::store(dst + L, V::unpackhi(r0, r1));  // dims 4k + 2, 4k + 3
  } else {
    static_assert(RR == 4, "pack_rows: groups of 2 or 4 rows");
    const vec r2 = V::load(row[2] + d0), r3 = V::load(row[3] + d0);
    const vec t0 = V::unpacklo(r0, r1), t1 = V::unpackhi(r0, r1);
    const vec t2 = V::unpacklo(r2, r3), t3 = V::unpackhi(r2, r3);
    V::store(dst, V::unpacklo_pd(t0, t2));          // per lane k: dim 4k of rows 0..3
    V::store(dst + L, V::unpackhi_pd(t0, t2));      // dim 4k + 1
    V::store(dst + 2 * L, V::unpacklo_pd(t1, t3));  // dim 4k + 2
    V::store(dst + 3 * L, V::unpackhi_pd(t1, t3));  // dim 4k + 3
  }
}

// pack_rows straight from a 16-bit cache (rows at element offsets off[0..RR) of base): each
// row is widened (exactly: bf16 and f16 are subsets of f32) as it is loaded, so the layout,
// and every bit after it, is the one convert_row + pack_rows gives, without the f32 copy.
template <class V, int RR, DType D>
__attribute__((always_inline)) inline void pack_rows_kv(const void* base, const int64_t* off,
                                                        int32_t d0, float* dst) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const vec r0 = V::template loadkv<D>(base, off[0] + d0);
  const vec r1 = V::template loadkv<D>(base, off[1] + d0);
  if constexpr (RR == 2) {
    V::store(dst, V::unpacklo(r0, r1));
    V::store(dst + L, V::unpackhi(r0, r1));
  } else {
    static_assert(RR == 4, "pack_rows_kv: groups of 2 or 4 rows");
    const vec r2 = V::template loadkv<D>(base, off[2] + d0);
    const vec r3 = V::template loadkv<D>(base, off[3] + d0);
    const vec t0 = V::unpacklo(r0, r1), t1 = V::unpackhi(r0, r1);
    const vec t2 = V::unpacklo(r2, r3), t3 = V::unpackhi(r2, r3);
    V::store(dst, V::unpacklo_pd(t0, t2));
    V::store(dst + L, V::unpackhi_pd(t0, t2));
    V::store(dst + 2 * L, V::unpacklo_pd(t1, t3));
    V::store(dst + 3 * L, V::unpackhi_pd(t1, t3));
  }
}

// The grouped K of one tile from a 16-bit cache: group j0 / RR from rows koff[j0 .. j0 + RR).
template <class V, int RR, DType D>
void pack_tile_kv(const void* base, const int64_t* koff, int32_t bcr, int32_t hd, float* kt) {
  constexpr int L = V::L;
  for (int32_t j0 = 0; j0 < bcr; j0 += RR) {
    float* dst = kt + static_cast<int64_t>(j0) * hd;
    for (int32_t d0 = 0; d0 < hd; d0 += L) pack_rows_kv<V, RR, D>(base, koff + j0, d0, dst + d0 * RR);
  }
}

// qk_packed over the grouped layout (hd a multiple of L): the same FMA chain per score, over
// d = 0..hd-1 in order from zero, so the same bits; only the addresses of the broadcasts
// differ. Groups past the tile's rows hold finite values (zeroed per item, or an earlier
// tile's rows). The scores stay packed: vector a of sp (L floats) holds, in lane g * RR + r,
// the score of row a * RR + r for head g (softmax_grouped works on them as they are).
//
// `pf` (may be null): rows requested (prefetch_row of pf_bytes each) a few per d-block, spread
// over the kernel (the tile's V rows: issued in one burst they stalled the loads of K).
template <class V, int RR>
void qk_grouped(const float* kg, const float* qpk, int32_t hd, int32_t bc, float* sp,
                const void* const* pf, int64_t pf_bytes) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  constexpr int32_t Bc = kPrefillKvTile;
  constexpr int NA = 8 * RR <= Bc ? 8 : Bc / RR;  // independent accumulators (row groups)
  const int64_t gs = static_cast<int64_t>(hd) * RR;  // floats per group
  const int32_t steps = (bc + NA * RR - 1) / (NA * RR) * (hd / L);
  const int32_t per_step = pf != nullptr ? (bc + steps - 1) / steps : 0;
  int32_t pf_next = 0;
  for (int32_t jb = 0; jb < bc; jb += NA * RR) {
    vec acc[NA];
#pragma GCC unroll 8
    for (int a = 0; a < NA; ++a) acc[a] = V::zero();
    const float* kb = kg + (jb / RR) * gs;
    for (int32_t d0 = 0; d0 < hd; d0 += L) {
      for (const int32_t e = imin(pf_next + per_step, bc); pf_next < e; ++pf_next)
        prefetch_row(pf[pf_next], pf_bytes);
#pragma GCC unroll 16
      for (int dd = 0; dd < L; ++dd) {
        const vec q = V::load(qpk + static_cast<int64_t>(d0 + dd) * L);
        const float* kd = kb + static_cast<int64_t>(d0 + group_column<L, RR>(dd)) * RR;
#pragma GCC unroll 8
        for (int a = 0; a < NA; ++a) {
          if (jb + a * RR < Bc) acc[a] = V::fma(V::template bcast<RR>(kd + a * gs), q, acc[a]);
        }
      }
    }
#pragma GCC unroll 8
    for (int a = 0; a < NA; ++a) {
      if (jb + a * RR < Bc) V::store(sp + (jb / RR + a) * L, acc[a]);
    }
  }
}

// The online-softmax step of a single-token tile on its packed scores (qk_grouped): the same
// values as the row-lane loop of prefill() computes for each of the G rows -- the max over the
// tile's bc scores (order-free) and m, the same elementwise exp2, the sum of the weights added
// in row order j = 0, 1, ... from zero (lane g * RR of `sum` takes lane g * RR + r of each
// vector in turn), l = fma(l, alpha, sum) -- but on G * RR = L lanes per vector instead of G of
// L. Positions before `first` (window) and from bc on (the last vector's padding) are -inf,
// so weight 0. m, l, alpha: per row (head), as prefill() keeps them.
template <class V, int RR>
void softmax_grouped(float* sp, int32_t bc, int32_t first, bool window, float* m, float* l,
                     float* alpha) {
  using vec = typename V::vec;
  constexpr int L = V::L, G = L / RR;
  const int32_t nvec = (bc + RR - 1) / RR;
  if (first > 0 || nvec * RR > bc) {
    for (int32_t a = 0; a < nvec; ++a)
      for (int lane = 0; lane < L; ++lane) {
        const int32_t j = a * RR + lane % RR;
        if (j < first || j >= bc) sp[a * L + lane] = kNegInf;
      }
  }
  alignas(64) float ex[L];
  for (int lane = 0; lane < L; ++lane) ex[lane] = m[lane / RR];
  const vec m_old = V::load(ex);
  vec mx = V::load(sp);
  for (int32_t a = 1; a < nvec; ++a) mx = V::max(mx, V::load(sp + a * L));
  mx = V::max(V::template group_max<RR>(mx), m_old);
  if (window) mx = V::max(mx, V::set1(-__FLT_MAX__));
  vec sum = V::zero();
  for (int32_t a = 0; a < nvec; ++a) {
    const vec p = V::exp2(V::sub(V::load(sp + a * L), mx));
    V::store(sp + a * L, p);
    const int32_t rows = imin(RR, bc - a * RR);
#pragma GCC unroll 4
    for (int r = 0; r < RR; ++r) {
      if (r < rows) sum = V::add(sum, V::template from_lane<RR>(p, r));
    }
  }
  const vec al = V::exp2(V::sub(m_old, mx));
  for (int lane = 0; lane < L; ++lane) ex[lane] = l[lane / RR];
  alignas(64) float lv[L], mv[L], av[L];
  V::store(lv, V::fma(V::load(ex), al, sum));
  V::store(mv, mx);
  V::store(av, al);
  for (int g = 0; g < G; ++g) {
    l[g] = lv[g * RR];
    m[g] = mv[g * RR];
    alpha[g] = av[g * RR];
  }
}

template <class V>
int64_t prefill_scratch_floats(int32_t rows, int32_t head_dim, int32_t heads) {
  return prefill_layout<V>(rows, head_dim, heads).total;
}

// Every query row (token x head) is computed by the same per-row arithmetic whatever the
// tile holds (how many tokens, which heads, where the chunk starts): S^T[j][i] is one FMA
// chain over d, the softmax walks KV tiles at the absolute positions 0, 64, 128, ... (masked
// positions add exact zeros), and O[i] is one FMA chain over j per tile. So a row's bits
// depend only on its q, its context and its position (batch invariance).
template <class V>
void prefill(const PrefillTile& t, float* scratch) {
  using vec = typename V::vec;
  constexpr int L = V::L, NI = V::kQkNi, NJ = V::kQkNj, MI = V::kPvMi, ND = V::kPvNd;
  constexpr int32_t Bc = kPrefillKvTile;
  static_assert(L % MI == 0, "PV row block must divide the lane count");
  const int32_t G = t.group, hd = t.head_dim, NH = t.num_kv_heads;
  const int32_t hdp = static_cast<int32_t>(round_up(hd, L)), nv = hdp / L;
  const int32_t R = t.num_tokens * G, Rp = static_cast<int32_t>(round_up(R, L));
  const PrefillLayout y = prefill_layout<V>(R, hd, NH);
  float* s = scratch + y.s;
  float* qpos = scratch + y.qpos;
  float* kbuf = scratch + y.kbuf;
  float* vbuf = scratch + y.vbuf;
  const float** kp = reinterpret_cast<const float**>(scratch + y.kptr);
  const void** vp = reinterpret_cast<const void**>(scratch + y.vptr);
  int64_t* slot = reinterpret_cast<int64_t*>(scratch + y.slot);
  int64_t* slot_next = slot + Bc;
  const KvSource& kv = t.kv;
  const bool direct = kv.dtype == DType::kF32 && hd % L == 0;
  const int64_t esz = kv.dtype == DType::kF32 ? 4 : 2;
  const int64_t row_bytes = hd * esz;
  // A single-token tile (a decode token) whose group divides L: packed scores (qk_packed).
  const int RR = G < L && L % G == 0 ? L / G : 0;
  // Grouped K (qk_grouped) where it applies, else K^T (qk_packed).
  const bool grouped = t.num_tokens == 1 && (RR == 2 || RR == 4) && hd % L == 0;
  const bool packed = grouped || (t.num_tokens == 1 && RR > 0 && V::packed_r(RR));
  // A 16-bit K of a grouped tile is packed straight from the cache (pack_tile_kv), not first
  // converted into kbuf: the copy took a quarter of a bf16-KV decode token's attention.
  const bool k_from_cache = grouped && !direct;
  int64_t koff[kPrefillKvTile + 4];  // element offsets of the tile's K rows (k_from_cache)
  // Its 16-bit V is read in place too, widened by the PV kernel two vectors at a time (bf16:
  // even then odd dimensions, so O is un-permuted at the end; f16: in order).
  const bool v_in_place = k_from_cache && hd % (2 * L) == 0;
  float* kt = scratch + y.kt;

  // Q^T per KV head, pre-scaled into the log2 domain; padding rows are zero and sit at the
  // last row's position (they compute harmless finite values that are never written out).
  for (int32_t i = 0; i < Rp; ++i) qpos[i] = static_cast<float>(t.first_pos + imin(i, R - 1) / G);
  for (int32_t h = 0; h < NH; ++h) {
    float* qt = scratch + y.qt + h * y.qt_head;
    float* m = scratch + y.m + h * y.row_head;
    float* l = scratch + y.l + h * y.row_head;
    float* o = scratch + y.o + h * y.o_head;
    for (int32_t i = 0; i < Rp; ++i) {
      m[i] = kNegInf;
      l[i] = 0.0f;
      if (packed) continue;  // the packed kernel reads only qpk (below), not Q^T
      if (i < R) {
        const float* qr = t.q + (i / G) * t.q_stride + (h * G + i % G) * hd;
        for (int32_t d = 0; d < hd; ++d) qt[static_cast<int64_t>(d) * Rp + i] = qr[d] * t.scale_log2;
      } else {
        for (int32_t d = 0; d < hd; ++d) qt[static_cast<int64_t>(d) * Rp + i] = 0.0f;
      }
    }
    // Only the rows PV computes are read back (padding rows' O is never used).
    for (int64_t i = 0; i < static_cast<int64_t>(packed ? round_up(R, MI) : Rp) * hdp; ++i) o[i] = 0.0f;
    if (packed) {
      // qpk[d][lane] = Q^T[d][lane / RR], written straight from the (single token's) query
      // rows with the same product as Q^T's: contiguous stores, no Q^T. Lane-major, so
      // `lane / RR` is divided once per lane (an integer division per element took most of a
      // 32-sequence decode step's attention).
      float* qpk = scratch + y.qpk + h * y.qpk_head;
      for (int32_t lane = 0; lane < L; ++lane) {
        const float* qr = t.q + (h * G + lane / RR) * hd;  // query row lane / RR (< G = R)
        for (int32_t d = 0; d < hd; ++d) qpk[d * L + lane] = qr[d] * t.scale_log2;
      }
    }
  }
  if (packed) {  // lanes past G of the scores are never computed: keep them finite
    for (int64_t i = 0; i < static_cast<int64_t>(Bc + NJ) * Rp; ++i) s[i] = 0.0f;
    for (int64_t i = 0; i < static_cast<int64_t>(hdp) * Bc; ++i) kt[i] = 0.0f;
  }

  const int32_t kv_end = t.first_pos + t.num_tokens;  // last position + 1
  const int32_t Rm = static_cast<int32_t>(round_up(R, MI));  // rows PV computes (see below)
  // Sliding window: no row needs a position before `lo` (the first row's window start), so
  // the walk starts at lo's tile, still at the absolute tile positions (a row's tiles before
  // its window add exact zeros, so its bits do not depend on which rows share the tile). The
  // positions of that tile before lo read lo's cache row (finite, masked): their blocks may
  // be gone. `hi_lo`: rows of tiles starting before it have window starts to mask.
  const int32_t W = t.window;
  const int32_t lo = W > 0 ? imax(0, t.first_pos - W + 1) : 0;
  const int32_t hi_lo = W > 0 ? kv_end - W : 0;  // the last row's window start
  const int32_t kv_first = lo / Bc * Bc;
  if (t.num_tokens == 1) {
    // A decode token's whole (short) context is requested up front: its K and V rows are a
    // slot apart (no hardware prefetcher follows them) and the walk below would otherwise
    // keep only a tile's worth in flight, waiting out the DRAM latency tile by tile.
    const int32_t pf_end = imin(kv_end, lo + kPrefetchContext);
    for (int32_t p0 = lo; p0 < pf_end; p0 += Bc) {
      const int32_t n = imin(Bc, pf_end - p0);
      slot_offsets(kv, p0, n, slot_next);
      for (int32_t j = 0; j < n; ++j) {
        // The item's heads kv_head .. kv_head + NH - 1 are adjacent in the slot's row.
        const int64_t at = (slot_next[j] + static_cast<int64_t>(t.kv_head) * hd) * esz;
        prefetch_row<_MM_HINT_T1>(static_cast<const char*>(kv.k) + at, row_bytes * NH);
        prefetch_row<_MM_HINT_T1>(static_cast<const char*>(kv.v) + at, row_bytes * NH);
      }
    }
  }
  for (int32_t kv0 = kv_first; kv0 < kv_end; kv0 += Bc) {
    const int32_t bc = imin(Bc, kv_end - kv0);
    if (kv0 == kv_first) {
      slot_offsets(kv, imax(kv0, lo), bc - imax(0, lo - kv0), slot + imax(0, lo - kv0));
      for (int32_t j = 0; j < lo - kv0; ++j) slot[j] = slot[lo - kv0];
      // The first tile's K rows of the first head, requested all at once: later tiles' and
      // heads' rows are requested during the PV step before them (below), these had nothing
      // before them to hide behind (a decode token's whole context is often one or two tiles).
      for (int32_t j = 0; j < bc; ++j)
        prefetch_row(static_cast<const char*>(kv.k) + (slot[j] + static_cast<int64_t>(t.kv_head) * hd) * esz,
                     row_bytes);
    } else {
      int64_t* tmp = slot;
      slot = slot_next;
      slot_next = tmp;
    }
    const int32_t kv1 = kv0 + Bc, bn = imin(Bc, kv_end - kv1);  // next tile's rows
    if (bn > 0) slot_offsets(kv, kv1, bn, slot_next);
    const bool diag = kv0 + bc - 1 > t.first_pos;
    // The KV heads of the item, one after another on this tile (a decode token's item covers
    // every KV head, so each cache slot row is used completely while it is in cache).
    for (int32_t h = 0; h < NH; ++h) {
      float* qt = scratch + y.qt + h * y.qt_head;
      float* m = scratch + y.m + h * y.row_head;
      float* l = scratch + y.l + h * y.row_head;
      float* alpha = scratch + y.alpha + h * y.row_head;
      float* o = scratch + y.o + h * y.o_head;
      const int64_t head_off = static_cast<int64_t>(t.kv_head + h) * hd;
      for (int32_t j = 0; j < bc; ++j) {
        const int64_t off = slot[j] + head_off;
        if (direct) {
          kp[j] = static_cast<const float*>(kv.k) + off;
          vp[j] = static_cast<const float*>(kv.v) + off;
        } else {
          if (k_from_cache) koff[j] = off;
          else convert_row<V>(kv.k, kv.dtype, off, hd, hdp, kbuf + static_cast<int64_t>(j) * hdp);
          kp[j] = kbuf + static_cast<int64_t>(j) * hdp;
          if (v_in_place) {
            vp[j] = static_cast<const uint16_t*>(kv.v) + off;
          } else {
            convert_row<V>(kv.v, kv.dtype, off, hd, hdp, vbuf + static_cast<int64_t>(j) * hdp);
            vp[j] = vbuf + static_cast<int64_t>(j) * hdp;
          }
        }
      }
      const int32_t bcn = static_cast<int32_t>(round_up(bc, NJ));
      for (int32_t j = bc; j < bcn; ++j) kp[j] = kp[0];

      // S^T = K Q^T for this KV tile; meanwhile V rows of this tile are requested (cache rows
      // of one head sit a slot apart, so hardware prefetchers rarely help).
      if (grouped) {
        // The tile's rows in groups of RR (rows past bc: row 0).
        const int32_t bcr = static_cast<int32_t>(round_up(bc, RR));
        for (int32_t j = bc; j < bcr; ++j) kp[j] = kp[0];
        if (k_from_cache) {
          for (int32_t j = bc; j < bcr; ++j) koff[j] = koff[0];
          const bool bf16 = kv.dtype == DType::kBF16;
          if (RR == 2 && bf16) pack_tile_kv<V, 2, DType::kBF16>(kv.k, koff, bcr, hd, kt);
          else if (RR == 2) pack_tile_kv<V, 2, DType::kF16>(kv.k, koff, bcr, hd, kt);
          else if (bf16) pack_tile_kv<V, 4, DType::kBF16>(kv.k, koff, bcr, hd, kt);
          else pack_tile_kv<V, 4, DType::kF16>(kv.k, koff, bcr, hd, kt);
        } else {
          for (int32_t j0 = 0; j0 < bcr; j0 += RR) {
            float* dst = kt + static_cast<int64_t>(j0) * hd;  // group j0 / RR
            for (int32_t d0 = 0; d0 < hd; d0 += L) {
              if (RR == 2) pack_rows<V, 2>(kp + j0, d0, dst + d0 * 2);
              else pack_rows<V, 4>(kp + j0, d0, dst + d0 * 4);
            }
          }
        }
        const float* qpk = scratch + y.qpk + h * y.qpk_head;
        const void* const* pf = direct || v_in_place ? vp : nullptr;  // V read in place: requested
        if (RR == 2) qk_grouped<V, 2>(kt, qpk, hd, bc, s, pf, row_bytes);
        else qk_grouped<V, 4>(kt, qpk, hd, bc, s, pf, row_bytes);
      } else if (packed) {
        // K^T of the tile, L rows x L dims per register transpose (rows past bc: row 0).
        const int32_t bcl = static_cast<int32_t>(round_up(bc, L));
        const int32_t hdt = direct ? hd : hdp;  // both multiples of L
        for (int32_t j = bc; j < bcl; ++j) kp[j] = kp[0];
        for (int32_t j0 = 0; j0 < bcl; j0 += L) {
          if (direct) {
            for (int32_t j = j0; j < imin(j0 + L, bc); ++j) prefetch_row(vp[j], row_bytes);
          }
          for (int32_t d0 = 0; d0 < hdt; d0 += L) {
            vec r[L];
#pragma GCC unroll 16
            for (int i = 0; i < L; ++i) r[i] = V::load(kp[j0 + i] + d0);
            V::transpose(r);
#pragma GCC unroll 16
            for (int i = 0; i < L; ++i) V::store(kt + static_cast<int64_t>(d0 + i) * Bc + j0, r[i]);
          }
        }
        const float* qpk = scratch + y.qpk + h * y.qpk_head;
        if constexpr (V::packed_r(16)) {
          if (RR == 16) qk_packed<V, (L >= 16 ? 16 : 8)>(kt, qpk, hd, bc, G, s, Rp);
        }
        if (RR == 8) qk_packed<V, 8>(kt, qpk, hd, bc, G, s, Rp);
        if (RR == 4) qk_packed<V, 4>(kt, qpk, hd, bc, G, s, Rp);
      }
      for (int32_t j0 = 0; !packed && j0 < bcn; j0 += NJ) {
        if (direct) {
          for (int32_t j = j0; j < imin(j0 + NJ, bc); ++j) prefetch_row(vp[j], row_bytes);
        }
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

      // Soft-capping of the tile's fresh scores (rows j < bc, every lane: padding lanes hold
      // finite values), before the window and causal masks write -inf.
      if (grouped) {  // packed scores: ceil(bc / RR) vectors (a single token: no causal mask)
        if (t.softcap_log2 > 0)
          softcap_scores<V>(s, (bc + RR - 1) / RR * static_cast<int64_t>(L), t.softcap_log2);
        const int32_t first = W > 0 ? imax(0, t.first_pos - W + 1 - kv0) : 0;
        if (RR == 2) softmax_grouped<V, 2>(s, bc, first, W > 0, m, l, alpha);
        else softmax_grouped<V, 4>(s, bc, first, W > 0, m, l, alpha);
      }
      if (!grouped && t.softcap_log2 > 0)
        softcap_scores<V>(s, static_cast<int64_t>(bc) * Rp, t.softcap_log2);

      // Sliding window: scores of positions before a row's window start become -inf (a
      // scalar pass over the tiles that hold window starts: one or two per row).
      if (!grouped && W > 0 && kv0 < hi_lo) {
        for (int32_t i = 0; i < Rp; ++i) {
          const int32_t low = static_cast<int32_t>(qpos[i]) - W + 1;  // first visible position
          for (int32_t j = 0; j < imin(bc, low - kv0); ++j) s[static_cast<int64_t>(j) * Rp + i] = kNegInf;
        }
      }
      // Online softmax, L query rows at a time. Without a window the first tile holds
      // position 0, which every query sees, so m is finite from then on; masked scores become
      // exp2(-inf) = 0. With one, a row may see a whole tile masked before its first visible
      // position: its max is then taken as -FLT_MAX (never above a real score), so its
      // weights and rescale factor are exp2(-inf) = 0 instead of exp2(NaN).
      for (int32_t i = 0; !grouped && i < Rp; i += L) {
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
        if (W > 0) mx = V::max(mx, V::set1(-__FLT_MAX__));
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
      if (kv0 > kv_first) {
        for (int32_t i = 0; i < R; ++i) {  // padding rows' O is never read
          if (alpha[i] == 1.0f) continue;
          const vec a = V::set1(alpha[i]);
          float* orow = o + static_cast<int64_t>(i) * hdp;
          for (int32_t d = 0; d < hdp; d += L) V::store(orow + d, V::mul(V::load(orow + d), a));
        }
      }

      // O += P V, one d-slab of V at a time (reused from L1 by every row block), for the R
      // real rows only (a decode token's tile has `group` real rows of its L lanes). Meanwhile
      // the K rows computed next are requested (and V rows too when they are converted
      // before QK, i.e. not read in place): the next head's on this tile, or the first
      // head's on the next tile.
      const bool same = h + 1 < NH;
      const int64_t* pf_slot = same ? slot : slot_next;
      const int64_t pf_off = same ? head_off + hd : static_cast<int64_t>(t.kv_head) * hd;
      const int32_t pf_n = same ? bc : imax(bn, 0);
      int32_t pf_next = 0;
      const int32_t steps = ((nv + ND - 1) / ND) * (Rm / MI);
      const int32_t per_step = pf_n > 0 ? (pf_n + steps - 1) / steps : 0;
      for (int32_t d0 = 0; d0 < nv; d0 += ND) {
        for (int32_t i0 = 0; i0 < Rm; i0 += MI) {
          for (int32_t e = imin(pf_next + per_step, pf_n); pf_next < e; ++pf_next) {
            const int64_t at = (pf_slot[pf_next] + pf_off) * esz;
            prefetch_row(static_cast<const char*>(kv.k) + at, row_bytes);
            if (!direct) prefetch_row(static_cast<const char*>(kv.v) + at, row_bytes);
          }
          float* od = o + static_cast<int64_t>(i0) * hdp + d0 * L;
          if (v_in_place) {
            const int nd = imin(ND, nv - d0);
            if (kv.dtype == DType::kBF16)
              pv_pairs<V, DType::kBF16, MI>(RR, nd, s + i0 * RR, RR, L, vp, bc, d0 * L, od, hdp);
            else
              pv_pairs<V, DType::kF16, MI>(RR, nd, s + i0 * RR, RR, L, vp, bc, d0 * L, od, hdp);
          } else if (grouped && RR == 2)
            pv_dispatch_nd<V, DType::kF32, MI, 2>(imin(ND, nv - d0), s + i0 * 2, 2, L, vp, bc, d0 * L, od, hdp);
          else if (grouped)
            pv_dispatch_nd<V, DType::kF32, MI, 4>(imin(ND, nv - d0), s + i0 * 4, 4, L, vp, bc, d0 * L, od, hdp);
          else
            pv_dispatch_nd<V, DType::kF32, MI>(imin(ND, nv - d0), s + i0, 1, Rp, vp, bc, d0 * L, od, hdp);
        }
      }
    }
  }

  for (int32_t h = 0; h < NH; ++h) {
    const float* l = scratch + y.l + h * y.row_head;
    const float* o = scratch + y.o + h * y.o_head;
    for (int32_t i = 0; i < R; ++i) {
      const float inv = 1.0f / l[i];
      const float* orow = o + static_cast<int64_t>(i) * hdp;
      float* dst = t.out + (i / G) * t.q_stride + (h * G + i % G) * hd;
      if (v_in_place && kv.dtype == DType::kBF16) {  // even/odd halves of each 2L block
        for (int32_t b = 0; b < hd; b += 2 * L) {
          for (int32_t e = 0; e < L; ++e) {
            dst[b + 2 * e] = orow[b + e] * inv;
            dst[b + 2 * e + 1] = orow[b + L + e] * inv;
          }
        }
      } else {
        for (int32_t d = 0; d < hd; ++d) dst[d] = orow[d] * inv;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Decode: one query token, all KV heads, context [kv_begin, kv_end) in chunks of Bd rows
// (one item covers every KV head of a sequence, so each cache block is fully used while it is
// in cache). Per chunk and KV head: scores of the group's query heads, online softmax,
// O += P V; meanwhile the rows of the next head-chunk are prefetched into L2 a few at a time
// from inside the compute loops (cache blocks sit at random places, and a head's rows are a
// slot apart, so hardware prefetchers rarely help; measured on the 2-core target, this beat
// prefetching in bursts, gathering rows into buffers first, and gathering whole slot rows).
// K and V are read in place when they are f32 (head_dim % L == 0); bf16 V is widened in the
// PV kernel and bf16 K is widened into a small float32 buffer for the broadcasts of the
// packed kernel; other cases (f16, odd head_dim) are converted into zero-padded rows first.
//
// Two score kernels. "Packed" (the group G divides L and R = L / G is in V::packed_r): the
// lanes hold (head g, residue r) pairs; a K row is broadcast R elements at a time (a
// load-port operation: vbroadcastf32x4 etc.) against Q'[c] = (q_g[c*R + r]), so one FMA
// serves all G heads without idle lanes, and R rows are reduced together by log2(R)
// interleave-add steps. "Generic" (any G): each K row is dotted, vectorised over d, with
// every query head, and the L-lane partial sums of L rows are reduced by a transpose-add tree.
// bf16 rows (head_dim a multiple of 2L) are widened two vectors at a time (V::load2: a shift
// gives the even elements, a mask the odd ones), so K and V are used in that even/odd order:
// q is permuted to match and O is un-permuted at the end.

constexpr int32_t kDecodeChunk = kPrefillKvTile;
constexpr int32_t kDecodeScoreGroup = 8;  // query heads per pass over a K row (generic)


// Prefetches the rows of the next head-chunk (K and V, into L2) a few at a time from inside
// the compute loops, so memory requests stay in flight while this head-chunk is computed
// (measured: as good as or better than prefetching from the gather loop, which already has
// the memory system busy).
struct RowPrefetcher {
  const char* k = nullptr;
  const char* v = nullptr;
  const int64_t* off = nullptr;
  int64_t head_off = 0;
  int64_t esz = 0;
  int64_t row_bytes = 0;
  int32_t n = 0;
  int32_t next = 0;
  void step(int32_t rows) {
    for (const int32_t e = imin(next + rows, n); next < e; ++next) {
      const char* kr = k + (off[next] + head_off) * esz;
      const char* vr = v + (off[next] + head_off) * esz;
      for (int64_t x = 0; x < row_bytes; x += 64) {
        _mm_prefetch(kr + x, _MM_HINT_T1);
        _mm_prefetch(vr + x, _MM_HINT_T1);
      }
    }
  }
};

struct DecodeLayout {
  int64_t qs, qpk, o, m, l, s, red, kbuf, vbuf, slot, kptr, vptr, total;
};

template <class V>
DecodeLayout decode_layout(int32_t n_kv, int32_t group, int32_t hd) {
  constexpr int64_t L = V::L, Bd = kDecodeChunk;
  const int64_t nh = static_cast<int64_t>(n_kv) * group, hdp = round_up(hd, 2 * L);
  DecodeLayout y;
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t r = at;
    at += round_up(n, 16);
    return r;
  };
  y.qs = take(nh * hdp);
  y.qpk = take(nh * hdp);
  y.o = take(nh * hdp);
  y.m = take(nh);
  y.l = take(nh);
  y.s = take(group * Bd);
  y.red = take(kDecodeScoreGroup * L * L);
  y.kbuf = take(Bd * hdp);
  y.vbuf = take(Bd * hdp);
  y.slot = take(4 * Bd);  // two chunks of int64 offsets
  y.kptr = take(2 * Bd);
  y.vptr = take(2 * Bd);
  y.total = at;
  return y;
}

template <class V>
int64_t decode_scratch_floats(int32_t n_kv, int32_t group, int32_t head_dim) {
  return decode_layout<V>(n_kv, group, head_dim).total;
}

// Generic: s[g][jb + 0..L) for GB query heads and the float32 K rows kp[0..bcp).
template <class V, int GB>
void decode_scores(const float* const* kp, int32_t bcp, const float* qs, int64_t hdp, int32_t nv,
                   float* s, float* red, RowPrefetcher& pf) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const int32_t pf_rows = (pf.n - pf.next + bcp / L - 1) / (bcp / L);
  for (int32_t jb = 0; jb < bcp; jb += L) {
    pf.step(pf_rows);
    for (int jj = 0; jj < L; ++jj) {
      const float* kr = kp[jb + jj];
      vec acc[GB];
#pragma GCC unroll 8
      for (int g = 0; g < GB; ++g) acc[g] = V::zero();
      for (int32_t dv = 0; dv < nv; ++dv) {
        const vec k = V::load(kr + dv * L);
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

// Packed: s[g][jb + r] for the G = L / R heads. K rows (float32, nc * R elements) are taken
// RS at a time with A partial accumulators each (A * RS independent FMA chains);
// qpk = Q' [nc][L].
template <class V, int R, int RS, int A>
void decode_scores_packed(const float* const* kp, int32_t bcp, const float* qpk, int32_t nc,
                          float* s, RowPrefetcher& pf) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  static_assert(RS % R == 0);
  const int32_t pf_rows = (pf.n - pf.next + bcp / RS - 1) / (bcp / RS);
  for (int32_t jb = 0; jb < bcp; jb += RS) {
    pf.step(pf_rows);
    const float* kr[RS];
#pragma GCC unroll 16
    for (int r = 0; r < RS; ++r) kr[r] = kp[jb + r];
    vec acc[A][RS];
#pragma GCC unroll 2
    for (int a = 0; a < A; ++a) {
#pragma GCC unroll 16
      for (int r = 0; r < RS; ++r) acc[a][r] = V::zero();
    }
    for (int32_t c = 0; c < nc; c += A) {
#pragma GCC unroll 2
      for (int a = 0; a < A; ++a) {
        const vec q = V::load(qpk + (c + a) * L);
#pragma GCC unroll 16
        for (int r = 0; r < RS; ++r)
          acc[a][r] = V::fma(V::template bcast<R>(kr[r] + (c + a) * R), q, acc[a][r]);
      }
    }
    if constexpr (A == 2) {
#pragma GCC unroll 16
      for (int r = 0; r < RS; ++r) acc[0][r] = V::add(acc[0][r], acc[1][r]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < RS / R; ++g)
      V::template store_reduced<R>(acc[0] + g * R, s + jb + g * R, kDecodeChunk);
  }
}

// O (GB heads x nd L-vectors at d0) += P V for the decode chunk; 16-bit V rows in pairs.
template <class V, DType D, int GB>
void decode_pv(int nd, const float* p, const void* const* vp, int32_t bc, int32_t d0, float* o,
               int64_t ldo) {
  constexpr int N = V::kDecNd;
  if constexpr (D == DType::kF32) {
    pv_dispatch_nd<V, D, GB>(nd, p, kDecodeChunk, 1, vp, bc, d0, o, ldo);
  } else {
    static_assert(N % 2 == 0);
    if (nd >= 4 && N >= 4) {
      pv_block<V, D, GB, (N >= 4 ? 4 : 2)>(p, kDecodeChunk, 1, vp, bc, d0, o, ldo);
    } else {
      pv_block<V, D, GB, 2>(p, kDecodeChunk, 1, vp, bc, d0, o, ldo);
    }
  }
}

// One chunk of one KV head from the gathered float32 rows (kbuf / kp, vp).
template <class V, int R, DType DV>
void decode_head(const float* const* kp, const void* const* vp, int32_t bc,
                 int32_t G, int32_t nv, int64_t hdp, const float* qs, const float* qpk, float* o,
                 float* m, float* l, float* s, float* red, RowPrefetcher& pf, float cap) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const int32_t bcp = static_cast<int32_t>(round_up(bc, L));
  if constexpr (R > 0) {
    constexpr int RS = V::kPackedRows < R ? R : V::kPackedRows;
    constexpr int A = RS == R && R == L ? 1 : 2;
    decode_scores_packed<V, R, RS, A>(kp, bcp, qpk, static_cast<int32_t>(nv * L / R), s, pf);
  } else {
    for (int32_t g0 = 0; g0 < G; g0 += kDecodeScoreGroup) {
      const float* q = qs + g0 * hdp;
      float* sg = s + g0 * kDecodeChunk;
      switch (imin(kDecodeScoreGroup, G - g0)) {
        case 1: decode_scores<V, 1>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        case 2: decode_scores<V, 2>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        case 3: decode_scores<V, 3>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        case 4: decode_scores<V, 4>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        case 5: decode_scores<V, 5>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        case 6: decode_scores<V, 6>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        case 7: decode_scores<V, 7>(kp, bcp, q, hdp, nv, sg, red, pf); break;
        default: decode_scores<V, 8>(kp, bcp, q, hdp, nv, sg, red, pf); break;
      }
    }
  }
  // Soft-capping (cap = softcap * log2(e) > 0): rows past bc hold row 0's finite scores and
  // are masked just below.
  if (cap > 0)
    for (int32_t g = 0; g < G; ++g) softcap_scores<V>(s + g * kDecodeChunk, bcp, cap);
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
    const float a = V::exp2_scalar(m_old - m_new);  // 0 on the first chunk (m_old = -inf)
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
    const float* p = s + g0 * kDecodeChunk;
    for (int32_t d0 = 0; d0 < nv; d0 += ND) {
      const int nd = imin(ND, nv - d0);
      float* ob = o + g0 * hdp + d0 * L;
      if (gb == GB && nd == ND) {
        pv_block<V, DV, GB, ND>(p, kDecodeChunk, 1, vp, bc, d0 * L, ob, hdp);
        continue;
      }
      switch (gb) {
        case 1: decode_pv<V, DV, 1>(nd, p, vp, bc, d0 * L, ob, hdp); break;
        case 2: decode_pv<V, DV, (GB >= 2 ? 2 : 1)>(nd, p, vp, bc, d0 * L, ob, hdp); break;
        case 3: decode_pv<V, DV, (GB >= 3 ? 3 : 1)>(nd, p, vp, bc, d0 * L, ob, hdp); break;
        default: decode_pv<V, DV, GB>(nd, p, vp, bc, d0 * L, ob, hdp); break;
      }
    }
  }
}

// Gathers rows [0, n) (element offsets off[j] + head_off) of a cache tensor as float32 rows
// of stride hdp: even/odd-widened (bf16, hd % 2L == 0) or converted and zero-padded.
enum class Gather { kPairs, kConvert };

template <class V, Gather MODE>
void gather_rows(const void* base, DType D, const int64_t* off, int64_t head_off, int32_t n,
                 int32_t hd, int64_t hdp, float* dst) {
  constexpr int L = V::L;
  for (int32_t j = 0; j < n; ++j) {
    const int64_t src = off[j] + head_off;
    float* d = dst + j * hdp;
    if constexpr (MODE == Gather::kPairs) {
      for (int32_t i = 0; i < hd; i += 2 * L) {
        typename V::vec x, y;
        V::template load2<DType::kBF16>(base, src + i, x, y);
        V::store(d + i, x);
        V::store(d + i + L, y);
      }
    } else {
      convert_row<V>(base, D, src, hd, static_cast<int32_t>(hdp), d);
    }
  }
}

template <class V, int R>
void decode_run(const DecodeTask& t, float* scratch);

template <class V>
void decode(const DecodeTask& t, float* scratch) {
  constexpr int L = V::L;
  const int32_t G = t.group;
  const int r = L % G == 0 ? L / G : 0;
  if (r == 16 && V::packed_r(16)) return decode_run<V, (L >= 16 ? 16 : 0)>(t, scratch);
  if (r == 8 && V::packed_r(8)) return decode_run<V, 8>(t, scratch);
  if (r == 4 && V::packed_r(4)) return decode_run<V, 4>(t, scratch);
  return decode_run<V, 0>(t, scratch);
}

template <class V, int R>
void decode_run(const DecodeTask& t, float* scratch) {
  constexpr int L = V::L;
  constexpr int32_t Bd = kDecodeChunk;
  const int32_t G = t.group, hd = t.head_dim, nkv = t.n_kv_heads, nh = nkv * G;
  const int64_t hdp = round_up(hd, 2 * L);
  const DecodeLayout y = decode_layout<V>(nkv, G, hd);
  float* qs = scratch + y.qs;
  float* qpk = scratch + y.qpk;
  float* o = scratch + y.o;
  float* m = scratch + y.m;
  float* l = scratch + y.l;
  float* s = scratch + y.s;
  float* red = scratch + y.red;
  float* kbuf = scratch + y.kbuf;
  float* vbuf = scratch + y.vbuf;
  int64_t* slot = reinterpret_cast<int64_t*>(scratch + y.slot);
  int64_t* slot_next = slot + Bd;
  const float** kp = reinterpret_cast<const float**>(scratch + y.kptr);
  const void** vp = reinterpret_cast<const void**>(scratch + y.vptr);
  const KvSource& kv = t.kv;
  const DType dt = kv.dtype;
  // Widening mode of the gather: f32 copy (hd % L == 0), bf16 even/odd pairs (hd % 2L ==
  // 0), else scalar-tail conversion into zero-padded rows.
  const bool copy = dt == DType::kF32 && hd % L == 0;
  const bool pairs = dt == DType::kBF16 && hd % (2 * L) == 0;
  const int32_t nv = static_cast<int32_t>((copy ? hd : hdp) / L);  // L-vectors per K/V row
  auto orig = [&](int64_t p) -> int64_t {  // storage position -> element index
    if (!pairs) return p;
    const int64_t blk = p / (2 * L) * (2 * L), i = p % (2 * L);
    return blk + (i < L ? 2 * i : 2 * (i - L) + 1);
  };

  const int64_t esz = dt == DType::kF32 ? 4 : 2;
  for (int64_t i = 0; i < Bd * hdp; ++i) kbuf[i] = vbuf[i] = 0.0f;  // zero padding
  for (int32_t h = 0; h < nh; ++h) {
    for (int64_t p = 0; p < hdp; ++p) {
      const int64_t d = orig(p);
      qs[h * hdp + p] = d < hd ? t.q[static_cast<int64_t>(h) * hd + d] * t.scale_log2 : 0.0f;
      o[h * hdp + p] = 0.0f;
    }
    m[h] = kNegInf;
    l[h] = 0.0f;
  }
  if constexpr (R > 0) {  // Q'[kh][c][g * R + r] = q_(kh, g)[c * R + r]
    for (int32_t kh = 0; kh < nkv; ++kh)
      for (int64_t c = 0; c < hdp / R; ++c)
        for (int32_t g = 0; g < G; ++g)
          for (int32_t rr = 0; rr < R; ++rr)
            qpk[kh * hdp * G + c * L + g * R + rr] = qs[(kh * G + g) * hdp + c * R + rr];
  }

  slot_offsets(kv, t.kv_begin, imin(Bd, t.kv_end - t.kv_begin), slot_next);
  for (int32_t c0 = t.kv_begin; c0 < t.kv_end; c0 += Bd) {
    const int32_t bc = imin(Bd, t.kv_end - c0);
    {
      int64_t* tmp = slot;
      slot = slot_next;
      slot_next = tmp;
    }
    const int32_t bn = imin(Bd, t.kv_end - (c0 + Bd));  // next chunk's rows (<= 0: none)
    if (bn > 0) slot_offsets(kv, c0 + Bd, bn, slot_next);
    for (int32_t kh = 0; kh < nkv; ++kh) {
      const int64_t head_off = static_cast<int64_t>(kh) * hd;
      // K: read in place (f32) or gathered into float32 rows (bf16 pairs, conversions).
      // V: read in place (f32, bf16 pairs widened by the PV kernel) or gathered.
      const char* kc = static_cast<const char*>(kv.k);
      const char* vc = static_cast<const char*>(kv.v);
      if (copy) {
        for (int32_t j = 0; j < bc; ++j) {
          kp[j] = reinterpret_cast<const float*>(kc + (slot[j] + head_off) * esz);
          vp[j] = vc + (slot[j] + head_off) * esz;
        }
      } else if (pairs) {
        gather_rows<V, Gather::kPairs>(kv.k, dt, slot, head_off, bc, hd, hdp, kbuf);
        for (int32_t j = 0; j < bc; ++j) {
          kp[j] = kbuf + j * hdp;
          vp[j] = vc + (slot[j] + head_off) * esz;
        }
      } else {
        gather_rows<V, Gather::kConvert>(kv.k, dt, slot, head_off, bc, hd, hdp, kbuf);
        gather_rows<V, Gather::kConvert>(kv.v, dt, slot, head_off, bc, hd, hdp, vbuf);
        for (int32_t j = 0; j < bc; ++j) {
          kp[j] = kbuf + j * hdp;
          vp[j] = vbuf + j * hdp;
        }
      }
      for (int32_t j = bc; j < Bd; ++j) kp[j] = kp[0];  // rows past the context: masked
      // While this head-chunk is computed: prefetch what is gathered next (the next head's
      // rows, or the next chunk's first head).
      RowPrefetcher pf;
      pf.k = static_cast<const char*>(kv.k);
      pf.v = static_cast<const char*>(kv.v);
      pf.esz = dt == DType::kF32 ? 4 : 2;
      const bool same = kh + 1 < nkv;
      pf.off = same ? slot : slot_next;
      pf.head_off = same ? head_off + hd : 0;
      pf.row_bytes = hd * pf.esz;
      pf.n = same ? bc : imax(bn, 0);
      float* qh = qs + static_cast<int64_t>(kh) * G * hdp;
      float* qph = qpk + static_cast<int64_t>(kh) * G * hdp;
      float* oh = o + static_cast<int64_t>(kh) * G * hdp;
      if (pairs) {
        decode_head<V, R, DType::kBF16>(kp, vp, bc, G, nv, hdp, qh, qph, oh, m + kh * G, l + kh * G,
                                        s, red, pf, t.softcap_log2);
      } else {
        decode_head<V, R, DType::kF32>(kp, vp, bc, G, nv, hdp, qh, qph, oh, m + kh * G, l + kh * G,
                                       s, red, pf, t.softcap_log2);
      }
    }
  }
  for (int32_t h = 0; h < nh; ++h) {
    const float* oh = o + h * hdp;
    if (t.out != nullptr) {
      const float inv = 1.0f / l[h];
      float* dst = t.out + static_cast<int64_t>(h) * hd;
      for (int64_t p = 0; p < hdp; ++p) {
        const int64_t d = orig(p);
        if (d < hd) dst[d] = oh[p] * inv;
      }
    } else {
      float* dst = t.part + static_cast<int64_t>(h) * (hd + 2);
      dst[0] = m[h];
      dst[1] = l[h];
      for (int64_t p = 0; p < hdp; ++p) {
        const int64_t d = orig(p);
        if (d < hd) dst[2 + d] = oh[p];
      }
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
                              &decode<V>,
                              &tanh_array<V>};
  return k;
}

}  // namespace
}  // namespace llmserve::flash_detail
