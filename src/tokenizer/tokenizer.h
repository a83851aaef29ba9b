// Text <-> token ids. The interface every tokenizer model implements: SentencePiece BPE
// (llama2.c tokenizer.bin, GGUF `llama`), byte-level BPE (GGUF `gpt2` + `tokenizer.ggml.pre`)
// and Hugging Face tokenizer.json (BPE, byte-level or SentencePiece-style with byte fallback).
// Loaders for all of them are at the end of this header.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/vocab.h"

namespace llmserve {

class GgufFile;

/// How to encode a text.
struct EncodeOptions {
  /// Add the special tokens the tokenizer's configuration asks for around the text: BOS/EOS
  /// per GGUF tokenizer.ggml.add_bos_token/add_eos_token, or tokenizer.json's post_processor
  /// (TemplateProcessing) overridden by tokenizer_config.json add_bos_token/add_eos_token.
  /// BOS is never added when the encoded text already starts with it (parse_special).
  bool add_special = false;
  /// Recognise special/control tokens written in the text (e.g. "<|im_start|>") as those
  /// tokens. Off for raw user text: the characters are then encoded as ordinary text.
  /// Non-special added tokens (GGUF user-defined, tokenizer.json added_tokens with
  /// "special": false) are always recognised, as in llama.cpp and Hugging Face tokenizers.
  bool parse_special = false;
};

/// How to decode ids.
struct DecodeOptions {
  /// Drop special tokens (control tokens, tokenizer.json added tokens with "special": true).
  bool skip_special_tokens = true;
  /// Apply transformers' clean_up_tokenization (" ." -> ".", " 's" -> "'s", ...). Unset: the
  /// tokenizer's default (tokenizer_config.json clean_up_tokenization_spaces; false for GGUF
  /// and tokenizer.bin).
  std::optional<bool> clean_up_tokenization_spaces;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Encodes `text` with `add_special = add_bos`, `parse_special = false`. Never fails: bytes
  /// that are not valid UTF-8 become byte tokens. Empty text gets no dummy prefix.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

  /// Encodes `text` as `options` say. Never fails (ill-formed UTF-8 becomes byte tokens; a
  /// regex error inside a pre-tokenizer leaves the rest of that piece unsplit). The default
  /// forwards to encode(text, options.add_special) for tokenizers without special-token parsing.
  virtual std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const {
    return encode(text, options.add_special);
  }

  /// The bytes token `id` stands for when it follows `prev_id` (-1 at the start), with special
  /// tokens skipped: byte pieces <0xNN> give their single raw byte; the space marker becomes
  /// ' '; the leading space of the first piece after BOS (or at the start) is dropped, as
  /// SentencePiece's decoder does (only for vocabularies with add_space_prefix, whose encoder put
  /// that space there); byte-level pieces give their bytes; control tokens give "".
  /// Out-of-range ids give "". The result may end inside a UTF-8 sequence.
  virtual std::string decode_token(int32_t prev_id, int32_t id) const = 0;

  /// As decode_token(prev_id, id), but special tokens give their text when !skip_special.
  virtual std::string decode_token(int32_t prev_id, int32_t id, bool skip_special) const {
    return skip_special || !is_special(id) ? decode_token(prev_id, id) : piece(id);
  }

  /// Concatenation of decode_token over `ids` (prev_id chained; first prev_id = -1): the raw
  /// bytes, special tokens skipped, no clean-up.
  std::string decode(const std::vector<int32_t>& ids) const;

  /// Decodes as `options` say. The result is always valid UTF-8 (each ill-formed subsequence
  /// becomes U+FFFD, like Hugging Face's decode); without clean-up it equals the concatenation
  /// of an IncrementalDetokenizer's chunks with the same skip_special_tokens.
  std::string decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  /// The piece as stored in the vocabulary (for debugging/logprobs), "" if out of range.
  virtual std::string piece(int32_t id) const = 0;

  /// True for special tokens: control/unknown types (GGUF, tokenizer.bin) and tokenizer.json
  /// added tokens with "special": true. False for out-of-range ids.
  virtual bool is_special(int32_t id) const { return id == bos_id() || id == eos_id(); }
  /// The id of a token whose vocabulary entry (or added-token content) is exactly `text`.
  virtual std::optional<int32_t> token_to_id(std::string_view text) const { return std::nullopt; }
  /// Default for DecodeOptions::clean_up_tokenization_spaces.
  virtual bool clean_up_tokenization_spaces() const { return false; }
};

/// SentencePiece BPE over a Vocab (llama2.c run.c `encode` / llama.cpp llm_tokenizer_spm):
/// spaces -> space marker, dummy prefix, code points looked up as pieces, unknown code points
/// fall back to <0xNN> byte pieces, then repeatedly merge the adjacent pair whose merged piece
/// exists with the highest score (leftmost on ties). O(n log n) in the text length.
/// Special tokens (llama.cpp tokenizer_st_partition): control tokens are recognised in the
/// text only with parse_special, user-defined ones always; the text between them is encoded
/// separately, with the dummy prefix after a special token.
/// `vocab` must have as many scores and types as pieces (checked: a mismatch aborts).
std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);

/// Turns a stream of token ids into text chunks that are always complete UTF-8: bytes of an
/// unfinished multi-byte sequence (e.g. from byte-fallback or byte-level tokens) are held back
/// until the sequence completes. Invalid sequences are emitted as U+FFFD once they cannot
/// complete. The chunks of push()es plus flush() concatenate to
/// decode(ids, {skip_special_tokens = skip_special, clean_up = false}).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, int32_t prev_id = -1,
                                  bool skip_special = true)
      : tokenizer_(&tokenizer), prev_id_(prev_id), skip_special_(skip_special) {}

  /// Adds one token; returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  /// Returns whatever is held back (as U+FFFD for incomplete sequences) at end of stream.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  int32_t prev_id_;
  bool skip_special_;
  std::string pending_;  // bytes not yet emitted
};

// ---- loaders ----------------------------------------------------------------------------------

/// Options for load_tokenizer_from_path.
struct TokenizerLoadOptions {
  /// Number of tokens of a llama2.c tokenizer.bin (the file does not store it; it comes from the
  /// model checkpoint). Ignored for other formats. <= 0: counted from the file's records.
  int32_t llama2c_vocab_size = 0;
};

/// Loads a tokenizer from `path`, which may be:
///  - a GGUF file (tokenizer.ggml.model `llama` = SentencePiece, `gpt2` = byte-level BPE),
///  - a Hugging Face model directory holding tokenizer.json (and optionally
///    tokenizer_config.json), or a tokenizer.json file (tokenizer_config.json is read from the
///    same directory when present),
///  - anything else is read as a llama2.c tokenizer.bin of options.llama2c_vocab_size tokens
///    (counted from the file when that is <= 0).
/// Errors (one line, naming the file and, for bad content, the field): NotFound (missing file
/// or directory without tokenizer.json), DataLoss (corrupt file, invalid JSON, missing or
/// mistyped fields), InvalidArgument (bad regex), Unimplemented (unsupported model,
/// normalizer, pre-tokenizer, decoder or post-processor type, naming it).
Expected<std::unique_ptr<Tokenizer>> load_tokenizer_from_path(
    const std::string& path, const TokenizerLoadOptions& options = {});

/// The tokenizer of an open GGUF file's tokenizer.ggml.* metadata (`llama` or `gpt2`; the
/// pre-tokenizer regexes for `gpt2` follow tokenizer.ggml.pre as llama.cpp does).
/// Errors as load_tokenizer_from_path, naming the GGUF file and key.
Expected<std::unique_ptr<Tokenizer>> load_tokenizer_from_gguf(const GgufFile& gguf);

/// Loads a Hugging Face tokenizer.json (`json_path`) with its tokenizer_config.json
/// (`config_path`; "" = none). Errors as load_tokenizer_from_path.
Expected<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& json_path,
                                                         const std::string& config_path);

}  // namespace llmserve
