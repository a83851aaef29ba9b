// Attention backends: naive against a float64 computation, flash against naive at random
// shapes (head_dim 48/64/128, MHA/GQA/MQA, block sizes 1/16/128 with shuffled block tables,
// chunked prefill and decode mixed in one batch, KV dtypes f32/bf16/f16, serial and 2 threads,
// AVX2 forced), store_kv_values rounding, and write_kv touching exactly the mapped slots.
// "flash" and "flash-split" both match naive; "flash" is also bitwise batch- and
// chunk-invariant (FlashRowsAreBatchAndChunkInvariant). Logit soft-capping (Gemma 2): every
// backend against a float64 twin, the flash kernels' vector tanh against std::tanh, and
// chunk invariance with the cap on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/flash/flash_kernels.h"

namespace llmserve {
namespace {

struct SeqSpec {
  int32_t num_query;
  int32_t ctx;  // seq_len including this step's queries
  /// Non-zero: this sequence's q/k/v come from its own generator, position by position, so
  /// the same data_seed gives the same rows at the same positions in any batch or chunking.
  uint32_t data_seed = 0;
};

struct Case {
  int32_t head_dim = 64;
  int32_t n_heads = 4;
  int32_t n_kv_heads = 4;
  int32_t block_size = 16;
  DType dtype = DType::kF32;
  std::vector<SeqSpec> seqs;
  uint32_t seed = 1;
  float q_amp = 2.0f;
  /// Sliding window (AttentionShape::window; 0 = none). Blocks wholly before a sequence's
  /// first query's window point at a NaN-filled block nobody owns, as the engine returns them
  /// to the pool: a backend that reads them shows NaN.
  int32_t window = 0;
  /// Logit soft-cap (AttentionShape::softcap; 0 = none).
  float softcap = 0;
};

uint16_t nan_bits(DType t) { return t == DType::kBF16 ? 0x7fc0 : 0x7e00; }

// A paged batch: shuffled block tables, earlier context stored directly, this step's K/V
// written with write_kv; every cache slot nobody owns holds NaN so stray reads show.
struct Batch {
  Case c;
  std::vector<int32_t> query_start_loc, seq_lens, block_tables;
  std::vector<int64_t> slot_mapping;
  int32_t max_blocks = 0;
  int32_t num_tokens = 0;
  std::vector<float> q;                  // [num_tokens, n_heads, hd]
  std::vector<std::vector<float>> k, v;  // per seq: [ctx, n_kv, hd] float values
  std::vector<uint8_t> kcache, vcache;
  AttentionMetadata meta;
  AttentionShape shape;

  explicit Batch(const Case& cs) : c(cs) {
    std::mt19937 rng(c.seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const int32_t ns = static_cast<int32_t>(c.seqs.size());
    int32_t total_blocks = 0;
    for (const auto& s : c.seqs) {
      const int32_t nb = (s.ctx + c.block_size - 1) / c.block_size;
      max_blocks = std::max(max_blocks, nb + 1);  // padded rows
      total_blocks += nb;
    }
    total_blocks += 3;  // spare blocks nobody owns
    std::vector<int32_t> ids(total_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    block_tables.assign(static_cast<size_t>(ns) * max_blocks, -1);
    size_t next = 0;
    query_start_loc.push_back(0);
    for (int32_t s = 0; s < ns; ++s) {
      const int32_t nb = (c.seqs[s].ctx + c.block_size - 1) / c.block_size;
      // Blocks freed by the window: every position of block b is before the first query's
      // window start (ctx - nq) - window + 1.
      const int64_t first_needed = c.window > 0 ? c.seqs[s].ctx - c.seqs[s].num_query - c.window + 1 : 0;
      for (int32_t b = 0; b < nb; ++b)
        block_tables[s * max_blocks + b] = int64_t{b + 1} * c.block_size <= first_needed ? ids.back() : ids[next++];
      for (int32_t b = nb; b < max_blocks; ++b) block_tables[s * max_blocks + b] = ids.back();
      query_start_loc.push_back(query_start_loc.back() + c.seqs[s].num_query);
      seq_lens.push_back(c.seqs[s].ctx);
    }
    num_tokens = query_start_loc.back();
    const int64_t row = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    const size_t esz = dtype_size(c.dtype);
    const int64_t cache_elems = static_cast<int64_t>(total_blocks) * c.block_size * row;
    kcache.resize(cache_elems * esz);
    vcache.resize(cache_elems * esz);
    if (c.dtype == DType::kF32) {
      std::fill_n(reinterpret_cast<float*>(kcache.data()), cache_elems, NAN);
      std::fill_n(reinterpret_cast<float*>(vcache.data()), cache_elems, NAN);
    } else {
      std::fill_n(reinterpret_cast<uint16_t*>(kcache.data()), cache_elems, nan_bits(c.dtype));
      std::fill_n(reinterpret_cast<uint16_t*>(vcache.data()), cache_elems, nan_bits(c.dtype));
    }
    q.resize(static_cast<size_t>(num_tokens) * c.n_heads * c.head_dim);
    for (auto& x : q) x = c.q_amp * uni(rng);
    slot_mapping.resize(num_tokens);
    const int64_t qrow = static_cast<int64_t>(c.n_heads) * c.head_dim;
    for (int32_t s = 0; s < ns; ++s) {
      const int32_t ctx = c.seqs[s].ctx, nq = c.seqs[s].num_query;
      k.emplace_back(static_cast<size_t>(ctx) * row);
      v.emplace_back(static_cast<size_t>(ctx) * row);
      if (c.seqs[s].data_seed != 0) {
        std::mt19937 own(c.seqs[s].data_seed);
        for (int32_t p = 0; p < ctx; ++p) {
          float* qp = p >= ctx - nq ? &q[(query_start_loc[s] + p - (ctx - nq)) * qrow] : nullptr;
          for (int64_t i = 0; i < qrow; ++i) {
            const float x = c.q_amp * uni(own);
            if (qp != nullptr) qp[i] = x;
          }
          for (int64_t i = 0; i < row; ++i) k.back()[p * row + i] = uni(own);
          for (int64_t i = 0; i < row; ++i) v.back()[p * row + i] = uni(own);
        }
      } else {
        for (auto& x : k.back()) x = uni(rng);
        for (auto& x : v.back()) x = uni(rng);
      }
      for (int32_t p = 0; p < ctx; ++p) {
        const int64_t sl = slot(s, p);
        if (block_tables[s * max_blocks + p / c.block_size] == ids.back()) continue;  // freed
        if (p < ctx - nq) {  // earlier context: already cached
          store_kv_values(kcache.data(), c.dtype, sl * row, &k[s][p * row], row);
          store_kv_values(vcache.data(), c.dtype, sl * row, &v[s][p * row], row);
        } else {
          slot_mapping[query_start_loc[s] + p - (ctx - nq)] = sl;
        }
      }
    }
    meta.num_seqs = ns;
    meta.num_tokens = num_tokens;
    meta.query_start_loc = query_start_loc.data();
    meta.seq_lens = seq_lens.data();
    meta.block_tables = block_tables.data();
    meta.max_blocks_per_seq = max_blocks;
    meta.slot_mapping = slot_mapping.data();
    meta.block_size = c.block_size;
    shape = {c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
    shape.softcap = c.softcap;
  }

  int64_t slot(int32_t s, int32_t p) const {
    return static_cast<int64_t>(block_tables[s * max_blocks + p / c.block_size]) * c.block_size +
           p % c.block_size;
  }
  KVCacheLayer cache() { return {kcache.data(), vcache.data(), c.dtype}; }

  // This step's K/V rows, packed [num_tokens, n_kv, hd], for write_kv.
  void step_kv(std::vector<float>& ks, std::vector<float>& vs) const {
    const int64_t row = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    ks.clear();
    vs.clear();
    for (size_t s = 0; s < c.seqs.size(); ++s)
      for (int32_t p = c.seqs[s].ctx - c.seqs[s].num_query; p < c.seqs[s].ctx; ++p) {
        ks.insert(ks.end(), k[s].begin() + p * row, k[s].begin() + (p + 1) * row);
        vs.insert(vs.end(), v[s].begin() + p * row, v[s].begin() + (p + 1) * row);
      }
  }

  std::vector<float> run(const AttentionBackend& b, ThreadPool* pool) {
    std::vector<float> ks, vs;
    step_kv(ks, vs);
    b.write_kv(meta, shape, ks.data(), vs.data(), cache());
    std::vector<float> out(q.size(), NAN);
    b.forward(meta, shape, q.data(), cache(), out.data(), pool);
    return out;
  }
};

std::unique_ptr<AttentionBackend> backend(const char* name) {
  auto b = make_attention_backend(name);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(b).value();
}

float rounded(DType t, float x) {
  if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(x));
  if (t == DType::kF16) return f16_to_f32(f32_to_f16(x));
  return x;
}

// Independent float64 causal attention from the batch's K/V values (rounded to the cache
// dtype the same way the cache holds them): per query and head, s = q.k / sqrt(hd), capped
// to softcap * tanh(s / softcap) when the case has a cap, then only the window's positions
// up to the query's enter the softmax.
std::vector<double> float64_attention(const Batch& b) {
  const auto& c = b.c;
  const int64_t hd = c.head_dim, row = static_cast<int64_t>(c.n_kv_heads) * hd;
  std::vector<double> out(b.q.size());
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const int32_t ctx = c.seqs[s].ctx, nq = c.seqs[s].num_query;
    for (int32_t i = 0; i < nq; ++i) {
      const int32_t t = b.query_start_loc[s] + i, pos = ctx - nq + i;
      for (int32_t h = 0; h < c.n_heads; ++h) {
        const int32_t kvh = h / (c.n_heads / c.n_kv_heads);
        const float* qv = &b.q[(static_cast<int64_t>(t) * c.n_heads + h) * hd];
        const int32_t first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;  // sliding window
        std::vector<double> w(pos + 1, -INFINITY);
        double mx = -INFINITY, sum = 0;
        for (int32_t p = first; p <= pos; ++p) {
          double d = 0;
          for (int64_t x = 0; x < hd; ++x)
            d += double(qv[x]) * rounded(c.dtype, b.k[s][p * row + kvh * hd + x]);
          w[p] = d / std::sqrt(double(hd));
          if (c.softcap > 0) w[p] = c.softcap * std::tanh(w[p] / c.softcap);
          mx = std::max(mx, w[p]);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int64_t x = 0; x < hd; ++x) {
          double o = 0;
          for (int32_t p = first; p <= pos; ++p)
            o += w[p] / sum * rounded(c.dtype, b.v[s][p * row + kvh * hd + x]);
          out[(static_cast<int64_t>(t) * c.n_heads + h) * hd + x] = o;
        }
      }
    }
  }
  return out;
}

TEST(Attention, FactoryNamesAndErrors) {
  for (const char* n : {"naive", "reference", "flash", "flash-split"}) {
    auto b = make_attention_backend(n);
    ASSERT_TRUE(b.ok()) << n;
  }
  EXPECT_STREQ(backend("naive")->name(), "naive");
  EXPECT_STREQ(backend("flash")->name(), "flash");
  EXPECT_STREQ(backend("flash-split")->name(), "flash-split");
  auto bad = make_attention_backend("nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("naive"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("flash"), std::string::npos) << bad.status().message();
}

TEST(Attention, NaiveMatchesFloat64) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    Case c;
    c.head_dim = 48;
    c.n_heads = 6;
    c.n_kv_heads = 2;
    c.block_size = 4;
    c.dtype = dt;
    c.seqs = {{5, 9}, {1, 13}, {7, 7}};
    c.seed = 7;
    Batch b(c);
    ThreadPool pool(2);
    const auto got = b.run(*backend("naive"), &pool);
    const auto want = float64_attention(b);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-6) << dtype_name(dt) << " at " << i;
  }
}

// Sliding windows: naive against float64 (the window's edge inside a block, on a block
// boundary, shorter than a block, longer than the context), freed blocks never read.
TEST(Attention, NaiveMatchesFloat64WithWindows) {
  for (int32_t window : {1, 3, 4, 6, 13, 100}) {
    Case c;
    c.head_dim = 48;
    c.n_heads = 6;
    c.n_kv_heads = 2;
    c.block_size = 4;
    c.window = window;
    c.seqs = {{5, 19}, {1, 23}, {7, 7}, {1, 4}};
    c.seed = 11;
    Batch b(c);
    ThreadPool pool(2);
    const auto got = b.run(*backend("naive"), &pool);
    const auto want = float64_attention(b);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-6) << "window " << window << " at " << i;
  }
}

TEST(Attention, StoreKvValuesRounding) {
  // bf16: round to nearest, ties to even (on the 16 dropped bits); NaN stays NaN.
  const float one = 1.0f;
  uint32_t ob;
  std::memcpy(&ob, &one, 4);
  auto f = [](uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
  };
  // 1 + half an ulp (tie, even down), 1 + 3 half-ulps (tie, even up), just above the tie.
  std::vector<float> src = {1.0f, f(ob + 0x8000), f(ob + 0x18000), f(ob + 0x8001), -2.5f,
                            65504.0f, 1e-8f, f(0x7fc00001), 3.0e38f, -0.0f};
  std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc020,
                                0x4780 /*65504 = 0x477fe000 rounds up to 65536*/, 0x322c, 0x7fc0, 0x7f62, 0x8000};
  // Lengths 10 (vector + tail) and replicated to 37 (several vectors).
  for (int rep : {1, 4}) {
    std::vector<float> s;
    std::vector<uint16_t> w;
    for (int r = 0; r < rep; ++r) {
      s.insert(s.end(), src.begin(), src.end());
      w.insert(w.end(), want.begin(), want.end());
    }
    s.resize(s.size() - (rep > 1 ? 3 : 0));
    w.resize(s.size());
    std::vector<uint16_t> dst(s.size() + 4, 0xdead);
    store_kv_values(dst.data(), DType::kBF16, 2, s.data(), static_cast<int64_t>(s.size()));
    EXPECT_EQ(dst[0], 0xdead);
    EXPECT_EQ(dst[1], 0xdead);
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(dst[i + 2], f32_to_bf16(s[i])) << i;  // agrees with the scalar reference
      if (std::isnan(s[i])) {
        EXPECT_TRUE(std::isnan(bf16_to_f32(dst[i + 2])));
      } else {
        EXPECT_EQ(dst[i + 2], w[i]) << i << " " << s[i];
      }
    }
    EXPECT_EQ(dst[s.size() + 2], 0xdead);
  }
  // f16: exact values, ties to even, overflow to inf, subnormals.
  std::vector<float> h = {1.0f, -2.0f, 65504.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                          70000.0f, 5.960464477539063e-08f, 0.1f, -0.0f};
  std::vector<uint16_t> hw = {0x3c00, 0xc000, 0x7bff, 0x3c00, 0x3c02, 0x7c00, 0x0001, 0x2e66, 0x8000};
  for (int rep : {1, 3}) {
    std::vector<float> s;
    std::vector<uint16_t> w;
    for (int r = 0; r < rep; ++r) {
      s.insert(s.end(), h.begin(), h.end());
      w.insert(w.end(), hw.begin(), hw.end());
    }
    std::vector<uint16_t> dst(s.size());
    store_kv_values(dst.data(), DType::kF16, 0, s.data(), static_cast<int64_t>(s.size()));
    for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(dst[i], w[i]) << i << " " << s[i];
  }
  // f32: a copy at the offset.
  std::vector<float> d32(12, -1.0f);
  store_kv_values(d32.data(), DType::kF32, 1, src.data(), 10);
  EXPECT_EQ(d32[0], -1.0f);
  EXPECT_EQ(d32[11], -1.0f);
  EXPECT_EQ(std::memcmp(&d32[1], src.data(), 40), 0);
}

TEST(Attention, WriteKvTouchesExactlyMappedSlots) {
  for (const char* name : {"naive", "flash"}) {
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      Case c;
      c.head_dim = 64;
      c.n_heads = 8;
      c.n_kv_heads = 2;
      c.block_size = 16;
      c.dtype = dt;
      c.seqs = {{20, 20}, {1, 33}, {5, 40}};
      Batch b(c);
      const auto k_before = b.kcache, v_before = b.vcache;
      std::vector<float> ks, vs;
      b.step_kv(ks, vs);
      backend(name)->write_kv(b.meta, b.shape, ks.data(), vs.data(), b.cache());
      const int64_t row_bytes = static_cast<int64_t>(c.n_kv_heads) * c.head_dim * dtype_size(dt);
      std::vector<int> written(b.kcache.size() / row_bytes, -1);
      for (int32_t t = 0; t < b.num_tokens; ++t) written[b.slot_mapping[t]] = t;
      for (size_t slot = 0; slot < written.size(); ++slot) {
        const size_t off = slot * row_bytes;
        if (written[slot] < 0) {
          EXPECT_EQ(std::memcmp(&b.kcache[off], &k_before[off], row_bytes), 0) << slot;
          EXPECT_EQ(std::memcmp(&b.vcache[off], &v_before[off], row_bytes), 0) << slot;
        } else {
          std::vector<uint8_t> kw(row_bytes), vw(row_bytes);
          const int64_t n = row_bytes / dtype_size(dt);
          store_kv_values(kw.data(), dt, 0, &ks[written[slot] * n], n);
          store_kv_values(vw.data(), dt, 0, &vs[written[slot] * n], n);
          EXPECT_EQ(std::memcmp(&b.kcache[off], kw.data(), row_bytes), 0) << slot;
          EXPECT_EQ(std::memcmp(&b.vcache[off], vw.data(), row_bytes), 0) << slot;
        }
      }
    }
  }
}

// Flash against naive on the same paged batch. Both read the same (rounded) cache and
// compute in float32, so bf16/f16 caches get the same tolerance as f32: the differences are
// summation order and exp2 vs exp (relative ~1e-7 each). Outputs are convex combinations of
// V values in [-1, 1], so an absolute bound is also a relative one.
constexpr float kFlashTol = 1e-5f;

// Max |flash - naive| over the flash configurations: serial, 2 threads, AVX2 forced.
float flash_error(const Case& c) {
  Batch b(c);
  ThreadPool pool(2);
  const auto want = b.run(*backend("naive"), &pool);
  float worst = 0.0f;
  const CpuIsa native = cpu_isa();
  struct Config {
    ThreadPool* pool;
    CpuIsa isa;
  };
  for (const Config cfg : {Config{nullptr, native}, Config{&pool, native}, Config{&pool, CpuIsa::kAvx2}}) {
    set_cpu_isa_for_testing(cfg.isa);
    for (const char* name : {"flash", "flash-split"}) {
      Batch fresh(c);  // NaN-poisoned cache again, so write_kv is exercised for flash too
      const auto got = fresh.run(*backend(name), cfg.pool);
      for (size_t i = 0; i < got.size(); ++i) {
        const float e = std::fabs(got[i] - want[i]);
        if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
      }
    }
  }
  set_cpu_isa_for_testing(native);
  if (std::getenv("ATTN_TEST_VERBOSE")) std::printf("max err %.3g\n", worst);
  return worst;
}

std::string describe(const Case& c) {
  std::string s = "hd=" + std::to_string(c.head_dim) + " heads=" + std::to_string(c.n_heads) +
                  "/" + std::to_string(c.n_kv_heads) + " bs=" + std::to_string(c.block_size) +
                  " " + std::string(dtype_name(c.dtype)) + " seqs=";
  for (const auto& q : c.seqs) s += "(" + std::to_string(q.num_query) + "/" + std::to_string(q.ctx) + ")";
  return s;
}

TEST(Attention, FlashMatchesNaiveSweep) {
  struct Heads {
    int32_t n, kv;
  };
  const Heads heads[] = {{4, 4}, {8, 2}, {16, 2}, {6, 1}, {6, 2}};  // MHA, GQA 4, GQA 8, MQA, 3
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  uint32_t seed = 100;
  int idx = 0;
  for (int32_t hd : {48, 64, 128}) {
    for (const Heads& h : heads) {
      for (int32_t bs : {1, 16, 128}) {
        Case c;
        c.head_dim = hd;
        c.n_heads = h.n;
        c.n_kv_heads = h.kv;
        c.block_size = bs;
        c.dtype = dtypes[idx++ % 3];
        c.seed = seed++;
        // Pure prefill, chunked prefill (earlier context cached), decode, a one-token prompt.
        std::mt19937 rng(c.seed);
        const int32_t odd[] = {17, 129, 300};
        const int32_t p = odd[rng() % 3];
        c.seqs = {{p, p}, {1 + static_cast<int32_t>(rng() % 40), 129}, {1, 300}, {1, 1}, {17, 17}};
        const float err = flash_error(c);
        EXPECT_LE(err, kFlashTol) << describe(c);
      }
    }
  }
}

// Sliding windows in the flash kernels (both families, pool and no pool, flash-split's
// decode kernel too) against naive: windows shorter than a block, than a KV tile (64), across
// tile boundaries, longer than the context; prefill, chunked prefill whose first queries'
// windows start in freed blocks, decodes.
TEST(Attention, FlashMatchesNaiveWithWindows) {
  uint32_t seed = 300;
  for (int32_t window : {1, 5, 16, 40, 63, 64, 65, 100, 500}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Case c;
      c.head_dim = 64;
      c.n_heads = 8;
      c.n_kv_heads = 2;
      c.block_size = window % 2 ? 16 : 1;
      c.dtype = dt;
      c.window = window;
      c.seed = seed++;
      c.seqs = {{150, 150}, {37, 200}, {1, 300}, {1, 45}, {70, 130}, {2, 2}};
      EXPECT_LE(flash_error(c), kFlashTol) << describe(c) << " window " << window;
    }
  }
}

TEST(Attention, FlashOddShapes) {
  struct Shape {
    int32_t hd, n, kv, bs;
    DType dt;
  };
  // head_dim not a multiple of the vector width, head_dim 256, groups of 32 query heads,
  // single-token blocks with a long prompt.
  for (const Shape& sh : {Shape{50, 4, 2, 16, DType::kF32}, Shape{50, 4, 2, 1, DType::kBF16},
                          Shape{256, 4, 1, 16, DType::kF16}, Shape{72, 32, 1, 16, DType::kF32},
                          Shape{64, 2, 2, 1, DType::kF32}}) {
    Case c;
    c.head_dim = sh.hd;
    c.n_heads = sh.n;
    c.n_kv_heads = sh.kv;
    c.block_size = sh.bs;
    c.dtype = sh.dt;
    c.seqs = {{200, 200}, {3, 70}, {1, 65}, {2, 2}};
    c.seed = static_cast<uint32_t>(sh.hd * 31 + sh.n);
    EXPECT_LE(flash_error(c), kFlashTol) << describe(c);
  }
}

TEST(Attention, FlashDecodeSplitsMatchNaive) {
  // Few decode sequences on 2 threads: the context is split (flash-decoding) and merged.
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (auto seqs : {std::vector<SeqSpec>{{1, 1500}}, std::vector<SeqSpec>{{1, 700}, {1, 1030}, {1, 257}},
                      std::vector<SeqSpec>{{1, 300}, {1, 5}}}) {
      Case c;
      c.head_dim = 64;
      c.n_heads = 16;
      c.n_kv_heads = 4;
      c.block_size = 16;
      c.dtype = dt;
      c.seqs = seqs;
      c.q_amp = 4.0f;  // sharper softmax: the merge must rescale correctly
      EXPECT_LE(flash_error(c), kFlashTol) << describe(c);
    }
  }
}

TEST(Attention, FlashSharpSoftmaxAndLargeScores) {
  // Scores spanning a wide range: the running max changes across KV tiles many times.
  Case c;
  c.head_dim = 64;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.block_size = 16;
  c.q_amp = 12.0f;
  c.seqs = {{260, 260}, {1, 400}, {33, 150}};
  EXPECT_LE(flash_error(c), 4 * kFlashTol) << describe(c);
}

// Batch invariance (docs/batch_invariance.md): the "flash" backend's output rows of one
// sequence have the same bits whether the sequence runs alone with its whole prompt in one
// step, or its prompt arrives in chunks of any size (1-token chunks included: they take the
// decode shape) among other sequences (prefills and decodes of other lengths), with or
// without a thread pool, for every KV cache dtype and both kernel families.
struct InvariantShape {
  int32_t hd, n, kv, bs;
};

// One configuration of the chunk-invariance check (the kernel family `isa` is left set).
void expect_chunk_invariant(const InvariantShape& sh, DType dt, CpuIsa isa, int32_t window,
                            float softcap, float q_amp, ThreadPool* pool) {
  constexpr uint32_t kSeed = 4242;
  constexpr int32_t kLen = 200;
  const int32_t cuts[] = {0, 37, 38, 100, 164, 199, kLen};  // chunks [cuts[i], cuts[i + 1])
  set_cpu_isa_for_testing(isa);
  Case c;
  c.head_dim = sh.hd;
  c.n_heads = sh.n;
  c.n_kv_heads = sh.kv;
  c.block_size = sh.bs;
  c.dtype = dt;
  c.seqs = {{kLen, kLen, kSeed}};
  c.window = window;
  c.softcap = softcap;
  c.q_amp = q_amp;
  Batch alone(c);
  const auto want = alone.run(*backend("flash"), nullptr);
  const int64_t qrow = static_cast<int64_t>(sh.n) * sh.hd;
  for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
    const int32_t a = cuts[i], b = cuts[i + 1];
    Case cc = c;
    cc.seed = 900 + static_cast<uint32_t>(i);
    // Others: decodes with long and short contexts, another sequence's prefill chunk.
    cc.seqs = {{1, 300}, {23, 90}, {b - a, b, kSeed}, {1, 7}, {64, 64}};
    Batch batch(cc);
    const auto got = batch.run(*backend("flash"), pool);
    const int64_t at = batch.query_start_loc[2];
    for (int64_t e = 0; e < (b - a) * qrow; ++e) {
      ASSERT_EQ(got[at * qrow + e], want[a * qrow + e])
          << describe(cc) << " chunk [" << a << ", " << b << ") element " << e
          << (isa == CpuIsa::kAvx2 ? " avx2" : "") << " window " << window << " softcap "
          << softcap;
    }
  }
}

TEST(Attention, FlashRowsAreBatchAndChunkInvariant) {
  const CpuIsa native = cpu_isa();
  ThreadPool pool(2);
  // GQA groups 4, 6, 1, 4, 8 and 2: a decode token's scores take every score kernel (grouped
  // K in pairs and fours, K^T, generic) on both ISAs.
  for (const InvariantShape sh : {InvariantShape{64, 8, 2, 16}, InvariantShape{48, 6, 1, 16},
                                  InvariantShape{50, 4, 4, 1}, InvariantShape{128, 16, 4, 16},
                                  InvariantShape{64, 16, 2, 16}, InvariantShape{32, 4, 2, 16}}) {
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (CpuIsa isa : {native, CpuIsa::kAvx2})
        for (int32_t window : {0, 45}) {  // with a window, chunks past it find their early blocks freed
          ASSERT_NO_FATAL_FAILURE(expect_chunk_invariant(sh, dt, isa, window, 0.0f, 2.0f, &pool));
        }
      set_cpu_isa_for_testing(native);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Logit soft-capping (AttentionShape::softcap, Gemma 2).

// Float32 spacing at w's magnitude (subnormal spacing below 2^-126).
double ulp_at(double w) {
  const int e = w == 0 ? -126 : std::max(std::ilogb(w), -126);
  return std::ldexp(1.0, e - 23);
}

// The flash kernels' vector tanh (the soft-cap's) against std::tanh in double, both kernel
// families: a dense grid over [-10, 10], random mantissas in every binade from the subnormals
// to FLT_MAX, both sides of the polynomial / exp2 switch at 0.625, and the specials (+-0,
// +-inf -> +-1, NaN -> NaN). Odd (bitwise), never above 1 in magnitude.
TEST(Attention, FlashTanhIsAccurate) {
  std::vector<float> x;
  for (int i = -10 * 1024; i <= 10 * 1024; ++i) x.push_back(static_cast<float>(i) / 1024.0f);
  std::mt19937 rng(77);
  for (int e = -149; e <= 127; ++e)
    for (int k = 0; k < 256; ++k) {
      const uint32_t mant = rng() & 0x7fffffu;
      const uint32_t bits = e < -126 ? (mant >> (-126 - e)) : (static_cast<uint32_t>(e + 127) << 23 | mant);
      float f;
      std::memcpy(&f, &bits, 4);
      x.push_back(f);
    }
  for (float b : {0.625f, 1.0f, 9.0f, 9.1f, 44.0f})
    for (float f = b, i = 0; i < 8; ++i, f = std::nextafter(f, 0.0f)) x.push_back(f);
  for (float f = 0.625f, i = 0; i < 8; ++i, f = std::nextafter(f, 1.0f)) x.push_back(f);
  x.push_back(0.0f);
  x.push_back(FLT_MAX);
  x.push_back(INFINITY);
  const size_t n_pos = x.size();
  for (size_t i = 0; i < n_pos; ++i) x.push_back(-x[i]);
  x.push_back(NAN);
  std::vector<const flash_detail::FlashKernels*> tables = {&flash_detail::flash_kernels_avx2()};
  if (cpu_isa() >= CpuIsa::kAvx512) tables.push_back(&flash_detail::flash_kernels_avx512());
  for (const auto* K : tables) {
    std::vector<float> y(x.size());
    K->tanh(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i + 1 < x.size(); ++i) {
      ASSERT_FALSE(std::isnan(y[i])) << x[i] << " " << K->isa;
      ASSERT_LE(std::fabs(y[i]), 1.0f) << x[i] << " " << K->isa;
      const double want = std::tanh(static_cast<double>(x[i]));
      const double err = std::fabs(y[i] - want) / ulp_at(want);
      worst = std::max(worst, err);
      ASSERT_LE(err, 3.0) << "tanh(" << x[i] << ") = " << y[i] << " want " << want << " " << K->isa;
    }
    for (size_t i = 0; i < n_pos; ++i) ASSERT_EQ(y[i + n_pos], -y[i]) << x[i] << " " << K->isa;
    EXPECT_EQ(y[n_pos - 1], 1.0f);      // tanh(inf)
    EXPECT_EQ(y[2 * n_pos - 1], -1.0f);  // tanh(-inf)
    EXPECT_TRUE(std::isnan(y.back()));
    EXPECT_TRUE(std::signbit(y[n_pos + n_pos - 4])) << "tanh(-0) = -0";
    // In place and vector tails (every length up to two vectors).
    for (int64_t len = 0; len <= 2 * K->lanes + 1; ++len) {
      std::vector<float> z(x.begin() + 1000, x.begin() + 1000 + len + 1);
      z[len] = -7.0f;
      K->tanh(z.data(), z.data(), len);
      for (int64_t i = 0; i < len; ++i) ASSERT_EQ(z[i], y[1000 + i]) << len << " " << K->isa;
      ASSERT_EQ(z[len], -7.0f);
    }
    if (std::getenv("ATTN_TEST_VERBOSE")) std::printf("tanh %s: max %.2f ulp\n", K->isa, worst);
  }
}

// Outputs are convex combinations of V values in [-1, 1], so an output moves by at most
// 2 max |score error|; a capped score is within a few ulp of its value, |s| <= softcap, which
// adds ~1e-6 softcap to the uncapped bound.
float softcap_tol(float softcap) { return kFlashTol + 1e-6f * softcap; }

// Max |backend - float64| for naive and for flash / flash-split (serial, 2 threads, AVX2
// forced), and how far the cap moves the float64 outputs (cap_effect: the comparison means
// something only if it is large).
struct BackendErrors {
  float naive = 0, flash = 0;
  double cap_effect = 0;
};
BackendErrors errors_vs_float64(const Case& c) {
  BackendErrors r;
  Batch b(c);
  const auto want = float64_attention(b);
  Case uncapped = c;
  uncapped.softcap = 0;
  const auto plain = float64_attention(Batch(uncapped));
  for (size_t i = 0; i < want.size(); ++i)
    r.cap_effect = std::max(r.cap_effect, std::fabs(want[i] - plain[i]));
  auto worst = [&](const std::vector<float>& got, float& w) {
    for (size_t i = 0; i < got.size(); ++i) {
      const float e = static_cast<float>(std::fabs(got[i] - want[i]));
      if (!(e <= w)) w = std::isnan(e) ? INFINITY : e;
    }
  };
  ThreadPool pool(2);
  worst(b.run(*backend("naive"), &pool), r.naive);
  const CpuIsa native = cpu_isa();
  struct Config {
    ThreadPool* pool;
    CpuIsa isa;
  };
  for (const Config cfg : {Config{nullptr, native}, Config{&pool, native}, Config{&pool, CpuIsa::kAvx2}}) {
    set_cpu_isa_for_testing(cfg.isa);
    for (const char* name : {"flash", "flash-split"}) {
      Batch fresh(c);
      worst(fresh.run(*backend(name), cfg.pool), r.flash);
    }
  }
  set_cpu_isa_for_testing(native);
  return r;
}

// Soft-capping in every backend against the float64 twin: caps 1, 5, 50 with scores a few
// caps large (q_amp = 6 softcap: score std ~ 2 softcap, so most scores saturate and the rest
// sit in tanh's curved part), Gemma's head_dim 256 and an odd 24, GQA groups 2 and 4 (the
// flash kernels' packed decode path where the group divides the lanes, the generic one
// otherwise) and 3, no window and a window of 40, f32 and bf16 KV; prefill, chunked prefill,
// decodes and a one-token prompt in one batch, and decode-only batches (flash-split's
// context splits on 2 threads).
TEST(Attention, SoftcapMatchesFloat64) {
  struct Heads {
    int32_t n, kv;
  };
  uint32_t seed = 500;
  int idx = 0;
  for (float softcap : {1.0f, 5.0f, 50.0f}) {
    for (int32_t hd : {24, 256}) {
      for (const Heads h : {Heads{8, 4}, Heads{8, 2}, Heads{6, 2}}) {
        for (int32_t window : {0, 40}) {
          Case c;
          c.head_dim = hd;
          c.n_heads = h.n;
          c.n_kv_heads = h.kv;
          c.block_size = 16;
          c.dtype = idx++ % 2 ? DType::kBF16 : DType::kF32;
          c.window = window;
          c.softcap = softcap;
          c.q_amp = 6.0f * softcap;
          c.seed = seed++;
          c.seqs = {{90, 90}, {37, 160}, {1, 200}, {1, 45}, {1, 1}, {3, 70}};
          const BackendErrors e = errors_vs_float64(c);
          const std::string what = describe(c) + " window " + std::to_string(window) + " softcap " +
                                   std::to_string(softcap);
          EXPECT_LE(e.naive, softcap_tol(softcap)) << what;
          EXPECT_LE(e.flash, softcap_tol(softcap)) << what;
          EXPECT_GT(e.cap_effect, 0.1) << what;
          if (std::getenv("ATTN_TEST_VERBOSE"))
            std::printf("%s: naive %.3g flash %.3g (the cap moves outputs by %.2f)\n", what.c_str(),
                        e.naive, e.flash, e.cap_effect);
        }
      }
    }
    // Decode only: few long contexts on 2 threads, so flash-split splits them.
    Case c;
    c.head_dim = 256;
    c.n_heads = 8;
    c.n_kv_heads = 4;
    c.block_size = 16;
    c.softcap = softcap;
    c.q_amp = 6.0f * softcap;
    c.seed = seed++;
    c.seqs = {{1, 1100}, {1, 600}};
    const BackendErrors e = errors_vs_float64(c);
    EXPECT_LE(e.naive, softcap_tol(softcap)) << describe(c) << " softcap " << softcap;
    EXPECT_LE(e.flash, softcap_tol(softcap)) << describe(c) << " softcap " << softcap;
    EXPECT_GT(e.cap_effect, 0.1) << describe(c) << " softcap " << softcap;
    if (std::getenv("ATTN_TEST_VERBOSE"))
      std::printf("softcap %g decode-only: naive %.3g flash %.3g (the cap moves outputs by %.2f)\n", softcap,
                  e.naive, e.flash, e.cap_effect);
  }
}

// The cap is applied, in the right units: with a small cap the outputs move far from the
// uncapped ones (in float64 and in every backend), with a cap far above every score they do
// not.
TEST(Attention, SoftcapChangesTheResult) {
  Case c;
  c.head_dim = 24;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.q_amp = 6.0f;  // score std ~ 2
  c.window = 40;
  c.seqs = {{90, 90}, {1, 200}, {5, 60}};
  Batch plain(c);
  const auto ref_plain = float64_attention(plain);
  Case capped_case = c;
  capped_case.softcap = 1.0f;
  Batch capped(capped_case);
  const auto ref_capped = float64_attention(capped);
  Case loose_case = c;
  loose_case.softcap = 1e5f;
  Batch loose(loose_case);
  auto max_diff = [](const auto& a, const auto& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
  };
  EXPECT_GT(max_diff(ref_plain, ref_capped), 0.1);
  for (const char* name : {"naive", "flash", "flash-split"}) {
    Batch p(c), q(capped_case), r(loose_case);
    const auto out_plain = p.run(*backend(name), nullptr);
    const auto out_capped = q.run(*backend(name), nullptr);
    const auto out_loose = r.run(*backend(name), nullptr);
    EXPECT_GT(max_diff(out_plain, out_capped), 0.1) << name;
    EXPECT_LE(max_diff(out_capped, ref_capped), softcap_tol(1.0f)) << name;
    EXPECT_LE(max_diff(out_loose, out_plain), kFlashTol) << name;
  }
}

// Chunk invariance with the cap on: Gemma shapes (head_dim 256, groups 2 and 4; head_dim 24),
// caps 1 and 50, with and without a window, f32 and bf16 KV, both kernel families.
TEST(Attention, FlashRowsAreChunkInvariantWithSoftcap) {
  const CpuIsa native = cpu_isa();
  ThreadPool pool(2);
  for (const InvariantShape sh : {InvariantShape{256, 8, 4, 16}, InvariantShape{256, 4, 1, 16},
                                  InvariantShape{24, 8, 2, 1}}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (CpuIsa isa : {native, CpuIsa::kAvx2})
        for (int32_t window : {0, 45})
          for (float softcap : {1.0f, 50.0f}) {
            ASSERT_NO_FATAL_FAILURE(
                expect_chunk_invariant(sh, dt, isa, window, softcap, 6.0f * softcap, &pool));
          }
      set_cpu_isa_for_testing(native);
    }
  }
}

}  // namespace
}  // namespace llmserve
