// Least-squares fits of one group of values to integer codes: the building block of every
// quantizer in quantize.h. A group is a ggml block (Q8_0, Q4_0, ...: 32 values) or a K-quant
// sub-block (16 or 32 values). Both fits minimise the weighted squared error
// sum_i w[i] (x[i] - xhat[i])^2 (w = nullptr: every weight 1, i.e. plain MSE, the right target
// when nothing is known about the activations; an importance matrix would go in `w`).
//
// The search is the one llama.cpp's quantizers use (ggml/src/ggml-quants.c: make_qx_quants for
// the symmetric form, make_qkx2_quants for the affine one; the idea is from the k-quants PR,
// ggml-org/llama.cpp#1684): try a grid of inverse scales around the one that maps the extreme
// value to the extreme code, round, and keep the candidate whose least-squares scale (and
// offset) for those codes has the smallest error. We then refine the winner by alternating
// "round to the nearest code for this scale" and "least-squares scale for these codes"
// (Lloyd's algorithm in one dimension), which can only lower the error.
//
// n (the group size) must be a multiple of 8 and at most 256.
#pragma once

#include <cstdint>

namespace llmserve::quant {

/// x[i] ~ scale * q[i] with integer q[i] in [qmin, qmax] (qmin < 0 < qmax). When the range is
/// lopsided (Q4_0: [-8, 7]) both orientations are tried: the value of largest magnitude on
/// the longer side (the scale then has the opposite sign of that value) or on the shorter
/// one. Writes the codes to q[0..n) and returns the scale (0 with all codes 0 for a group
/// of zeros). `error`, when not null, receives the weighted squared error.
float fit_symmetric(const float* x, const float* w, int n, int qmin, int qmax, int8_t* q,
                    float* error = nullptr);

/// Scale and offset of an affine fit.
struct AffineFit {
  float scale = 0;   // >= 0
  float offset = 0;  // x ~ scale * q + offset
  float error = 0;   // weighted squared error
};

/// x[i] ~ scale * q[i] + offset with integer q[i] in [0, qmax]. With `offset_nonpositive` the
/// offset is kept <= 0 (the K-quants store it as -dmin * mn with unsigned mn, so a group of
/// positive values is fitted from 0, as ggml does). `rmin`, `rdelta`, `nstep`: the grid of
/// inverse scales (qmax + rmin + rdelta * k) / (max - min), k = 0..nstep (ggml's values:
/// -1, 0.1, 20 for Q4_K; -0.5, 0.1, 15 for Q5_K). Writes q[0..n).
AffineFit fit_affine(const float* x, const float* w, int n, int qmax, bool offset_nonpositive,
                     float rmin, float rdelta, int nstep, uint8_t* q);

/// The nearest integer to v in [lo, hi] (ties to even, as ggml's nearest_int): v is clamped
/// first, so infinities give a code in range (NaN gives lo).
inline int round_code(float v, int lo, int hi) {
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  const float c = v > flo ? (v < fhi ? v : fhi) : flo;
  // Adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits (|c| < 2^22).
  const float t = c + 12582912.0f;
  int32_t bits;
  __builtin_memcpy(&bits, &t, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace llmserve::quant
