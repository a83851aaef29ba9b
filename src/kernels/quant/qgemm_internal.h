// Private to kernels/quant/: the repacked layout, the quantized activations and the per-ISA
// kernel table of the quantized GEMM (qgemm.h describes the recipe).
#pragma once

#include <xmmintrin.h>  // _mm_prefetch

#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "kernels/quant/qformat.h"

namespace llmserve::qgemm {

inline constexpr int kTileCols = 16;    // weight rows (output columns) per tile
inline constexpr int kLanes = 32;       // int16 lanes per k-pair of a tile: (column, k parity)
inline constexpr int kChunk = 256;      // K elements per chunk (activation scale granularity)
inline constexpr int kUnit = 32;        // K elements per decode unit (16 k-pairs)

/// Byte offsets inside one (tile, chunk) record of `e` elements (a multiple of 32; -1 =
/// region absent). Code planes, lane l = 2 c + p (column c of the tile, k parity p), each
/// plane unit 64 bytes = 32 little-endian 16-bit lane words:
///  - p4 (4-bit codes, low 4 bits): unit of 8 elements, lane word nibble j = code of element
///    k0 + 2 j + p;
///  - p2 (2-bit codes: Q2_K, Q3_K's low bits, Q6_K's high bits): unit of 16 elements, bits
///    2 j..2 j + 1 = element k0 + 2 j + p (Q6_K: bits q6_hi_shift(j) .. + 1 instead);
///  - p1 (1-bit: Q5_x's fifth bit, Q3_K's hmask bit): unit of 32 elements, bit j = element
///    k0 + 2 j + p (Q5_x: bit q5_hi_bit(j) instead);
///  - p8 (Q8_0): unit of 2 elements, 32 bytes, byte l = element k0 + p of column c.
/// Then fp16 d[blocks][16], fp16 dm[blocks][16] (types with a min), int8 sub-scales
/// [e / sub_elems][16], uint8 mins [e / min_sub][16] (K-quants with mins).
/// Bit position of Q6_K's high 2 bits of k-pair j (0..7) of a 16-element p2 unit in its lane
/// word: the pairs (0, 2) of each 8 elements at bits 4 and 12 (0 and 8 for the second 8), and
/// (1, 3) at bits 2 and 10 (6 and 14), so that a shift by at most 4 and one mask put them
/// above the nibbles that vpand 0x0F0F extracts as bytes (qgemm_avx2_bytes.h).
constexpr int q6_hi_shift(int j) {
  constexpr int kShift[8] = {4, 2, 12, 10, 0, 6, 8, 14};
  return kShift[j];
}

/// Bit position of the fifth bit of k-pair j (0..15) of a Q5_x p1 unit in its lane word: the
/// k-pairs 4 i + (0, 1, 2, 3) of p4 vector i at bits i, 4 + i, 8 + i, 12 + i, so that one
/// shift (left by 4 - i for nibbles 0 and 2, right by i for 1 and 3) and one mask put them at
/// bit 4 of the bytes that vpand 0x0F0F extracts from the vector's words (qgemm_avx2_bytes.h).
constexpr int q5_hi_bit(int j) { return 4 * (j % 4) + j / 4; }

struct RecordLayout {
  int64_t p4 = -1, p2 = -1, p1 = -1, p8 = -1, d = -1, dm = -1, sub = -1, min = -1;
  int64_t bytes = 0;
};

/// Elements per sub-scale of a type with sub-scales: 32 for Q4_K / Q5_K / IQ4_XS, else 16.
int sub_elems(DType type);
/// Whether mins are stored per sub-block (Q2_K, Q4_K, Q5_K; Q4_1 / Q5_1 have min 1).
bool stored_mins(DType type);

RecordLayout record_layout(DType type, int64_t e);

/// One single-type matrix, repacked: tiles of 16 rows, each tile the records of its chunks
/// in K order (rows past N are zero: they contribute nothing and are never stored).
struct QPacked {
  DType type = DType::kQ4_0;
  int64_t n = 0, k = 0, tiles = 0, chunks = 0;
  std::vector<int64_t> chunk_offset;  // bytes from a tile's start; chunks + 1 entries
  int64_t tile_bytes = 0;
  RecordLayout full, tail;  // records of 256 elements, and of the last (shorter) chunk
  std::shared_ptr<uint8_t> data;  // 64-byte aligned, tiles * tile_bytes

  const uint8_t* record(int64_t tile, int64_t chunk) const {
    return data.get() + tile * tile_bytes + chunk_offset[chunk];
  }
  const RecordLayout& layout(int64_t chunk) const {
    return chunk + 1 < chunks || k % kChunk == 0 ? full : tail;
  }
  int64_t chunk_elems(int64_t chunk) const {
    return chunk + 1 < chunks || k % kChunk == 0 ? kChunk : k % kChunk;
  }
};

/// Repacks rows [0, w.rows) of a single-type quantized matrix.
std::shared_ptr<const QPacked> repack(DType type, const void* data, int64_t n, int64_t k);

/// Quantized activations of one call (qgemm.h step 1): per row, K int16 codes, one float
/// scale per 256-chunk and the int32 sums of each 16 codes.
struct QActs {
  int64_t m = 0, k = 0, chunks = 0;
  int qmax = 0;
  int16_t* q = nullptr;       // [m][k]
  float* s = nullptr;         // [m][chunks]
  int32_t* bsum16 = nullptr;  // [m][k / 16]
  /// For types with stored mins (Q2_K, Q4_K, Q5_K): per row and chunk, the min sub-blocks'
  /// code sums split as bsum = hi * 512 + lo (lo in [0, 512)) into int16: lo of sub-blocks
  /// 0..15 then hi of 0..15 ([m][chunks][32]); see split_min_sums.
  int16_t* bsplit = nullptr;
  /// For kernels with QKernels::split (AVX2 byte kernels) on calls of at most max_mr rows:
  /// each code as two signed bytes, [m][2 k] (qgemm_avx2_bytes.h split_acts_avx2).
  int8_t* split = nullptr;
};

/// Chunk `i` of a few-row run (QKernels::fused): its K offset, its record and its share of the
/// prefetch range (one record's bytes, clipped to the matrix end; possibly empty).
struct RunChunk {
  int64_t k0;
  const uint8_t* rec;
  const uint8_t* pf;
  int64_t pf_bytes;
};
inline RunChunk run_chunk(int64_t i, int64_t k0, int64_t e, const uint8_t* rec,
                          const RecordLayout& lay, const uint8_t* pf, const uint8_t* pf_end) {
  const uint8_t* p = pf + i * lay.bytes;
  const int64_t left = pf_end - p;
  return {k0 + i * e, rec + i * lay.bytes, p, left < 0 ? 0 : left < lay.bytes ? left : lay.bytes};
}

/// Software-prefetches (T0) the next `n` cache lines from `next`, none at or past `stop`, and
/// advances `next` past them: the fused kernels' per-unit share of a later record. One bound
/// per call, so the loop is a prefetch, an add and a compare per line (the two-condition loop
/// it replaces spent ~7 instructions per line, a quarter of a one-row Q4_K kernel's).
inline void prefetch_lines(const uint8_t*& next, const uint8_t* stop, int64_t n) {
  const uint8_t* end = next + 64 * n;
  if (end > stop) end = stop;
  for (; next < end; next += 64) _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T0);
}

/// Fills a.bsplit for rows [r0, r1) from a.bsum16, for min sub-blocks of `min_sub` elements.
void split_min_sums(const QActs& a, int min_sub, int64_t r0, int64_t r1);

/// The scalar definition of step 1 for rows [r0, r1) (the SIMD versions must match it).
void quantize_acts_ref(const float* x, int64_t r0, int64_t r1, const QActs& a);

/// One tile's decoded chunk and its rows' float accumulators (facc[r][16], row stride 16),
/// for QKernels::chunk.
struct TileBufs {
  const int16_t* wbuf;
  const float* d;
  const float* dm;
  const int16_t* mins;  // int16 pairs of min sub-blocks (lanes as wbuf's)
  float* facc;
};

/// What one ISA provides.
struct QKernels {
  const char* name;
  int max_mr;    // most rows of a `fused` call (few-row calls)
  int chunk_mr;  // rows per `chunk` call (the large-M micro-kernel)
  /// Step 1 for rows [r0, r1) of x (row stride a.k).
  void (*quantize)(const float* x, int64_t r0, int64_t r1, const QActs& a);
  /// Decodes the record of (tile, chunk) with `e` elements into int16 weights
  /// wbuf[e / 2][kLanes] (value * sub_scale, k-pair major, lanes as the planes), float
  /// d[blocks][16] and dm[blocks][16], and int16 min pairs mins[e / min_sub / 2][kLanes]
  /// (stored mins only).
  void (*decode)(DType type, const uint8_t* record, const RecordLayout& lay, int64_t e,
                 int16_t* wbuf, float* d, float* dm, int16_t* mins);
  /// Step 2 for `mr` rows (mr <= chunk_mr) over one chunk of `e` elements starting at K
  /// offset k0, for `nt` (1 or 2) tiles decoded by `decode`: each tile's facc accumulates
  /// every scale block of the chunk. Two tiles share each activation broadcast.
  void (*chunk)(DType type, int mr, int nt, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                const TileBufs* tiles);
  /// decode + chunk in one pass for `mr` <= max_mr rows, reading the records themselves (the
  /// small-M path: no int16 buffer), over a run of `nchunks` consecutive chunks of one tile
  /// with the same layout: chunk i has `e` elements from K offset k0 + i * e and its record
  /// at record + i * lay.bytes (a tile's records are contiguous; one call per run, not per
  /// chunk, saved the call chain and set-up that took ~8 % of a one-row AVX2 GEMM). Same
  /// results, bit for bit, as chunk-by-chunk calls. While it computes chunk i, it
  /// software-prefetches [prefetch + i * lay.bytes, + lay.bytes) clipped to [.., prefetch_end)
  /// (a later record; may be empty), a few cache lines per 32-element unit, so the
  /// prefetches overlap the arithmetic instead of stalling on full fill buffers in one burst.
  void (*fused)(DType type, int mr, const QActs& a, int64_t row0, int64_t k0, int64_t e,
                const uint8_t* record, const RecordLayout& lay, float* facc,
                const uint8_t* prefetch, const uint8_t* prefetch_end, int64_t nchunks);
  /// Optional (null: unused): whether `fused` wants QActs::split for weights of this type,
  /// and the function that fills it for rows [r0, r1).
  bool (*split_type)(DType type) = nullptr;
  void (*split)(const QActs& a, int64_t r0, int64_t r1) = nullptr;
};

const QKernels& qkernels_avx2();
const QKernels& qkernels_avx512();
const QKernels& qkernels_avx512vnni();
const QKernels& qkernels_avxvnni();  // only when cpu_has_avx_vnni()

/// The kernels gemm_quant uses: the override when set (tests), else chosen from cpu_isa(),
/// cpu_has_avx512_vnni() and (below AVX-512) cpu_has_avx_vnni(). Pass null to clear the override.
const QKernels& active_kernels();
void set_kernels_for_testing(const QKernels* kernels);

}  // namespace llmserve::qgemm
