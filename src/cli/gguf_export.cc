#include "cli/gguf_export.h"

#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model_assets.h"
#include "weights/gguf.h"
#include "weights/mapped_file.h"

namespace llmserve::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// llama.cpp's token types (enum llama_token_type / gguf-py TokenType).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
                  kByte = 6;

Expected<json> read_json(const fs::path& p) {
  LLMS_ASSIGN_OR_RETURN(std::string text, read_text_file(p.string()));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("{}: invalid JSON", p.string());
  return j;
}

/// j[key] when it is a string (else `fallback`: absent, null or another type).
std::string string_or(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

/// j[key] when it is a boolean, else `fallback`.
bool bool_or(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

/// "a b" or ["a", "b"] (tokenizers >= 0.20 writes pairs) -> "ab".
std::optional<std::string> merged_piece(const json& m) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos) return std::nullopt;
    return s.substr(0, sp) + s.substr(sp + 1);
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return m[0].get<std::string>() + m[1].get<std::string>();
  return std::nullopt;
}

}  // namespace

Status add_hf_model_metadata(GgufWriter& w, const ModelFile& file) {
  const ModelConfig& c = file.config();
  if (c.architecture != "llama" && c.architecture != "qwen2" && c.architecture != "qwen3")
    return Unimplemented("{}: exporting a {} Hugging Face checkpoint to GGUF is not supported "
                         "(llama, qwen2, qwen3); convert it with llama.cpp's "
                         "convert_hf_to_gguf.py first", file.path(), c.architecture);
  if (c.is_moe())  // its experts would need stacking and the expert keys
    return Unimplemented("{}: exporting a mixture-of-experts Hugging Face checkpoint to GGUF is "
                         "not supported; convert it with llama.cpp's convert_hf_to_gguf.py first",
                         file.path());
  if (c.rope_scaling.type == RopeScalingType::kLlama3 || c.rope_scaling.type == RopeScalingType::kLongRope)
    return Unimplemented("{}: {} rope scaling (llama.cpp's rope_freqs / rope_factors tensors) is not "
                         "exported; convert with convert_hf_to_gguf.py first", file.path(),
                         c.rope_scaling.type == RopeScalingType::kLlama3 ? "llama3" : "longrope");
  if (c.rope_scaling.type == RopeScalingType::kYarn &&
      (c.rope_scaling.attention_factor > 0.0f || !c.rope_scaling.truncate))
    return Unimplemented("{}: yarn rope scaling with attention_factor / mscale or truncate = "
                         "false has no GGUF key; convert with convert_hf_to_gguf.py first", file.path());
  const std::string a = c.architecture + ".";
  w.add_string("general.architecture", c.architecture);
  w.add_string("general.name", c.name);
  w.add_uint32(a + "context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.add_uint32(a + "embedding_length", static_cast<uint32_t>(c.dim));
  w.add_uint32(a + "block_count", static_cast<uint32_t>(c.n_layers));
  w.add_uint32(a + "feed_forward_length", static_cast<uint32_t>(c.ffn_dim));
  w.add_uint32(a + "attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.add_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  if (c.head_dim * c.n_heads != c.dim) {
    w.add_uint32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.add_uint32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  w.add_uint32(a + "rope.dimension_count", static_cast<uint32_t>(c.rope_dim()));
  w.add_float32(a + "rope.freq_base", c.rope_theta);
  w.add_float32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.rope_scaling.type == RopeScalingType::kLinear) {
    w.add_string(a + "rope.scaling.type", "linear");
    w.add_float32(a + "rope.scaling.factor", c.rope_scaling.factor);
  }
  if (c.rope_scaling.type == RopeScalingType::kYarn) {  // llama.cpp's keys
    w.add_string(a + "rope.scaling.type", "yarn");
    w.add_float32(a + "rope.scaling.factor", c.rope_scaling.factor);
    w.add_uint32(a + "rope.scaling.original_context_length",
                 static_cast<uint32_t>(c.rope_scaling.original_max_position_embeddings));
    if (c.rope_scaling.beta_fast != 32.0f) w.add_float32(a + "rope.scaling.yarn_beta_fast", c.rope_scaling.beta_fast);
    if (c.rope_scaling.beta_slow != 1.0f) w.add_float32(a + "rope.scaling.yarn_beta_slow", c.rope_scaling.beta_slow);
  }
  w.add_uint32(a + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  return Status::Ok();
}

Status add_hf_tokenizer_metadata(GgufWriter& w, const ModelFile& file,
                                 const std::string& tokenizer_gguf) {
  const int32_t vocab = file.config().vocab_size;
  if (!tokenizer_gguf.empty()) {
    LLMS_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(tokenizer_gguf));
    if (!g.has_key("tokenizer.ggml.model"))
      return InvalidArgument("--tokenizer {}: the file has no tokenizer.ggml.model", tokenizer_gguf);
    if (auto tokens = g.get_string_array("tokenizer.ggml.tokens");
        tokens.ok() && static_cast<int64_t>(tokens->size()) > vocab)
      return InvalidArgument("--tokenizer {}: {} tokens, more than the model's vocabulary of {}",
                             tokenizer_gguf, tokens->size(), vocab);
    for (const auto& [key, v] : g.metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.add_value(key, v);
    return Status::Ok();
  }
  const fs::path dir(file.path());
  if (file.tokenizer_json_path().empty())
    return NotFound("{}: the directory has no tokenizer.json; pass --tokenizer FILE.gguf (a GGUF "
                    "of the same vocabulary whose tokenizer.* metadata is copied)", file.path());
  const fs::path tj = file.tokenizer_json_path();
  LLMS_ASSIGN_OR_RETURN(json tok, read_json(tj));
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object())
    return InvalidArgument("{}: no \"model\" object", tj.string());
  const json& model = tok["model"];
  if (string_or(model, "type", "") != "BPE" || !bool_or(model, "byte_fallback", false))
    return Unimplemented("{}: only SentencePiece-style BPE tokenizers (byte_fallback) are "
                         "converted to GGUF metadata; a byte-level BPE needs llama.cpp's "
                         "pre-tokenizer name: pass --tokenizer FILE.gguf", tj.string());
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return InvalidArgument("{}: model.vocab is missing", tj.string());
  std::vector<std::string> pieces;
  std::vector<int32_t> types;
  std::map<std::string, int32_t> id_of;
  auto put = [&](const std::string& piece, int64_t id, int32_t type) -> Status {
    if (id < 0 || id >= vocab)
      return InvalidArgument("{}: token '{}' has id {} outside the model's vocabulary of {}",
                             tj.string(), piece, id, vocab);
    if (pieces.size() <= static_cast<size_t>(id)) {
      pieces.resize(static_cast<size_t>(id) + 1);
      types.resize(static_cast<size_t>(id) + 1, 0);
    }
    pieces[id] = piece;
    types[id] = type;
    id_of[piece] = static_cast<int32_t>(id);
    return Status::Ok();
  };
  static const std::regex kBytePiece("<0x[0-9A-Fa-f]{2}>");
  const std::string unk = string_or(model, "unk_token", "");
  for (const auto& [piece, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) return InvalidArgument("{}: model.vocab['{}'] is not an id", tj.string(), piece);
    const int32_t type = piece == unk ? kUnknown
                         : std::regex_match(piece, kBytePiece) ? kByte
                                                               : kNormal;
    LLMS_RETURN_IF_ERROR(put(piece, id.get<int64_t>(), type));
  }
  const json added = tok.contains("added_tokens") && tok["added_tokens"].is_array()
                         ? tok["added_tokens"] : json::array();
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string())
      return InvalidArgument("{}: added_tokens entries need an integer id and a string content",
                             tj.string());
    const std::string content = a["content"].get<std::string>();
    const int32_t type = content == unk              ? kUnknown
                         : bool_or(a, "special", false) ? kControl
                                                        : kUserDefined;
    LLMS_RETURN_IF_ERROR(put(content, a["id"].get<int64_t>(), type));
  }
  // Scores: llama.cpp's SPM tokenizer merges the adjacent pair whose merged piece scores
  // highest; HF's BPE applies the lowest-ranked merge. Score = -(rank of the first merge that
  // makes the piece) orders them the same; pieces no merge makes never win a merge.
  std::vector<float> scores(pieces.size(), -1e9f);
  const json merges = model.contains("merges") && model["merges"].is_array() ? model["merges"]
                                                                             : json::array();
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::optional<std::string> m = merged_piece(merges[r]);
    if (!m) return InvalidArgument("{}: merge {} is malformed", tj.string(), r);
    auto it = id_of.find(*m);
    if (it != id_of.end() && scores[it->second] == -1e9f)
      scores[it->second] = -static_cast<float>(r + 1);
  }
  // Ids the tokenizer leaves out, up to the model's vocabulary (padded embeddings).
  pieces.resize(static_cast<size_t>(vocab));
  types.resize(static_cast<size_t>(vocab), 0);
  scores.resize(static_cast<size_t>(vocab), -1e9f);
  for (int32_t i = 0; i < vocab; ++i) {
    if (types[i] != 0) continue;
    pieces[i] = "[PAD" + std::to_string(i) + "]";  // as convert_hf_to_gguf.py pads
    types[i] = kUnused;
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", pieces);
  w.add_float32_array("tokenizer.ggml.scores", scores);
  w.add_int32_array("tokenizer.ggml.token_type", types);
  // Special ids: generation_config / config.json, else tokenizer_config.json's strings.
  json cfg = json::object();
  if (fs::exists(dir / "tokenizer_config.json")) {
    LLMS_ASSIGN_OR_RETURN(cfg, read_json(dir / "tokenizer_config.json"));
    if (!cfg.is_object()) cfg = json::object();
  }
  auto id_of_token = [&](const char* key) -> int64_t {
    if (!cfg.contains(key)) return -1;
    const json& v = cfg[key];
    const std::string s = v.is_string() ? v.get<std::string>()
                          : v.is_object() ? string_or(v, "content", "") : "";
    auto it = id_of.find(s);
    return it == id_of.end() ? -1 : it->second;
  };
  const GenerationConfig& gen = file.generation_config();
  const int64_t bos = gen.bos_token_id >= 0 ? gen.bos_token_id : id_of_token("bos_token");
  const int64_t eos = !gen.eos_token_ids.empty() ? gen.eos_token_ids[0] : id_of_token("eos_token");
  if (bos >= 0) w.add_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  if (eos >= 0) w.add_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  if (auto it = id_of.find(unk); !unk.empty() && it != id_of.end())
    w.add_uint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(it->second));
  w.add_bool("tokenizer.ggml.add_bos_token", bool_or(cfg, "add_bos_token", true));
  w.add_bool("tokenizer.ggml.add_eos_token", bool_or(cfg, "add_eos_token", false));
  LLMS_ASSIGN_OR_RETURN(std::optional<std::string> tpl, find_chat_template(file.path()));
  if (tpl) w.add_string("tokenizer.chat_template", *tpl);
  return Status::Ok();
}

bool is_permuted_qk(const ModelFile& file, const std::string& gguf_name, int32_t* heads) {
  if (file.format() != ModelFile::Format::kHfDir || file.config().architecture != "llama")
    return false;
  const auto ends = [&](const char* s) {
    const std::string_view n(gguf_name), suffix(s);
    return n.size() >= suffix.size() && n.substr(n.size() - suffix.size()) == suffix;
  };
  if (ends(".attn_q.weight") || ends(".attn_q.bias")) {
    *heads = file.config().n_heads;
    return true;
  }
  if (ends(".attn_k.weight") || ends(".attn_k.bias")) {
    *heads = file.config().n_kv_heads;
    return true;
  }
  return false;
}

int64_t hf_row_of_gguf_row(int64_t g, int64_t rows, int32_t heads) {
  const int64_t hd = rows / heads, h = g / hd, k = g % hd;
  return h * hd + (k % 2) * (hd / 2) + k / 2;
}

}  // namespace llmserve::cli
