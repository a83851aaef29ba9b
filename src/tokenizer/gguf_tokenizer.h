// Internal: GGUF tokenizer.ggml.* helpers shared by the SentencePiece (gguf_vocab.cc) and
// byte-level BPE (gguf_bpe.cc) loaders.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

class GgufFile;

/// tokenizer.ggml.{bos,eos,unknown}_token_id when present (-1 / 0xFFFFFFFF = none); ids outside
/// [0, vocab_size) are DataLoss naming the key.
Status load_gguf_special_ids(const GgufFile& gguf, int32_t vocab_size, int32_t& bos,
                             int32_t& eos, int32_t& unk);

/// A boolean key when present (left unchanged otherwise).
Status load_gguf_flag(const GgufFile& gguf, std::string_view key, bool& flag);

/// llama.cpp's pre-tokenizer regex list for a tokenizer.ggml.pre name (its default list for
/// unknown names), and every name the table knows (for tests).
std::vector<std::string> gguf_pre_regexes(std::string_view pre);
std::vector<std::string> gguf_pre_names();

/// tokenizer.ggml.model == "gpt2".
Expected<std::unique_ptr<Tokenizer>> load_gguf_bpe_tokenizer(const GgufFile& gguf);

}  // namespace llmserve
