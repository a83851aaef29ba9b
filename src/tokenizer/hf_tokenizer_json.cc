// Hugging Face tokenizer.json (+ tokenizer_config.json) -> BpeTokenizer. Supported: model BPE
// (byte-level, or SentencePiece-style with byte_fallback/unk), normalizers NFC/NFD/NFKC/NFKD,
// Lowercase, Prepend, Replace, Strip, Sequence; pre-tokenizers Split, ByteLevel, Digits,
// Metaspace, Whitespace, WhitespaceSplit, Sequence; decoders ByteLevel, Metaspace, Replace,
// ByteFallback, Fuse, Strip, Sequence; post-processors TemplateProcessing, ByteLevel,
// RobertaProcessing, BertProcessing, Sequence. Anything else is Unimplemented, naming the field.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_tokenizer.h"

namespace llmserve {
namespace {

using nlohmann::json;

/// Reads fields of one JSON file, producing errors that name the file and the field path.
class Fields {
 public:
  explicit Fields(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  Status missing(const std::string& field) const {
    return DataLoss("{}: field '{}' is missing", path_, field);
  }
  Status wrong_type(const std::string& field, std::string_view want) const {
    return DataLoss("{}: field '{}' must be {}", path_, field, want);
  }
  Status unsupported(const std::string& field, std::string_view what) const {
    return Unimplemented("{}: {} '{}' is not supported", path_, field, what);
  }

  /// obj[key] as an object (missing is an error unless optional, then nullptr).
  Expected<const json*> object(const json& obj, std::string_view key, const std::string& field,
                               bool optional = false) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (optional) return static_cast<const json*>(nullptr);
      return missing(field);
    }
    if (!it->is_object()) return wrong_type(field, "an object");
    return &*it;
  }
  Expected<const json*> array(const json& obj, std::string_view key, const std::string& field) const {
    const auto it = obj.find(key);
    if (it == obj.end()) return missing(field);
    if (!it->is_array()) return wrong_type(field, "an array");
    return &*it;
  }
  Expected<std::string> string(const json& obj, std::string_view key, const std::string& field,
                               std::optional<std::string> fallback = std::nullopt) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (fallback) return *fallback;
      return missing(field);
    }
    if (!it->is_string()) return wrong_type(field, "a string");
    return it->get<std::string>();
  }
  Expected<bool> boolean(const json& obj, std::string_view key, const std::string& field,
                         bool fallback) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return wrong_type(field, "true or false");
    return it->get<bool>();
  }
  Expected<int64_t> integer(const json& obj, std::string_view key, const std::string& field,
                            std::optional<int64_t> fallback = std::nullopt) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (fallback) return *fallback;
      return missing(field);
    }
    if (!it->is_number_integer()) return wrong_type(field, "an integer");
    return it->get<int64_t>();
  }
  Expected<std::string> type(const json& obj, const std::string& field) const {
    return string(obj, "type", field + ".type");
  }

 private:
  std::string path_;
};

Expected<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("{}: no such file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("{}: cannot open", path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return DataLoss("{}: read error", path);
  return data;
}

Expected<json> parse_json(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return DataLoss("{}: invalid JSON: {}", path, e.what());
  }
  if (!doc.is_object()) return DataLoss("{}: the top level must be a JSON object", path);
  return doc;
}

/// model.vocab and model.merges of a tokenizer.json, read straight from the SAX events (a
/// 128k-entry JSON object costs more as a DOM than everything else in the file).
struct BigModelFields {
  bool has_vocab = false;
  bool has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::string error;  // first malformed entry ("model.vocab.x must be ...")
};

/// Builds the DOM of everything except model.vocab / model.merges, which go to BigModelFields.
class TokenizerJsonSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  TokenizerJsonSax(json& root, BigModelFields& big) : dom_(root, true), big_(big) {}

  bool null() { return in_big() ? bad("null") : dom_.null(); }
  bool boolean(bool v) { return in_big() ? bad("a boolean") : dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return in_big() ? vocab_id(v) : dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) {
    return in_big() ? vocab_id(v > static_cast<number_unsigned_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v))
                    : dom_.number_unsigned(v);
  }
  bool number_float(number_float_t v, const string_t& s) {
    return in_big() ? bad("a number") : dom_.number_float(v, s);
  }
  bool binary(binary_t& v) { return in_big() ? bad("binary") : dom_.binary(v); }
  bool string(string_t& v) {
    if (mode_ == Mode::kMerges) {
      if (big_depth_ == 1) {
        const size_t space = v.find(' ', 1);
        if (space == std::string::npos) return bad("'left right'");
        big_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
        return true;
      }
      if (big_depth_ == 2 && pair_.size() < 2) {
        pair_.push_back(std::move(v));
        return true;
      }
      return bad("'left right' or [left, right]");
    }
    if (mode_ == Mode::kVocab) return bad("a non-negative integer id");
    return dom_.string(v);
  }
  bool start_object(std::size_t n) {
    if (in_big()) return bad("an id or merge");
    if (path_.size() == 2 && path_[1] == "model" && key_ == "vocab") {
      mode_ = Mode::kVocab;
      big_.has_vocab = true;
      big_depth_ = 1;
      dom_.null();  // model.vocab is null in the DOM
      return true;
    }
    path_.push_back(key_);
    return dom_.start_object(n);
  }
  bool key(string_t& k) {
    if (mode_ == Mode::kVocab) {
      key_ = std::move(k);
      return true;
    }
    if (in_big()) return bad("an id or merge");
    key_ = k;
    return dom_.key(k);
  }
  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kNone;
      key_.clear();
      return true;
    }
    path_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (mode_ == Mode::kMerges) {
      if (big_depth_ != 1) return bad("'left right' or [left, right]");
      big_depth_ = 2;
      pair_.clear();
      return true;
    }
    if (in_big()) return bad("an id");
    if (path_.size() == 2 && path_[1] == "model" && key_ == "merges") {
      mode_ = Mode::kMerges;
      big_.has_merges = true;
      big_depth_ = 1;
      dom_.null();
      return true;
    }
    path_.push_back(key_);
    key_.clear();
    return dom_.start_array(n);
  }
  bool end_array() {
    if (mode_ == Mode::kMerges) {
      if (big_depth_ == 2) {
        if (pair_.size() != 2) return bad("'left right' or [left, right]");
        big_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
        big_depth_ = 1;
        return true;
      }
      mode_ = Mode::kNone;
      return true;
    }
    path_.pop_back();
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& ex) {
    return dom_.parse_error(pos, token, ex);
  }

 private:
  enum class Mode { kNone, kVocab, kMerges };
  bool in_big() const { return mode_ != Mode::kNone; }
  bool vocab_id(int64_t v) {
    if (mode_ != Mode::kVocab) return bad("'left right' or [left, right]");
    if (v < 0 || v >= INT32_MAX) return bad("a non-negative integer id");
    big_.vocab.emplace_back(std::move(key_), v);
    return true;
  }
  /// Records the first malformed entry and stops parsing.
  bool bad(std::string_view want) {
    if (big_.error.empty()) {
      big_.error = mode_ == Mode::kVocab
                       ? fmt::format("field 'model.vocab.{}' must be {}", key_, want)
                       : fmt::format("field 'model.merges[{}]' must be {}", big_.merges.size(), want);
    }
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  BigModelFields& big_;
  std::vector<std::string> path_;  // keys of the open containers (root = "")
  std::string key_;
  Mode mode_ = Mode::kNone;
  int big_depth_ = 0;
  std::vector<std::string> pair_;
};

/// Parses tokenizer.json, diverting model.vocab / model.merges into `big`.
Expected<json> parse_tokenizer_json(const std::string& path, BigModelFields& big) {
  LLMS_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  json doc;
  TokenizerJsonSax sax(doc, big);
  try {
    const bool ok = json::sax_parse(text, &sax);
    if (!ok) {
      if (!big.error.empty()) return DataLoss("{}: {}", path, big.error);
      return DataLoss("{}: invalid JSON", path);
    }
  } catch (const json::exception& e) {
    if (!big.error.empty()) return DataLoss("{}: {}", path, big.error);
    return DataLoss("{}: invalid JSON: {}", path, e.what());
  }
  if (!doc.is_object()) return DataLoss("{}: the top level must be a JSON object", path);
  return doc;
}

/// A pattern field: {"String": "..."} or {"Regex": "..."}.
struct Pattern {
  std::string literal;
  std::unique_ptr<Regex> regex;
};

Expected<Pattern> parse_pattern(const Fields& f, const json& obj, const std::string& field) {
  LLMS_ASSIGN_OR_RETURN(const json* p, f.object(obj, "pattern", field + ".pattern"));
  Pattern out;
  if (p->contains("Regex")) {
    LLMS_ASSIGN_OR_RETURN(const std::string re, f.string(*p, "Regex", field + ".pattern.Regex"));
    Expected<Regex> compiled = Regex::compile(re);
    if (!compiled.ok()) {
      return InvalidArgument("{}: field '{}.pattern.Regex': {}", f.path(), field,
                             compiled.status().message());
    }
    out.regex = std::make_unique<Regex>(std::move(compiled).value());
    return out;
  }
  if (p->contains("String")) {
    LLMS_ASSIGN_OR_RETURN(out.literal, f.string(*p, "String", field + ".pattern.String"));
    return out;
  }
  return f.missing(field + ".pattern.String|Regex");
}

Expected<std::unique_ptr<Normalizer>> parse_normalizer(const Fields& f, const json& obj,
                                                       const std::string& field) {
  LLMS_ASSIGN_OR_RETURN(const std::string type, f.type(obj, field));
  if (type == "NFC") return make_unicode_normalizer(unicode::Form::kNFC);
  if (type == "NFD") return make_unicode_normalizer(unicode::Form::kNFD);
  if (type == "NFKC") return make_unicode_normalizer(unicode::Form::kNFKC);
  if (type == "NFKD") return make_unicode_normalizer(unicode::Form::kNFKD);
  if (type == "Lowercase") return make_lowercase_normalizer();
  if (type == "Prepend") {
    LLMS_ASSIGN_OR_RETURN(std::string prefix, f.string(obj, "prepend", field + ".prepend"));
    return make_prepend_normalizer(std::move(prefix));
  }
  if (type == "Replace") {
    LLMS_ASSIGN_OR_RETURN(Pattern p, parse_pattern(f, obj, field));
    LLMS_ASSIGN_OR_RETURN(std::string content, f.string(obj, "content", field + ".content"));
    return make_replace_normalizer(std::move(p.literal), std::move(p.regex), std::move(content));
  }
  if (type == "Strip") {
    LLMS_ASSIGN_OR_RETURN(const bool left, f.boolean(obj, "strip_left", field + ".strip_left", true));
    LLMS_ASSIGN_OR_RETURN(const bool right,
                          f.boolean(obj, "strip_right", field + ".strip_right", true));
    return make_strip_normalizer(left, right);
  }
  if (type == "Sequence") {
    LLMS_ASSIGN_OR_RETURN(const json* list, f.array(obj, "normalizers", field + ".normalizers"));
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string sub = fmt::format("{}.normalizers[{}]", field, i);
      if (!(*list)[i].is_object()) return f.wrong_type(sub, "an object");
      LLMS_ASSIGN_OR_RETURN(std::unique_ptr<Normalizer> n, parse_normalizer(f, (*list)[i], sub));
      parts.push_back(std::move(n));
    }
    return make_normalizer_sequence(std::move(parts));
  }
  return f.unsupported(field + ".type", type);
}

Expected<SplitBehavior> parse_behavior(const Fields& f, const json& obj, const std::string& field) {
  LLMS_ASSIGN_OR_RETURN(const std::string b,
                        f.string(obj, "behavior", field + ".behavior", std::string("Isolated")));
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return f.unsupported(field + ".behavior", b);
}

/// Metaspace's prepend_scheme, or the legacy add_prefix_space (true = "always").
Expected<std::string> parse_prepend_scheme(const Fields& f, const json& obj,
                                           const std::string& field) {
  if (obj.contains("prepend_scheme")) {
    LLMS_ASSIGN_OR_RETURN(std::string s, f.string(obj, "prepend_scheme", field + ".prepend_scheme"));
    if (s != "always" && s != "first" && s != "never") {
      return f.unsupported(field + ".prepend_scheme", s);
    }
    return s;
  }
  LLMS_ASSIGN_OR_RETURN(const bool add,
                        f.boolean(obj, "add_prefix_space", field + ".add_prefix_space", true));
  return std::string(add ? "always" : "never");
}

Expected<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Fields& f, const json& obj,
                                                            const std::string& field) {
  LLMS_ASSIGN_OR_RETURN(const std::string type, f.type(obj, field));
  if (type == "Split") {
    LLMS_ASSIGN_OR_RETURN(Pattern p, parse_pattern(f, obj, field));
    LLMS_ASSIGN_OR_RETURN(const SplitBehavior behavior, parse_behavior(f, obj, field));
    LLMS_ASSIGN_OR_RETURN(const bool invert, f.boolean(obj, "invert", field + ".invert", false));
    return make_split_pre_tokenizer(std::move(p.regex), std::move(p.literal), behavior, invert);
  }
  if (type == "ByteLevel") {
    LLMS_ASSIGN_OR_RETURN(const bool prefix,
                          f.boolean(obj, "add_prefix_space", field + ".add_prefix_space", true));
    LLMS_ASSIGN_OR_RETURN(const bool use_regex,
                          f.boolean(obj, "use_regex", field + ".use_regex", true));
    return make_byte_level_pre_tokenizer(prefix, use_regex);
  }
  if (type == "Digits") {
    LLMS_ASSIGN_OR_RETURN(const bool individual, f.boolean(obj, "individual_digits",
                                                           field + ".individual_digits", false));
    return make_digits_pre_tokenizer(individual);
  }
  if (type == "Metaspace") {
    LLMS_ASSIGN_OR_RETURN(std::string replacement,
                          f.string(obj, "replacement", field + ".replacement"));
    LLMS_ASSIGN_OR_RETURN(std::string scheme, parse_prepend_scheme(f, obj, field));
    LLMS_ASSIGN_OR_RETURN(const bool split, f.boolean(obj, "split", field + ".split", true));
    return make_metaspace_pre_tokenizer(std::move(replacement), std::move(scheme), split);
  }
  if (type == "Whitespace") return make_whitespace_pre_tokenizer(false);
  if (type == "WhitespaceSplit") return make_whitespace_pre_tokenizer(true);
  if (type == "Sequence") {
    LLMS_ASSIGN_OR_RETURN(const json* list, f.array(obj, "pretokenizers", field + ".pretokenizers"));
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string sub = fmt::format("{}.pretokenizers[{}]", field, i);
      if (!(*list)[i].is_object()) return f.wrong_type(sub, "an object");
      LLMS_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> p, parse_pre_tokenizer(f, (*list)[i], sub));
      parts.push_back(std::move(p));
    }
    return make_pre_tokenizer_sequence(std::move(parts));
  }
  return f.unsupported(field + ".type", type);
}

Expected<std::unique_ptr<Decoder>> parse_decoder(const Fields& f, const json& obj,
                                                 const std::string& field) {
  LLMS_ASSIGN_OR_RETURN(const std::string type, f.type(obj, field));
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "Metaspace") {
    LLMS_ASSIGN_OR_RETURN(std::string replacement,
                          f.string(obj, "replacement", field + ".replacement"));
    LLMS_ASSIGN_OR_RETURN(const std::string scheme, parse_prepend_scheme(f, obj, field));
    return make_metaspace_decoder(std::move(replacement), scheme != "never");
  }
  if (type == "Replace") {
    LLMS_ASSIGN_OR_RETURN(Pattern p, parse_pattern(f, obj, field));
    if (p.regex) return f.unsupported(field + ".pattern", "Regex");
    LLMS_ASSIGN_OR_RETURN(std::string content, f.string(obj, "content", field + ".content"));
    return make_replace_decoder(std::move(p.literal), std::move(content));
  }
  if (type == "ByteFallback") return make_byte_fallback_decoder();
  if (type == "Fuse") return std::unique_ptr<Decoder>();  // per-token decoding fuses anyway
  if (type == "Strip") {
    LLMS_ASSIGN_OR_RETURN(std::string content, f.string(obj, "content", field + ".content"));
    LLMS_ASSIGN_OR_RETURN(const int64_t start, f.integer(obj, "start", field + ".start", 0));
    return make_strip_decoder(std::move(content), static_cast<int>(start));
  }
  if (type == "Sequence") {
    LLMS_ASSIGN_OR_RETURN(const json* list, f.array(obj, "decoders", field + ".decoders"));
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string sub = fmt::format("{}.decoders[{}]", field, i);
      if (!(*list)[i].is_object()) return f.wrong_type(sub, "an object");
      LLMS_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> d, parse_decoder(f, (*list)[i], sub));
      if (d) parts.push_back(std::move(d));
    }
    return make_decoder_sequence(std::move(parts));
  }
  return f.unsupported(field + ".type", type);
}

/// The ids a post-processor puts around a single sequence.
struct Wrap {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

Expected<int32_t> pair_id(const Fields& f, const json& obj, std::string_view key,
                          const std::string& field) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
    return f.wrong_type(field + "." + std::string(key), "[token, id]");
  }
  return (*it)[1].get<int32_t>();
}

Status parse_post_processor(const Fields& f, const json& obj, const std::string& field, Wrap& wrap) {
  LLMS_ASSIGN_OR_RETURN(const std::string type, f.type(obj, field));
  if (type == "ByteLevel") return Status::Ok();
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    LLMS_ASSIGN_OR_RETURN(const int32_t cls, pair_id(f, obj, "cls", field));
    LLMS_ASSIGN_OR_RETURN(const int32_t sep, pair_id(f, obj, "sep", field));
    wrap.prefix.push_back(cls);
    wrap.suffix.push_back(sep);
    return Status::Ok();
  }
  if (type == "TemplateProcessing") {
    LLMS_ASSIGN_OR_RETURN(const json* single, f.array(obj, "single", field + ".single"));
    LLMS_ASSIGN_OR_RETURN(const json* specials,
                          f.object(obj, "special_tokens", field + ".special_tokens", true));
    bool after = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const std::string sub = fmt::format("{}.single[{}]", field, i);
      const json& item = (*single)[i];
      if (!item.is_object()) return f.wrong_type(sub, "an object");
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      LLMS_ASSIGN_OR_RETURN(const json* st, f.object(item, "SpecialToken", sub + ".SpecialToken"));
      LLMS_ASSIGN_OR_RETURN(const std::string name, f.string(*st, "id", sub + ".SpecialToken.id"));
      const std::string sfield = field + ".special_tokens." + name;
      if (specials == nullptr || !specials->contains(name)) return f.missing(sfield);
      const json& entry = (*specials)[name];
      if (!entry.is_object()) return f.wrong_type(sfield, "an object");
      LLMS_ASSIGN_OR_RETURN(const json* ids, f.array(entry, "ids", sfield + ".ids"));
      for (const json& id : *ids) {
        if (!id.is_number_integer()) return f.wrong_type(sfield + ".ids", "integers");
        (after ? wrap.suffix : wrap.prefix).push_back(id.get<int32_t>());
      }
    }
    return Status::Ok();
  }
  if (type == "Sequence") {
    LLMS_ASSIGN_OR_RETURN(const json* list, f.array(obj, "processors", field + ".processors"));
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string sub = fmt::format("{}.processors[{}]", field, i);
      if (!(*list)[i].is_object()) return f.wrong_type(sub, "an object");
      LLMS_RETURN_IF_ERROR(parse_post_processor(f, (*list)[i], sub, wrap));
    }
    return Status::Ok();
  }
  return f.unsupported(field + ".type", type);
}

Status parse_model(const Fields& f, const json& root, BigModelFields& big,
                   BpeTokenizerConfig& cfg, std::string& unk_token) {
  LLMS_ASSIGN_OR_RETURN(const json* model, f.object(root, "model", "model"));
  std::string type = "BPE";
  if (model->contains("type")) {
    LLMS_ASSIGN_OR_RETURN(type, f.string(*model, "type", "model.type"));
  }
  if (type != "BPE") return f.unsupported("model.type", type);
  if (!big.has_vocab) return f.missing("model.vocab");
  if (!big.has_merges) return f.missing("model.merges");
  for (auto& [token, id] : big.vocab) {
    const auto index = static_cast<size_t>(id);
    if (index >= cfg.tokens.size()) cfg.tokens.resize(index + 1);
    cfg.tokens[index] = std::move(token);
  }
  cfg.merges = std::move(big.merges);
  BpeModel::Options& o = cfg.model_options;
  LLMS_ASSIGN_OR_RETURN(o.ignore_merges, f.boolean(*model, "ignore_merges", "model.ignore_merges", false));
  LLMS_ASSIGN_OR_RETURN(o.byte_fallback, f.boolean(*model, "byte_fallback", "model.byte_fallback", false));
  LLMS_ASSIGN_OR_RETURN(o.fuse_unk, f.boolean(*model, "fuse_unk", "model.fuse_unk", false));
  LLMS_ASSIGN_OR_RETURN(unk_token, f.string(*model, "unk_token", "model.unk_token", std::string()));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    LLMS_ASSIGN_OR_RETURN(const std::string v,
                          f.string(*model, key, std::string("model.") + key, std::string()));
    if (!v.empty()) return f.unsupported(std::string("model.") + key, v);
  }
  if (model->contains("dropout") && !(*model)["dropout"].is_null()) {
    return f.unsupported("model.dropout", (*model)["dropout"].dump());
  }
  return Status::Ok();
}

Status parse_added_tokens(const Fields& f, const json& root, BpeTokenizerConfig& cfg) {
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return f.wrong_type("added_tokens", "an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string field = fmt::format("added_tokens[{}]", i);
    const json& t = (*it)[i];
    if (!t.is_object()) return f.wrong_type(field, "an object");
    AddedToken tok;
    LLMS_ASSIGN_OR_RETURN(const int64_t id, f.integer(t, "id", field + ".id"));
    if (id < 0 || id >= INT32_MAX) return f.wrong_type(field + ".id", "a non-negative id");
    tok.id = static_cast<int32_t>(id);
    LLMS_ASSIGN_OR_RETURN(tok.content, f.string(t, "content", field + ".content"));
    LLMS_ASSIGN_OR_RETURN(tok.special, f.boolean(t, "special", field + ".special", false));
    LLMS_ASSIGN_OR_RETURN(tok.lstrip, f.boolean(t, "lstrip", field + ".lstrip", false));
    LLMS_ASSIGN_OR_RETURN(tok.rstrip, f.boolean(t, "rstrip", field + ".rstrip", false));
    LLMS_ASSIGN_OR_RETURN(tok.single_word, f.boolean(t, "single_word", field + ".single_word", false));
    LLMS_ASSIGN_OR_RETURN(tok.normalized,
                          f.boolean(t, "normalized", field + ".normalized", !tok.special));
    cfg.added_tokens.push_back(std::move(tok));
  }
  return Status::Ok();
}

/// A tokenizer_config.json token entry: "text", {"content": "text", ...} or null.
Expected<std::optional<std::string>> config_token(const Fields& f, const json& cfg,
                                                  std::string_view key) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    LLMS_ASSIGN_OR_RETURN(std::string s, f.string(*it, "content", std::string(key) + ".content"));
    return std::optional<std::string>(std::move(s));
  }
  return f.wrong_type(std::string(key), "a string or an object with 'content'");
}

Expected<std::unique_ptr<Tokenizer>> build(const std::string& json_path,
                                           const std::string& config_path) {
  BigModelFields big;
  LLMS_ASSIGN_OR_RETURN(const json root, parse_tokenizer_json(json_path, big));
  const Fields f(json_path);
  BpeTokenizerConfig cfg;
  std::string unk_token;
  LLMS_RETURN_IF_ERROR(parse_model(f, root, big, cfg, unk_token));
  LLMS_RETURN_IF_ERROR(parse_added_tokens(f, root, cfg));

  auto find_id = [&](std::string_view text) -> int32_t {
    for (const AddedToken& t : cfg.added_tokens)
      if (t.content == text) return t.id;
    for (size_t id = 0; id < cfg.tokens.size(); ++id)
      if (cfg.tokens[id] == text) return static_cast<int32_t>(id);
    return -1;
  };
  if (!unk_token.empty()) {
    cfg.model_options.unk_id = find_id(unk_token);
    if (cfg.model_options.unk_id < 0) {
      return DataLoss("{}: field 'model.unk_token' = '{}' is not in the vocabulary", json_path,
                      unk_token);
    }
  }

  LLMS_ASSIGN_OR_RETURN(const json* normalizer, f.object(root, "normalizer", "normalizer", true));
  if (normalizer) {
    LLMS_ASSIGN_OR_RETURN(cfg.normalizer, parse_normalizer(f, *normalizer, "normalizer"));
  }
  LLMS_ASSIGN_OR_RETURN(const json* pre, f.object(root, "pre_tokenizer", "pre_tokenizer", true));
  if (pre) {
    LLMS_ASSIGN_OR_RETURN(cfg.pre_tokenizer, parse_pre_tokenizer(f, *pre, "pre_tokenizer"));
  }
  LLMS_ASSIGN_OR_RETURN(const json* decoder, f.object(root, "decoder", "decoder", true));
  if (decoder) {
    LLMS_ASSIGN_OR_RETURN(cfg.decoder, parse_decoder(f, *decoder, "decoder"));
  }
  Wrap wrap;
  LLMS_ASSIGN_OR_RETURN(const json* post, f.object(root, "post_processor", "post_processor", true));
  if (post) {
    LLMS_RETURN_IF_ERROR(parse_post_processor(f, *post, "post_processor", wrap));
  }

  // tokenizer_config.json: BOS/EOS names, add_bos_token/add_eos_token, clean-up default.
  if (!wrap.prefix.empty()) cfg.bos_id = wrap.prefix.front();
  if (!wrap.suffix.empty()) cfg.eos_id = wrap.suffix.back();
  if (!config_path.empty()) {
    LLMS_ASSIGN_OR_RETURN(const json config, parse_json(config_path));
    const Fields c(config_path);
    for (auto [key, id] : {std::pair<const char*, int32_t*>{"bos_token", &cfg.bos_id},
                           std::pair<const char*, int32_t*>{"eos_token", &cfg.eos_id}}) {
      LLMS_ASSIGN_OR_RETURN(const std::optional<std::string> name, config_token(c, config, key));
      if (!name) continue;
      *id = find_id(*name);
      if (*id < 0) {
        return DataLoss("{}: field '{}' = '{}' is not a token of {}", config_path, key, *name,
                        json_path);
      }
    }
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      const bool add = config["add_bos_token"].get<bool>();
      const bool has = !wrap.prefix.empty() && wrap.prefix.front() == cfg.bos_id;
      if (add && !has && cfg.bos_id >= 0) wrap.prefix.insert(wrap.prefix.begin(), cfg.bos_id);
      if (!add && has) wrap.prefix.erase(wrap.prefix.begin());
    }
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
      const bool add = config["add_eos_token"].get<bool>();
      const bool has = !wrap.suffix.empty() && wrap.suffix.back() == cfg.eos_id;
      if (add && !has && cfg.eos_id >= 0) wrap.suffix.push_back(cfg.eos_id);
      if (!add && has) wrap.suffix.pop_back();
    }
    LLMS_ASSIGN_OR_RETURN(cfg.clean_up_tokenization_spaces,
                          c.boolean(config, "clean_up_tokenization_spaces",
                                    "clean_up_tokenization_spaces", false));
  }
  cfg.prefix_ids = std::move(wrap.prefix);
  cfg.suffix_ids = std::move(wrap.suffix);
  cfg.added_mode = AddedTokenSplitter::Mode::kHuggingFace;
  cfg.decode_added_tokens = true;
  return make_bpe_tokenizer(std::move(cfg));
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& json_path,
                                                         const std::string& config_path) {
  try {
    return build(json_path, config_path);
  } catch (const std::exception& e) {
    // Defensive: every field is type-checked above; a library exception still must not escape.
    return DataLoss("{}: cannot load tokenizer: {}", json_path, e.what());
  }
}

}  // namespace llmserve
