#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

namespace llmserve {
namespace {

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerConfig config)
      : model_(config.tokens, config.merges, config.model_options),
        splitter_(config.added_tokens, config.added_mode),
        normalizer_(std::move(config.normalizer)),
        pre_tokenizer_(std::move(config.pre_tokenizer)),
        decoder_(std::move(config.decoder)),
        prefix_ids_(std::move(config.prefix_ids)),
        suffix_ids_(std::move(config.suffix_ids)),
        bos_id_(config.bos_id),
        eos_id_(config.eos_id),
        clean_up_(config.clean_up_tokenization_spaces),
        decode_added_(config.decode_added_tokens) {
    size_t size = config.tokens.size();
    for (const AddedToken& t : config.added_tokens) {
      if (t.id >= 0) size = std::max(size, static_cast<size_t>(t.id) + 1);
    }
    pieces_ = std::move(config.tokens);
    pieces_.resize(size);
    kind_.assign(size, Kind::kModel);
    for (size_t id = 0; id < size; ++id) {
      if (pieces_[id].empty()) kind_[id] = Kind::kNone;
    }
    for (const AddedToken& t : config.added_tokens) {
      if (t.id < 0) continue;
      pieces_[t.id] = t.content;
      kind_[t.id] = t.special ? Kind::kSpecial : Kind::kAdded;
      added_index_.emplace(t.content, t.id);
    }
    for (int32_t id : config.extra_special_ids) {
      if (id >= 0 && static_cast<size_t>(id) < size && kind_[id] != Kind::kAdded) {
        kind_[id] = Kind::kSpecial;
      }
    }
    has_normalized_added_ =
        std::any_of(config.added_tokens.begin(), config.added_tokens.end(),
                    [](const AddedToken& t) { return t.normalized; });
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    return encode(text, EncodeOptions{add_bos, false});
  }

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override {
    std::vector<int32_t> ids;
    for (const Fragment& f : splitter_.split(text, options.parse_special, false)) {
      if (f.is_token) {
        ids.push_back(f.id);
        continue;
      }
      std::string part(text.substr(f.begin, f.end - f.begin));
      if (normalizer_) part = normalizer_->apply(std::move(part));
      const bool at_start = f.begin == 0;
      if (!has_normalized_added_) {
        encode_text(part, at_start, ids);
        continue;
      }
      for (const Fragment& g : splitter_.split(part, options.parse_special, true)) {
        if (g.is_token) {
          ids.push_back(g.id);
        } else {
          encode_text(std::string_view(part).substr(g.begin, g.end - g.begin),
                      at_start && g.begin == 0, ids);
        }
      }
    }
    if (!options.add_special) return ids;
    std::vector<int32_t> out;
    out.reserve(prefix_ids_.size() + ids.size() + suffix_ids_.size());
    for (size_t i = 0; i < prefix_ids_.size(); ++i) {
      // Never BOS twice: the text itself may start with it (parse_special).
      if (i == 0 && prefix_ids_[0] == bos_id_ && !ids.empty() && ids[0] == bos_id_) continue;
      out.push_back(prefix_ids_[i]);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
    return out;
  }

  std::string decode_token(int32_t prev_id, int32_t id) const override {
    return decode_token(prev_id, id, true);
  }

  std::string decode_token(int32_t prev_id, int32_t id, bool skip_special) const override {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return "";
    switch (kind_[id]) {
      case Kind::kNone:
        return "";
      case Kind::kSpecial:
        if (skip_special) return "";
        if (!decode_added_) return pieces_[id];
        break;
      case Kind::kAdded:
        if (!decode_added_) return pieces_[id];
        break;
      case Kind::kModel:
        break;
    }
    std::string text = pieces_[id];
    if (decoder_) {
      const bool at_start = prev_id < 0 || (skip_special && is_special(prev_id));
      decoder_->apply(text, at_start);
    }
    return text;
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  std::string piece(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < pieces_.size() ? pieces_[id] : std::string();
  }
  bool is_special(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < kind_.size() && kind_[id] == Kind::kSpecial;
  }
  std::optional<int32_t> token_to_id(std::string_view text) const override {
    const auto it = added_index_.find(text);
    if (it != added_index_.end()) return it->second;
    const int32_t id = model_.find(text);
    if (id >= 0) return id;
    return std::nullopt;
  }
  bool clean_up_tokenization_spaces() const override { return clean_up_; }

 private:
  enum class Kind : uint8_t { kNone, kModel, kAdded, kSpecial };

  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& ids) const {
    if (text.empty()) return;
    if (!pre_tokenizer_) {
      model_.encode(text, ids);
      return;
    }
    std::vector<std::string> pieces{std::string(text)};
    pre_tokenizer_->apply(pieces, at_start);
    for (const std::string& p : pieces) model_.encode(p, ids);
  }

  BpeModel model_;
  AddedTokenSplitter splitter_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<int32_t> prefix_ids_;
  std::vector<int32_t> suffix_ids_;
  int32_t bos_id_;
  int32_t eos_id_;
  bool clean_up_;
  bool decode_added_;
  bool has_normalized_added_ = false;
  std::vector<std::string> pieces_;
  std::vector<Kind> kind_;
  TokenIndex added_index_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeTokenizerConfig config) {
  return std::make_unique<BpeTokenizer>(std::move(config));
}

}  // namespace llmserve
