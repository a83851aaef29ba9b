// Text <-> token ids. The interface every tokenizer model implements (SentencePiece BPE now;
// byte-level BPE and tokenizer.json later).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace llmserve {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Encodes `text`. add_bos: prepend BOS (if the vocabulary wants one). Never fails: bytes
  /// that are not valid UTF-8 become byte-fallback tokens. Empty text gets no dummy prefix.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

  /// The bytes token `id` stands for when it follows `prev_id` (-1 at the start): byte pieces
  /// <0xNN> give their single raw byte; the space marker becomes ' '; the leading space of the
  /// first piece after BOS (or at the start) is dropped, as SentencePiece's decoder does
  /// (only for vocabularies with add_space_prefix, whose encoder put that space there);
  /// control tokens (BOS/EOS/unk) give "". Out-of-range ids give "".
  virtual std::string decode_token(int32_t prev_id, int32_t id) const = 0;

  /// Concatenation of decode_token over `ids` (prev_id chained; first prev_id = -1).
  std::string decode(const std::vector<int32_t>& ids) const;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  /// The piece as stored in the vocabulary (for debugging/logprobs), "" if out of range.
  virtual std::string piece(int32_t id) const = 0;
};

/// SentencePiece BPE over a Vocab (llama2.c run.c `encode` / llama.cpp llm_tokenizer_spm):
/// spaces -> space marker, dummy prefix, code points looked up as pieces, unknown code points
/// fall back to <0xNN> byte pieces, then repeatedly merge the adjacent pair whose merged piece
/// exists with the highest score (leftmost on ties). O(n log n) in the text length.
/// `vocab` must have as many scores and types as pieces (checked: a mismatch aborts).
std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);

/// Turns a stream of token ids into text chunks that are always complete UTF-8: bytes of an
/// unfinished multi-byte sequence (e.g. from byte-fallback tokens) are held back until the
/// sequence completes. Invalid sequences are emitted as U+FFFD once they cannot complete.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, int32_t prev_id = -1)
      : tokenizer_(tokenizer), prev_id_(prev_id) {}

  /// Adds one token; returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  /// Returns whatever is held back (as U+FFFD for incomplete sequences) at end of stream.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  int32_t prev_id_;
  std::string pending_;  // bytes not yet emitted
};

}  // namespace llmserve
