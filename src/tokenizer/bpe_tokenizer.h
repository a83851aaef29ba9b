// A BPE tokenizer assembled from pipeline stages: added-token splitting, normalizer,
// pre-tokenizer, BpeModel, post-processing (BOS/EOS) and per-token decoders. Built by the GGUF
// `gpt2` loader (gguf_bpe.cc) and the tokenizer.json loader (hf_tokenizer_json.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

struct BpeTokenizerConfig {
  /// id -> model token text ("" where the id is not a model token, e.g. an added token).
  std::vector<std::string> tokens;
  /// Merges in rank order.
  std::vector<std::pair<std::string, std::string>> merges;
  BpeModel::Options model_options;
  std::vector<AddedToken> added_tokens;
  AddedTokenSplitter::Mode added_mode = AddedTokenSplitter::Mode::kHuggingFace;
  std::unique_ptr<Normalizer> normalizer;      // null: none
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: the whole fragment is one word
  std::unique_ptr<Decoder> decoder;             // null: token text as is
  /// Ids put before/after the text with add_special (post-processor / add_bos / add_eos).
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  /// Ids that count as special besides the special added tokens (GGUF control/unused types).
  std::vector<int32_t> extra_special_ids;
  bool clean_up_tokenization_spaces = false;
  /// Pass added tokens' text through the decoder too (Hugging Face decodes every token string
  /// with the decoder; llama.cpp copies user-defined/control text as is).
  bool decode_added_tokens = false;
};

/// Builds the tokenizer; vocab_size() = max(tokens.size(), largest added id + 1).
std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeTokenizerConfig config);

}  // namespace llmserve
