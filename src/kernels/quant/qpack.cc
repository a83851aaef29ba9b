// Repacking of quantized weights into qgemm tiles, the scalar activation quantizer and the
// scalar recipe reference (qgemm.h). Built with -ffp-contract=off: the reference's float
// steps are exactly the ones the SIMD kernels perform.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/check.h"
#include "common/weight_alloc.h"
#include "kernels/quant/qgemm.h"
#include "kernels/quant/qgemm_internal.h"

namespace llmserve::qgemm {

int sub_elems(DType type) {
  return type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kIQ4_XS ? 32 : 16;
}

bool stored_mins(DType type) {
  return type == DType::kQ2_K || type == DType::kQ4_K || type == DType::kQ5_K;
}

RecordLayout record_layout(DType type, int64_t e) {
  const QuantTraits& t = quant_traits(type);
  RecordLayout r;
  int64_t at = 0;
  auto take = [&at](int64_t bytes) {
    const int64_t off = at;
    at += bytes;
    return off;
  };
  switch (t.code_bits) {
    case 2: r.p2 = take(4 * e); break;
    case 3: r.p2 = take(4 * e), r.p1 = take(2 * e); break;
    case 4: r.p4 = take(8 * e); break;
    case 5: r.p4 = take(8 * e), r.p1 = take(2 * e); break;
    case 6: r.p4 = take(8 * e), r.p2 = take(4 * e); break;
    case 8: r.p8 = take(16 * e); break;
    default: LLMS_CHECK(false, "record_layout: {} code bits", t.code_bits);
  }
  const int64_t blocks = e / t.block_elems;
  r.d = take(blocks * kTileCols * 2);
  if (t.min_sub > 0) r.dm = take(blocks * kTileCols * 2);
  if (t.sub_scales) r.sub = take(e / sub_elems(type) * kTileCols);
  if (stored_mins(type)) r.min = take(e / t.min_sub * kTileCols);
  r.bytes = at;
  return r;
}

namespace {

inline void or_word(uint8_t* plane, int64_t word, unsigned bits) {
  uint16_t v;
  std::memcpy(&v, plane + 2 * word, 2);
  v = static_cast<uint16_t>(v | bits);
  std::memcpy(plane + 2 * word, &v, 2);
}

/// Writes column `col` of one record: the blocks of the chunk [k0, k0 + e) of row `row`.
void pack_column(DType type, const void* row, int64_t k0, int64_t e, int col, uint8_t* rec,
                 const RecordLayout& lay) {
  const QuantTraits& t = quant_traits(type);
  const int64_t first_block = k0 / t.block_elems;
  IntBlock ib;
  for (int64_t b = 0; b < e / t.block_elems; ++b) {
    decode_block(type, row, first_block + b, &ib);
    const int64_t base = b * t.block_elems;  // element offset inside the chunk
    for (int i = 0; i < ib.n; ++i) {
      const int64_t kk = base + i;
      const int lane = 2 * col + static_cast<int>(kk % 2);
      const unsigned c = ib.code[i];
      switch (t.code_bits) {
        case 2: or_word(rec + lay.p2, kk / 16 * kLanes + lane, c << (2 * ((kk % 16) / 2))); break;
        case 3:
          or_word(rec + lay.p2, kk / 16 * kLanes + lane, (c & 3) << (2 * ((kk % 16) / 2)));
          or_word(rec + lay.p1, kk / 32 * kLanes + lane, (c >> 2) << ((kk % 32) / 2));
          break;
        case 8: rec[lay.p8 + kk / 2 * kLanes + lane] = static_cast<uint8_t>(c); break;
        default:  // 4, 5, 6: low nibble plane, then the high bits
          or_word(rec + lay.p4, kk / 8 * kLanes + lane, (c & 15) << (4 * ((kk % 8) / 2)));
          if (t.code_bits == 5)
            or_word(rec + lay.p1, kk / 32 * kLanes + lane, (c >> 4) << q5_hi_bit((kk % 32) / 2));
          if (t.code_bits == 6)
            or_word(rec + lay.p2, kk / 16 * kLanes + lane, (c >> 4) << q6_hi_shift((kk % 16) / 2));
      }
    }
    const uint16_t d16 = f32_to_f16(ib.d);
    std::memcpy(rec + lay.d + 2 * (b * kTileCols + col), &d16, 2);
    if (lay.dm >= 0) {
      const uint16_t dm16 = f32_to_f16(ib.dm);
      std::memcpy(rec + lay.dm + 2 * (b * kTileCols + col), &dm16, 2);
    }
    if (lay.sub >= 0) {
      const int se = sub_elems(type);
      for (int s = 0; s < ib.n / se; ++s)
        rec[lay.sub + (base / se + s) * kTileCols + col] =
            static_cast<uint8_t>(static_cast<int8_t>(ib.sub_scale[s * se / 16]));
    }
    if (lay.min >= 0) {
      for (int s = 0; s < ib.n / t.min_sub; ++s)
        rec[lay.min + (base / t.min_sub + s) * kTileCols + col] = static_cast<uint8_t>(ib.min[s]);
    }
  }
}

}  // namespace

std::shared_ptr<const QPacked> repack(DType type, const void* data, int64_t n, int64_t k) {
  auto p = std::make_shared<QPacked>();
  p->type = type;
  p->n = n;
  p->k = k;
  p->tiles = (n + kTileCols - 1) / kTileCols;
  p->chunks = (k + kChunk - 1) / kChunk;
  p->full = record_layout(type, kChunk);
  p->tail = record_layout(type, k % kChunk == 0 ? kChunk : k % kChunk);
  p->chunk_offset.resize(static_cast<size_t>(p->chunks) + 1);
  int64_t off = 0;
  for (int64_t c = 0; c < p->chunks; ++c) {
    p->chunk_offset[c] = off;
    off += p->layout(c).bytes;
  }
  p->chunk_offset[p->chunks] = off;
  p->tile_bytes = (off + 63) / 64 * 64;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(p->tiles * p->tile_bytes, 64));
  p->data = alloc_weight_block(bytes);
  if (p->data == nullptr) throw std::bad_alloc();
  uint8_t* const buf = p->data.get();
  std::memset(buf, 0, bytes);
  const int64_t row_bytes = dtype_row_bytes(type, k);
  for (int64_t tile = 0; tile < p->tiles; ++tile)
    for (int64_t c = 0; c < p->chunks; ++c) {
      uint8_t* rec = buf + tile * p->tile_bytes + p->chunk_offset[c];
      for (int col = 0; col < kTileCols && tile * kTileCols + col < n; ++col) {
        const auto* row = static_cast<const uint8_t*>(data) + (tile * kTileCols + col) * row_bytes;
        pack_column(type, row, c * kChunk, p->chunk_elems(c), col, rec, p->layout(c));
      }
    }
  return p;
}

void split_min_sums(const QActs& a, int min_sub, int64_t r0, int64_t r1) {
  const int subs = kChunk / min_sub;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < a.chunks; ++c) {
      int16_t* out = a.bsplit + (r * a.chunks + c) * 32;
      for (int j = 0; j < 16; ++j) {
        int32_t sum = 0;
        const int64_t at = c * kChunk + j * min_sub;
        if (j < subs && at < a.k)
          for (int i = 0; i < min_sub / 16; ++i) sum += a.bsum16[r * (a.k / 16) + at / 16 + i];
        out[j] = static_cast<int16_t>(sum & 511);
        out[16 + j] = static_cast<int16_t>(sum >> 9);  // arithmetic: hi * 512 + lo == sum
      }
    }
}

void quantize_acts_ref(const float* x, int64_t r0, int64_t r1, const QActs& a) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * a.k;
    int16_t* q = a.q + r * a.k;
    for (int64_t c = 0; c < a.chunks; ++c) {
      const int64_t i0 = c * kChunk, i1 = std::min(a.k, i0 + kChunk);
      float amax = 0;
      bool finite = true;
      for (int64_t i = i0; i < i1; ++i) {
        const float v = std::fabs(xr[i]);
        finite = finite && v <= FLT_MAX;
        amax = v > amax ? v : amax;
      }
      float& s = a.s[r * a.chunks + c];
      if (!finite || amax == 0) {
        s = finite ? 0.0f : NAN;  // NaN propagates to the outputs, as float GEMM's would
        for (int64_t i = i0; i < i1; ++i) q[i] = 0;
        continue;
      }
      const float qmax = static_cast<float>(a.qmax);
      s = amax / qmax;
      const float inv = qmax / amax;
      for (int64_t i = i0; i < i1; ++i) {
        float v = std::nearbyint(xr[i] * inv);
        v = std::min(qmax, std::max(-qmax, v));
        q[i] = static_cast<int16_t>(v);
      }
    }
    for (int64_t j = 0; j < a.k / 16; ++j) {
      int32_t sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[16 * j + i];
      a.bsum16[r * (a.k / 16) + j] = sum;
    }
  }
}

}  // namespace llmserve::qgemm

namespace llmserve {

void gemm_quant_recipe_ref(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  using namespace qgemm;
  LLMS_CHECK(is_quantized(w.dtype) && w.parts == nullptr && w.data != nullptr,
             "gemm_quant_recipe_ref: W must be one quantized matrix");
  const QuantTraits& t = quant_traits(w.dtype);
  const int64_t n = w.rows, k = w.cols;
  std::vector<int16_t> q(static_cast<size_t>(m * k));
  std::vector<float> s(static_cast<size_t>(m * ((k + kChunk - 1) / kChunk)));
  std::vector<int32_t> bsum(static_cast<size_t>(m * (k / 16)));
  QActs a{m, k, (k + kChunk - 1) / kChunk, t.act_qmax, q.data(), s.data(), bsum.data()};
  quantize_acts_ref(x, 0, m, a);
  const int64_t row_bytes = dtype_row_bytes(w.dtype, k);
  const int64_t blocks = k / t.block_elems;
  std::vector<float> acc(static_cast<size_t>(m));
  IntBlock ib;
  for (int64_t j = 0; j < n; ++j) {
    const auto* row = static_cast<const uint8_t*>(w.data) + j * row_bytes;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      decode_block(w.dtype, row, b, &ib);
      const int64_t k0 = b * t.block_elems;
      for (int64_t r = 0; r < m; ++r) {
        const int16_t* qa = a.q + r * k + k0;
        const float sc = a.s[r * a.chunks + k0 / kChunk];
        int32_t isum = 0;
        for (int i = 0; i < ib.n; ++i) isum += ib.value[i] * ib.sub_scale[i / 16] * qa[i];
        const float ds = ib.d * sc;
        acc[r] = std::fma(static_cast<float>(isum), ds, acc[r]);
        if (t.min_sub > 0) {
          int32_t mn = 0;
          for (int sb = 0; sb < ib.n / t.min_sub; ++sb) {
            int32_t bs = 0;
            for (int i = 0; i < t.min_sub / 16; ++i)
              bs += a.bsum16[r * (k / 16) + (k0 + sb * t.min_sub) / 16 + i];
            mn += ib.min[sb] * bs;
          }
          const float dms = ib.dm * sc;
          acc[r] = std::fma(static_cast<float>(mn), dms, acc[r]);
        }
      }
    }
    for (int64_t r = 0; r < m; ++r) y[r * n + j] = acc[r];
  }
}

}  // namespace llmserve
