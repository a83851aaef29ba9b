// A SentencePiece-style vocabulary: pieces, merge scores and token types, loaded from a
// llama2.c tokenizer.bin or from GGUF tokenizer.ggml.* metadata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace llmserve {

class GgufFile;

/// GGUF tokenizer.ggml.token_type values (llama.cpp llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
  kByte = 6,
};

struct Vocab {
  std::vector<std::string> pieces;  // id -> piece bytes (as stored; see space_marker)
  std::vector<float> scores;        // id -> merge score (higher merges first)
  std::vector<TokenType> types;     // id -> type
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t unk_id = 0;
  bool add_bos = true;             // prepend BOS when encoding a prompt
  bool add_eos = false;            // append EOS when encoding with add_special
  bool add_space_prefix = true;    // SentencePiece dummy prefix: " " before the text
  /// How a space is spelled inside pieces: "\xe2\x96\x81" (U+2581, SentencePiece / GGUF) or
  /// " " (llama2.c tokenizer.bin, whose exporter replaced U+2581 with a space).
  std::string space_marker = "\xe2\x96\x81";
  /// GGUF general.name ("" for tokenizer.bin); llama.cpp keys per-token attributes on it
  /// (Phi-3: special tokens swallow the whitespace after them).
  std::string model_name;
  /// byte value -> id of its <0xNN> piece, or -1 when the vocabulary lacks it.
  int32_t byte_to_id[256];

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
};

/// The byte value of a "<0xNN>" piece (two hex digits, either case), or -1 for any other piece.
int parse_byte_piece(std::string_view piece);

/// Recomputes vocab.byte_to_id from the pieces typed kByte (-1 where a byte has none).
/// The loaders and make_spm_tokenizer call it; call it yourself after editing a Vocab by hand.
void build_byte_table(Vocab& vocab);

/// Reads a llama2.c tokenizer.bin: int32 max_token_length, then per token {float32 score,
/// int32 len, len bytes}. `vocab_size` comes from the model checkpoint header (the file does
/// not store it); <= 0 = as many tokens as the records that fill the file exactly (the
/// records run to its end). Token types are inferred: 0 <unk>, 1 <s>, 2 </s> control;
/// "<0xNN>" byte. Errors: NotFound, DataLoss (truncated, negative length, or, counting, records
/// that do not end at the end of the file), naming the file.
Expected<Vocab> load_llama2c_vocab(const std::string& path, int32_t vocab_size);

/// Reads tokenizer.ggml.{model,tokens,scores,token_type,bos_token_id,eos_token_id,
/// unknown_token_id,add_bos_token,add_eos_token,add_space_prefix} and general.name from a GGUF
/// file. Only model "llama"
/// (SentencePiece BPE) is supported here; others give Unimplemented naming the model.
Expected<Vocab> load_gguf_vocab(const GgufFile& gguf);

}  // namespace llmserve
