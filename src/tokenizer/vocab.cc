// Vocabulary helpers and the llama2.c tokenizer.bin loader.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace llmserve {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // U+2581

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A bounds-checked little-endian reader over an in-memory file.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  size_t remaining() const { return data_.size() - pos_; }

  template <typename T>
  bool read(T& out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&out, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool read_bytes(size_t n, std::string& out) {
    if (remaining() < n) return false;
    out.assign(data_.substr(pos_, n));
    pos_ += n;
    return true;
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

Expected<std::string> read_whole_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    return InvalidArgument("{}: not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("{}: cannot open tokenizer file", path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return DataLoss("{}: read error", path);
  return data;
}

/// llama2.c fixes the special ids: 0 <unk>, 1 <s>, 2 </s>; byte pieces are spelled <0xNN>.
TokenType infer_llama2c_type(int32_t id, std::string_view piece) {
  if (id == 0) return TokenType::kUnknown;
  if (id == 1 || id == 2) return TokenType::kControl;
  if (parse_byte_piece(piece) >= 0) return TokenType::kByte;
  return TokenType::kNormal;
}

/// tokenizer.bin files exported by llama2.c's tokenizer.py spell spaces as ' ' (the exporter
/// replaces U+2581); other exporters may keep U+2581. Picks whichever the pieces use more.
std::string detect_space_marker(const std::vector<std::string>& pieces) {
  size_t with_marker = 0;
  size_t with_space = 0;
  for (const std::string& p : pieces) {
    if (p.find(kSpaceMarker) != std::string::npos) ++with_marker;
    if (p.find(' ') != std::string::npos) ++with_space;
  }
  return with_marker > with_space ? std::string(kSpaceMarker) : std::string(" ");
}

/// The number of {score, len, bytes} records after the header when they end exactly at the end
/// of the file (how many tokens a tokenizer.bin holds; the file does not say).
Expected<int32_t> count_llama2c_tokens(const std::string& path, std::string_view data) {
  Reader reader(data);
  int32_t max_token_length = 0;
  if (!reader.read(max_token_length) || max_token_length < 0)
    return DataLoss("{}: not a llama2.c tokenizer.bin (no max_token_length header)", path);
  int64_t count = 0;
  while (reader.remaining() > 0) {
    float score = 0;
    int32_t len = 0;
    std::string piece;
    if (!reader.read(score) || !reader.read(len) || len < 0 ||
        !reader.read_bytes(static_cast<size_t>(len), piece) || ++count > (1 << 24))
      return DataLoss("{}: not a llama2.c tokenizer.bin: token record {} does not fit the file",
                      path, count);
  }
  if (count == 0) return DataLoss("{}: a llama2.c tokenizer.bin without tokens", path);
  return static_cast<int32_t>(count);
}

/// Parses the body of a tokenizer.bin into `vocab` (pieces and scores).
Status parse_llama2c(const std::string& path, std::string_view data, int32_t vocab_size,
                     Vocab& vocab) {
  Reader reader(data);
  int32_t max_token_length = 0;
  if (!reader.read(max_token_length)) return DataLoss("{}: truncated header", path);
  if (max_token_length < 0) {
    return DataLoss("{}: negative max_token_length {}", path, max_token_length);
  }
  vocab.pieces.resize(vocab_size);
  vocab.scores.resize(vocab_size);
  for (int32_t id = 0; id < vocab_size; ++id) {
    int32_t len = 0;
    if (!reader.read(vocab.scores[id]) || !reader.read(len)) {
      return DataLoss("{}: truncated at token {} of {}", path, id, vocab_size);
    }
    if (len < 0) return DataLoss("{}: token {} has negative length {}", path, id, len);
    if (!reader.read_bytes(static_cast<size_t>(len), vocab.pieces[id])) {
      return DataLoss("{}: truncated in the bytes of token {} of {}", path, id, vocab_size);
    }
  }
  return Status::Ok();
}

}  // namespace

int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]);
  const int lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

void build_byte_table(Vocab& vocab) {
  std::fill(std::begin(vocab.byte_to_id), std::end(vocab.byte_to_id), -1);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.types[id] != TokenType::kByte) continue;
    const int byte = parse_byte_piece(vocab.pieces[id]);
    // Keep the first id for a byte, should a vocabulary list one twice.
    if (byte >= 0 && vocab.byte_to_id[byte] < 0) vocab.byte_to_id[byte] = id;
  }
}

Expected<Vocab> load_llama2c_vocab(const std::string& path, int32_t vocab_size) {
  LLMS_ASSIGN_OR_RETURN(const std::string data, read_whole_file(path));
  if (vocab_size <= 0) {
    LLMS_ASSIGN_OR_RETURN(vocab_size, count_llama2c_tokens(path, data));
  }
  Vocab vocab;
  LLMS_RETURN_IF_ERROR(parse_llama2c(path, data, vocab_size, vocab));
  vocab.types.resize(vocab_size);
  for (int32_t id = 0; id < vocab_size; ++id) {
    vocab.types[id] = infer_llama2c_type(id, vocab.pieces[id]);
  }
  vocab.bos_id = vocab_size > 1 ? 1 : -1;
  vocab.eos_id = vocab_size > 2 ? 2 : -1;
  vocab.unk_id = 0;
  vocab.add_bos = true;
  vocab.add_space_prefix = true;
  vocab.space_marker = detect_space_marker(vocab.pieces);
  build_byte_table(vocab);
  return vocab;
}

}  // namespace llmserve
