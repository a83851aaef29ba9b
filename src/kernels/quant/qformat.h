// The integer view of ggml's quantized blocks that llmserve's quantized GEMM computes with
// (kernels/quant/qgemm.h). Every type is read as "scale blocks" (the 32-element block of
// Q4_0 ... IQ4_NL, the 256-element super-block of the K-quants and IQ4_XS); in a scale block
// element i of a weight row is
//
//     x_i = d * (value(code_i) * sub_scale[i / 16]) + dm * min[i / min_sub]
//
// with `code` the stored bits, value(code) = code - offset (or the IQ4_NL codebook), integer
// sub-block scales and mins, and two floats per block: d and dm (dm = -dmin for the
// K-quants with mins, +m for Q4_1/Q5_1; absent otherwise). This is exactly ggml's
// dequantization (ggml-common.h layouts, gguf-py/gguf/quants.py arithmetic) regrouped so that
// the integer part can be dotted with integer activations exactly.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace llmserve::qgemm {

/// What the GEMM needs to know about one weight type.
struct QuantTraits {
  int block_elems;    // elements per scale block (32 or 256)
  int code_bits;      // bits per stored code: 2, 3 (Q3_K: 2 + 1), 4, 5 (4 + 1), 6 (4 + 2), 8
  int offset;         // value = code - offset (linear types)
  bool codebook;      // value = kIq4nlValues[code] (IQ4_NL, IQ4_XS)
  bool sub_scales;    // per-16 integer sub-block scales (K-quants, IQ4_XS)
  int min_sub;        // elements per min sub-block (16 or 32); 0 = no min term
  /// Largest |activation code|: chosen per type so that one scale block's integer dot
  /// product sum(value * sub_scale * a) never overflows int32 (max |value * sub_scale| x
  /// qmax x block_elems < 2^31), with as many activation bits as that allows.
  int act_qmax;
};

/// Traits of a quantized dtype (check is_quantized first).
const QuantTraits& quant_traits(DType type);

/// One scale block of one weight row, decoded to integers (the slow, obviously-correct
/// decoder; the GEMM's repacking and the recipe reference both use it).
struct IntBlock {
  int n = 0;                 // elements (block_elems)
  uint8_t code[256];         // stored code of each element (Q8_0: the int8 bits)
  int16_t value[256];        // value(code): code - offset, the codebook entry, or the int8
  int16_t sub_scale[16];     // per 16 elements (1 when the type has none)
  int16_t min[16];           // per min sub-block (min_sub elements); unused without a min
  float d = 0;               // block scale
  float dm = 0;              // min multiplier: -dmin (K-quants) or +m (Q4_1, Q5_1)
};

/// Decodes block `block_index` of a row of `type` starting at `row` (unaligned bytes).
void decode_block(DType type, const void* row, int64_t block_index, IntBlock* out);

}  // namespace llmserve::qgemm
