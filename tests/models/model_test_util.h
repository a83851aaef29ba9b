// Test helpers shared by the model tests: logits compared with a reference (max |diff| and
// argmax agreement), a synthetic model's tensors as editable float32 copies (the synthetic
// GGUFs store F32), and the DeepSeek-V2 kv_b layout surgery.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "weights/gguf.h"

namespace llmserve::testing {

/// How far logits [n, vocab] are from a reference of the same shape.
struct Compare {
  double max_diff = 0;            // max |got - ref| over all entries
  int32_t argmax_mismatches = 0;  // positions whose argmax differs
  int32_t positions = 0;
  double argmax_agree() const { return positions > 0 ? 1.0 - double(argmax_mismatches) / positions : 0; }
};

inline Compare compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  Compare c;
  EXPECT_EQ(got.size(), ref.size());
  if (got.size() != ref.size()) return c;
  c.positions = static_cast<int32_t>(got.size() / vocab);
  for (int32_t t = 0; t < c.positions; ++t) {
    const float* g = &got[t * vocab];
    const float* r = &ref[t * vocab];
    int64_t ag = 0, ar = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      c.max_diff = std::max(c.max_diff, static_cast<double>(std::fabs(g[v] - r[v])));
      if (g[v] > g[ag]) ag = v;
      if (r[v] > r[ar]) ar = v;
    }
    if (ag != ar) ++c.argmax_mismatches;
  }
  return c;
}

/// One tensor of a file to write: float32 values with a (possibly new) shape.
struct OutTensor {
  std::string name;
  std::vector<int64_t> shape;  // outermost first
  std::vector<float> data;
};

/// Every tensor of `g` (all F32) as an OutTensor, in file order.
inline std::vector<OutTensor> tensors_of(const GgufFile& g) {
  std::vector<OutTensor> out;
  for (const TensorView& t : g.tensors()) {
    EXPECT_EQ(t.dtype, DType::kF32);
    const auto* f = static_cast<const float*>(t.data);
    out.push_back({t.name, t.shape, std::vector<float>(f, f + t.numel())});
  }
  return out;
}

/// Replaces each layer's split attn_k_b [H, L, nope] + attn_v_b [H, vh, L] (llama.cpp's
/// converter) by the unsplit attn_kv_b [H * (nope + vh), L] (HF kv_b_proj, older GGUFs): per
/// head h, rows [h*(nope+vh), +nope) are W_UK_h = attn_k_b[h]^T and the next vh rows
/// attn_v_b[h].
inline std::vector<OutTensor> with_unsplit_kv_b(std::vector<OutTensor> tensors, int64_t H,
                                                int64_t L, int64_t nope, int64_t vh) {
  std::vector<OutTensor> out;
  std::map<std::string, OutTensor> kb, vb;
  for (OutTensor& t : tensors) {
    const auto at = t.name.find("attn_k_b.weight"), av = t.name.find("attn_v_b.weight");
    if (at != std::string::npos) {
      kb[t.name.substr(0, at)] = std::move(t);
    } else if (av != std::string::npos) {
      vb[t.name.substr(0, av)] = std::move(t);
    } else {
      out.push_back(std::move(t));
    }
  }
  EXPECT_EQ(kb.size(), vb.size());
  for (const auto& [prefix, k] : kb) {
    EXPECT_EQ(k.shape, (std::vector<int64_t>{H, L, nope}));
    const OutTensor& v = vb.at(prefix);
    EXPECT_EQ(v.shape, (std::vector<int64_t>{H, vh, L}));
    OutTensor kv{prefix + "attn_kv_b.weight", {H * (nope + vh), L}, {}};
    kv.data.resize(H * (nope + vh) * L);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t n = 0; n < nope; ++n)
        for (int64_t c = 0; c < L; ++c)
          kv.data[(h * (nope + vh) + n) * L + c] = k.data[(h * L + c) * nope + n];
      std::copy_n(&v.data[h * vh * L], vh * L, &kv.data[(h * (nope + vh) + nope) * L]);
    }
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace llmserve::testing
