// llama2.c checkpoint reader (karpathy/llama2.c, run.c "legacy" version 0 format):
// header of 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len};
// a negative vocab_size means the classifier is NOT tied (a separate wcls follows).
// Then float32 arrays in this order (shapes row-major, [out, in] for linear layers):
//   token_embedding [vocab, dim], rms_att [L, dim], wq [L, n_heads*hs, dim],
//   wk [L, n_kv_heads*hs, dim], wv [L, n_kv_heads*hs, dim], wo [L, dim, n_heads*hs],
//   rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden], w3 [L, hidden, dim],
//   rms_final [dim], freq_cis_real [seq_len, hs/2], freq_cis_imag [seq_len, hs/2] (unused),
//   wcls [vocab, dim] (only if not tied).   hs = dim / n_heads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "weights/mapped_file.h"
#include "weights/tensor_view.h"

namespace llmserve {

struct Llama2cHeader {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int32_t vocab_size = 0;  // always positive here
  int32_t seq_len = 0;
  bool shared_classifier = true;
};

class Llama2cCheckpoint {
 public:
  /// Opens and validates: header values positive and consistent (dim % n_heads == 0,
  /// n_heads % n_kv_heads == 0), file size exactly what the header implies (+ wcls if untied).
  /// Errors (naming the file): NotFound, DataLoss (truncated / size mismatch / bad header).
  static Expected<Llama2cCheckpoint> open(const std::string& path);

  /// Reads and checks only the 28-byte header (what format detection needs to tell a
  /// llama2.c checkpoint from some other file). Errors as open() for the header.
  static Expected<Llama2cHeader> read_header(const std::string& path);

  const Llama2cHeader& header() const { return header_; }
  const std::string& path() const { return file_.path(); }

  /// Tensors under llama.cpp's GGUF names, so one loader serves both formats:
  /// token_embd.weight, output_norm.weight, output.weight (aliases token_embd when tied),
  /// blk.{i}.attn_norm.weight, blk.{i}.attn_q.weight, blk.{i}.attn_k.weight,
  /// blk.{i}.attn_v.weight, blk.{i}.attn_output.weight, blk.{i}.ffn_norm.weight,
  /// blk.{i}.ffn_gate.weight (w1), blk.{i}.ffn_down.weight (w2), blk.{i}.ffn_up.weight (w3).
  /// All F32; shapes as HF ([out, in]).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const;

 private:
  MappedFile file_;
  Llama2cHeader header_;
  std::vector<TensorView> tensors_;
};

}  // namespace llmserve
