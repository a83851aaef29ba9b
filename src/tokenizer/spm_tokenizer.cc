// SentencePiece BPE (llama2.c run.c `encode`, llama.cpp llm_tokenizer_spm): the text is split
// into code points, then adjacent symbols are merged best-score-first using a priority queue
// over a doubly linked list of symbols, O(n log n) in the text length.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/check.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace llmserve {
namespace {

using PieceIndex = std::unordered_map<std::string_view, int32_t>;

/// A span of the normalized text that is (so far) one token, linked to its neighbours.
struct Symbol {
  size_t start = 0;
  size_t len = 0;  // 0 once merged into its left neighbour
  int64_t prev = -1;
  int64_t next = -1;
};

/// A candidate merge of two adjacent symbols into a vocabulary piece.
struct Bigram {
  float score = 0;
  int64_t left = 0;
  int64_t right = 0;
  size_t len = 0;  // bytes of the merged piece; a mismatch later means the entry is stale
};

/// Max-heap order: higher score first; on equal scores the leftmost pair first.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

/// One encode call's working state.
class SpmMerger {
 public:
  SpmMerger(std::string_view text, const PieceIndex& index, const std::vector<float>& scores)
      : text_(text), index_(index), scores_(scores) {}

  /// Runs the merges and returns the final symbols' spans, in text order.
  std::vector<std::string_view> run() {
    split_code_points();
    for (size_t i = 1; i < symbols_.size(); ++i) {
      try_add_bigram(static_cast<int64_t>(i - 1), static_cast<int64_t>(i));
    }
    while (!queue_.empty()) {
      const Bigram top = queue_.top();
      queue_.pop();
      if (is_live(top)) merge(top);
    }
    return final_spans();
  }

 private:
  /// One symbol per well-formed code point; each byte of ill-formed input is its own symbol.
  void split_code_points() {
    for (size_t pos = 0; pos < text_.size();) {
      const utf8::Seq seq = utf8::classify(text_, pos);
      const size_t len = seq.kind == utf8::SeqKind::kComplete ? seq.len : 1;
      const auto index = static_cast<int64_t>(symbols_.size());
      symbols_.push_back({pos, len, index - 1, -1});
      if (index > 0) symbols_[index - 1].next = index;
      pos += len;
    }
  }

  std::string_view span(const Symbol& s) const { return text_.substr(s.start, s.len); }

  void try_add_bigram(int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const size_t len = l.len + symbols_[right].len;
    const auto it = index_.find(text_.substr(l.start, len));
    if (it == index_.end()) return;
    queue_.push({scores_[it->second], left, right, len});
  }

  bool is_live(const Bigram& b) const {
    const Symbol& l = symbols_[b.left];
    const Symbol& r = symbols_[b.right];
    return l.len != 0 && r.len != 0 && l.next == b.right && l.len + r.len == b.len;
  }

  void merge(const Bigram& b) {
    Symbol& l = symbols_[b.left];
    Symbol& r = symbols_[b.right];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols_[r.next].prev = b.left;
    try_add_bigram(l.prev, b.left);
    try_add_bigram(b.left, l.next);
  }

  std::vector<std::string_view> final_spans() const {
    std::vector<std::string_view> spans;
    for (int64_t i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[i].next) {
      spans.push_back(span(symbols_[i]));
    }
    return spans;
  }

  std::string_view text_;
  const PieceIndex& index_;
  const std::vector<float>& scores_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    LLMS_CHECK(vocab_.scores.size() == vocab_.pieces.size() &&
                   vocab_.types.size() == vocab_.pieces.size(),
               "pieces {} scores {} types {}", vocab_.pieces.size(), vocab_.scores.size(),
               vocab_.types.size());
    LLMS_CHECK(!vocab_.space_marker.empty());
    build_byte_table(vocab_);
    // A NaN score would break the merge queue's ordering; such a piece never wins a merge.
    for (float& score : vocab_.scores) {
      if (std::isnan(score)) score = -std::numeric_limits<float>::infinity();
    }
    piece_to_id_.reserve(vocab_.pieces.size());
    // First id wins should a piece be listed twice.
    for (int32_t id = 0; id < vocab_.size(); ++id) piece_to_id_.emplace(vocab_.pieces[id], id);
    build_special_splitter();
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    return encode(text, EncodeOptions{add_bos, false});
  }

  /// llama.cpp llama_vocab::impl::tokenize for SPM: special tokens split the text; each text
  /// fragment gets the dummy prefix when it starts the text or follows a special token.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override {
    std::vector<int32_t> ids;
    const bool add_bos = options.add_special && vocab_.add_bos && vocab_.bos_id >= 0;
    if (add_bos) ids.push_back(vocab_.bos_id);
    bool prev_special = true;
    for (const Fragment& f : specials_.split(text, options.parse_special, false)) {
      if (f.is_token) {
        // Never BOS twice: the text itself starts with BOS.
        if (!(add_bos && f.id == vocab_.bos_id && ids.size() == 1)) ids.push_back(f.id);
        prev_special = true;
        continue;
      }
      const std::string normalized = normalize(text.substr(f.begin, f.end - f.begin), prev_special);
      SpmMerger merger(normalized, piece_to_id_, vocab_.scores);
      for (std::string_view span : merger.run()) emit(span, ids);
      prev_special = false;
    }
    if (options.add_special && vocab_.add_eos && vocab_.eos_id >= 0) ids.push_back(vocab_.eos_id);
    return ids;
  }

  std::string decode_token(int32_t prev_id, int32_t id) const override {
    return decode_token(prev_id, id, true);
  }

  std::string decode_token(int32_t prev_id, int32_t id, bool skip_special) const override {
    if (id < 0 || id >= vocab_.size()) return "";
    switch (vocab_.types[id]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUnused:
        return skip_special ? "" : vocab_.pieces[id];
      case TokenType::kByte:
        return byte_piece_text(id);
      case TokenType::kUserDefined:
        return vocab_.pieces[id];
      default:
        break;
    }
    std::string text = replace_all(vocab_.pieces[id], vocab_.space_marker, " ");
    const bool at_start = prev_id < 0 || prev_id == vocab_.bos_id;
    if (at_start && vocab_.add_space_prefix && !text.empty() && text[0] == ' ') text.erase(0, 1);
    return text;
  }

  int32_t vocab_size() const override { return vocab_.size(); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  std::string piece(int32_t id) const override {
    return id >= 0 && id < vocab_.size() ? vocab_.pieces[id] : std::string();
  }
  bool is_special(int32_t id) const override {
    if (id < 0 || id >= vocab_.size()) return false;
    const TokenType t = vocab_.types[id];
    return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused;
  }
  std::optional<int32_t> token_to_id(std::string_view text) const override {
    const auto it = piece_to_id_.find(text);
    if (it == piece_to_id_.end()) return std::nullopt;
    return it->second;
  }

 private:
  /// llama.cpp's special-token cache: control, unknown and user-defined tokens, the first two
  /// matched only with parse_special. Phi-3 (by general.name, as llama.cpp does) marks its
  /// special tokens rstrip except <unk>, <s> and <|endoftext|>.
  void build_special_splitter() {
    std::string name = vocab_.model_name;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool phi3 = name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
    std::vector<AddedToken> tokens;
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      const TokenType t = vocab_.types[id];
      const bool user = t == TokenType::kUserDefined;
      if (!user && t != TokenType::kControl && t != TokenType::kUnknown) continue;
      AddedToken tok;
      tok.content = vocab_.pieces[id];
      tok.id = id;
      tok.special = !user;
      tok.rstrip = phi3 && tok.content != "<unk>" && tok.content != "<s>" &&
                   tok.content != "<|endoftext|>";
      tokens.push_back(std::move(tok));
    }
    specials_ = AddedTokenSplitter(std::move(tokens), AddedTokenSplitter::Mode::kLlamaCpp);
  }

  /// Dummy prefix (if wanted), then every ' ' spelled as the space marker.
  std::string normalize(std::string_view text, bool prefix = true) const {
    std::string out;
    out.reserve(text.size() + 8);
    if (vocab_.add_space_prefix && prefix) out += vocab_.space_marker;
    out += replace_all(text, " ", vocab_.space_marker);
    return out;
  }

  /// Appends the id of `span`, or its bytes' <0xNN> ids (unk where a byte piece is missing).
  void emit(std::string_view span, std::vector<int32_t>& ids) const {
    const auto it = piece_to_id_.find(span);
    if (it != piece_to_id_.end()) {
      ids.push_back(it->second);
      return;
    }
    for (char c : span) {
      const int32_t id = vocab_.byte_to_id[static_cast<uint8_t>(c)];
      if (id >= 0) {
        ids.push_back(id);
      } else if (vocab_.unk_id >= 0) {
        ids.push_back(vocab_.unk_id);
      }
    }
  }

  std::string byte_piece_text(int32_t id) const {
    const int byte = parse_byte_piece(vocab_.pieces[id]);
    return byte < 0 ? std::string() : std::string(1, static_cast<char>(byte));
  }

  static std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
      out.append(s.substr(pos, hit - pos));
      out.append(to);
    }
    out.append(s.substr(pos));
    return out;
  }

  Vocab vocab_;
  PieceIndex piece_to_id_;
  AddedTokenSplitter specials_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) {
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace llmserve
