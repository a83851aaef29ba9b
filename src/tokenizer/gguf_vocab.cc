// Loads a SentencePiece ("llama") vocabulary from GGUF tokenizer.ggml.* metadata, and the
// tokenizer.ggml.* helpers shared with the byte-level loader (gguf_tokenizer.h).
#include <cstdint>

#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/vocab.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";

Status check_length(const GgufFile& gguf, std::string_view key, size_t got, size_t want) {
  if (got == want) return Status::Ok();
  return DataLoss("{}: {} has {} entries but {} has {}", gguf.path(), key, got, kTokensKey,
                  want);
}

/// Scores are optional (llama.cpp defaults them to 0); when present they must match tokens.
Status load_scores(const GgufFile& gguf, Vocab& vocab) {
  if (!gguf.has_key(kScoresKey)) {
    vocab.scores.assign(vocab.pieces.size(), 0.0f);
    return Status::Ok();
  }
  LLMS_ASSIGN_OR_RETURN(vocab.scores, gguf.get_float_array(kScoresKey));
  return check_length(gguf, kScoresKey, vocab.scores.size(), vocab.pieces.size());
}

/// Token types are optional; when absent they are inferred (byte pieces, the rest normal).
Status load_types(const GgufFile& gguf, Vocab& vocab) {
  vocab.types.assign(vocab.pieces.size(), TokenType::kNormal);
  if (!gguf.has_key(kTypesKey)) {
    for (size_t id = 0; id < vocab.pieces.size(); ++id) {
      if (parse_byte_piece(vocab.pieces[id]) >= 0) vocab.types[id] = TokenType::kByte;
    }
    return Status::Ok();
  }
  LLMS_ASSIGN_OR_RETURN(const std::vector<int64_t> raw, gguf.get_int_array(kTypesKey));
  LLMS_RETURN_IF_ERROR(check_length(gguf, kTypesKey, raw.size(), vocab.pieces.size()));
  for (size_t id = 0; id < raw.size(); ++id) {
    if (raw[id] < 0 || raw[id] > static_cast<int64_t>(TokenType::kByte)) {
      return DataLoss("{}: {}[{}] = {} is not a token type", gguf.path(), kTypesKey, id,
                      raw[id]);
    }
    vocab.types[id] = static_cast<TokenType>(raw[id]);
  }
  return Status::Ok();
}

/// Reads an optional special-token id. -1 and 0xFFFFFFFF (how converters write "none") map
/// to -1; any other value outside the vocabulary is corrupt.
Status load_special_id(const GgufFile& gguf, std::string_view key, int32_t& id) {
  if (!gguf.has_key(key)) return Status::Ok();
  LLMS_ASSIGN_OR_RETURN(const int64_t value, gguf.get_int(key));
  if (value == -1 || value == 0xFFFFFFFFLL) {
    id = -1;
    return Status::Ok();
  }
  if (value < 0 || value > INT32_MAX) {
    return DataLoss("{}: {} = {} is out of range", gguf.path(), key, value);
  }
  id = static_cast<int32_t>(value);
  return Status::Ok();
}

Status check_special_in_range(const GgufFile& gguf, std::string_view key, int32_t id,
                              int32_t size) {
  if (id < size) return Status::Ok();
  return DataLoss("{}: {} = {} is outside the vocabulary of {} tokens", gguf.path(), key, id,
                  size);
}

}  // namespace

Status load_gguf_flag(const GgufFile& gguf, std::string_view key, bool& flag) {
  if (!gguf.has_key(key)) return Status::Ok();
  LLMS_ASSIGN_OR_RETURN(flag, gguf.get_bool(key));
  return Status::Ok();
}

Status load_gguf_special_ids(const GgufFile& gguf, int32_t vocab_size, int32_t& bos,
                             int32_t& eos, int32_t& unk) {
  struct Special {
    std::string_view key;
    int32_t* id;
  };
  const Special specials[] = {{"tokenizer.ggml.bos_token_id", &bos},
                              {"tokenizer.ggml.eos_token_id", &eos},
                              {"tokenizer.ggml.unknown_token_id", &unk}};
  for (const Special& s : specials) {
    LLMS_RETURN_IF_ERROR(load_special_id(gguf, s.key, *s.id));
    LLMS_RETURN_IF_ERROR(check_special_in_range(gguf, s.key, *s.id, vocab_size));
  }
  return Status::Ok();
}

namespace {

Status load_specials(const GgufFile& gguf, Vocab& vocab) {
  LLMS_RETURN_IF_ERROR(
      load_gguf_special_ids(gguf, vocab.size(), vocab.bos_id, vocab.eos_id, vocab.unk_id));
  LLMS_RETURN_IF_ERROR(load_gguf_flag(gguf, "tokenizer.ggml.add_bos_token", vocab.add_bos));
  LLMS_RETURN_IF_ERROR(load_gguf_flag(gguf, "tokenizer.ggml.add_eos_token", vocab.add_eos));
  if (gguf.has_key("general.name")) {
    LLMS_ASSIGN_OR_RETURN(vocab.model_name, gguf.get_string("general.name"));
  }
  return load_gguf_flag(gguf, "tokenizer.ggml.add_space_prefix", vocab.add_space_prefix);
}

}  // namespace

Expected<Vocab> load_gguf_vocab(const GgufFile& gguf) {
  LLMS_ASSIGN_OR_RETURN(const std::string model, gguf.get_string(kModelKey));
  if (model != "llama") {
    return Unimplemented("{}: tokenizer model '{}' is not supported (only 'llama', "
                         "SentencePiece BPE)", gguf.path(), model);
  }
  Vocab vocab;
  LLMS_ASSIGN_OR_RETURN(vocab.pieces, gguf.get_string_array(kTokensKey));
  if (vocab.pieces.empty() || vocab.pieces.size() > static_cast<size_t>(INT32_MAX)) {
    return DataLoss("{}: {} has {} entries", gguf.path(), kTokensKey, vocab.pieces.size());
  }
  LLMS_RETURN_IF_ERROR(load_scores(gguf, vocab));
  LLMS_RETURN_IF_ERROR(load_types(gguf, vocab));
  LLMS_RETURN_IF_ERROR(load_specials(gguf, vocab));
  vocab.space_marker = "\xe2\x96\x81";
  build_byte_table(vocab);
  return vocab;
}

}  // namespace llmserve
