// GGUF metadata for a Hugging Face directory, as llama.cpp's convert_hf_to_gguf.py writes it
// for the llama / qwen2 / qwen3 architectures (the keys llama.cpp's loader reads), so that
// `llmserve quantize HF_DIR OUT.gguf` gives a file llama.cpp loads. Plus the row order
// llama.cpp expects for llama Q/K weights (the converter permutes HF's rotate-half rows).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "models/model_file.h"
#include "weights/gguf_writer.h"

namespace llmserve::cli {

/// Adds general.architecture / general.name and the `<arch>.*` hyperparameters of `file`'s
/// config (context_length, embedding_length, block_count, feed_forward_length, head counts,
/// key/value_length when head_dim != dim / heads, layer_norm_rms_epsilon, rope.freq_base,
/// rope.dimension_count, linear rope scaling, vocab_size). Errors: Unimplemented for an
/// architecture or feature the export does not cover (deepseek2, llama3 rope scaling).
Status add_hf_model_metadata(GgufWriter& w, const ModelFile& file);

/// Adds the tokenizer.* metadata: every tokenizer.* key of `tokenizer_gguf` when given (a GGUF
/// file of the same vocabulary), else a conversion of the directory's tokenizer.json when it
/// is a SentencePiece-style BPE with byte fallback (Llama 2, TinyLlama, Mistral): model
/// "llama", pieces by id, token types, scores that order merges as the BPE ranks do, special
/// token ids, add_bos/add_eos, and tokenizer.chat_template when the directory has one.
/// Errors (naming the file): NotFound (no tokenizer.json and no --tokenizer), Unimplemented (a
/// byte-level BPE, whose llama.cpp pre-tokenizer name cannot be derived here), InvalidArgument
/// (malformed tokenizer.json, a vocabulary larger than the model's).
Status add_hf_tokenizer_metadata(GgufWriter& w, const ModelFile& file,
                                 const std::string& tokenizer_gguf);

/// True when `gguf_name` is a llama Q or K projection (weight or bias) whose rows llama.cpp's
/// converter permutes; `heads` receives the number of heads the permutation works on.
bool is_permuted_qk(const ModelFile& file, const std::string& gguf_name, int32_t* heads);

/// HF row of GGUF row `g` of a permuted Q/K tensor of `rows` rows and `heads` heads: the
/// converter writes, per head of hd rows, gguf[2i + j] = hf[j * hd / 2 + i]
/// (convert_hf_to_gguf.py LlamaModel.permute).
int64_t hf_row_of_gguf_row(int64_t g, int64_t rows, int32_t heads);

}  // namespace llmserve::cli
