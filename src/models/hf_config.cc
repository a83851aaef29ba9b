#include "models/hf_config.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "weights/mapped_file.h"

namespace llmserve {
namespace {

using nlohmann::json;

Expected<json> read_json_file(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(std::string text, read_text_file(path, size_t{16} << 20));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("{}: invalid JSON", path);
  if (!j.is_object()) return InvalidArgument("{}: expected a JSON object", path);
  return j;
}

/// Typed access to one JSON object with errors naming the file and the key. A key whose
/// value is null counts as absent (HF writes "head_dim": null, "q_lora_rank": null).
class Keys {
 public:
  Keys(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  Expected<int64_t> integer(const char* key) const {
    if (!has(key)) return InvalidArgument("{}: missing required key \"{}\"", file_, key);
    const json& v = j_.at(key);
    if (!v.is_number_integer())
      return InvalidArgument("{}: \"{}\" must be an integer, got {}", file_, key, v.dump());
    return v.get<int64_t>();
  }
  /// A positive int32 (sizes, counts).
  Expected<int32_t> size(const char* key) const {
    LLMS_ASSIGN_OR_RETURN(int64_t v, integer(key));
    if (v <= 0 || v > INT32_MAX)
      return InvalidArgument("{}: \"{}\" = {} is out of range (must be positive)", file_, key,
                             v);
    return static_cast<int32_t>(v);
  }
  Expected<int32_t> size_or(const char* key, int32_t fallback) const {
    if (!has(key)) return fallback;
    return size(key);
  }
  Expected<double> number(const char* key) const {
    if (!has(key)) return InvalidArgument("{}: missing required key \"{}\"", file_, key);
    const json& v = j_.at(key);
    if (!v.is_number())
      return InvalidArgument("{}: \"{}\" must be a number, got {}", file_, key, v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d)) return InvalidArgument("{}: \"{}\" must be finite", file_, key);
    return d;
  }
  Expected<double> number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    return number(key);
  }
  Expected<bool> boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean())
      return InvalidArgument("{}: \"{}\" must be true or false, got {}", file_, key, v.dump());
    return v.get<bool>();
  }
  Expected<std::string> string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_string())
      return InvalidArgument("{}: \"{}\" must be a string, got {}", file_, key, v.dump());
    return v.get<std::string>();
  }
  const std::string& file() const { return file_; }
  const json& raw() const { return j_; }

 private:
  const json& j_;
  std::string file_;
};

struct ArchInfo {
  const char* model_type;
  const char* class_name;
  const char* arch;             // internal (GGUF) name
  int32_t default_max_positions;  // transformers' config default
};

// transformers defaults: LlamaConfig 2048, MistralConfig 4096*32, Qwen2/Qwen3Config 32768,
// DeepseekV2Config 2048, DeepseekV3Config 4096.
constexpr ArchInfo kArchs[] = {
    {"llama", "LlamaForCausalLM", "llama", 2048},
    {"mistral", "MistralForCausalLM", "llama", 4096 * 32},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", 32768},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", 32768},
    {"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3moe", 32768},
    {"qwen2_moe", "Qwen2MoeForCausalLM", "qwen2moe", 32768},
    {"phi3", "Phi3ForCausalLM", "phi3", 4096},
    {"mixtral", "MixtralForCausalLM", "llama", 4096 * 32},
    {"deepseek_v2", "DeepseekV2ForCausalLM", "deepseek2", 2048},
    {"deepseek_v3", "DeepseekV3ForCausalLM", "deepseek2", 4096},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", 8192},
    {"gemma3_text", "Gemma3ForCausalLM", "gemma3", 131072},
};

Expected<RopeScaling> read_rope_scaling(const Keys& k) {
  RopeScaling rs;
  if (!k.has("rope_scaling")) return rs;
  const json& v = k.raw().at("rope_scaling");
  if (!v.is_object())
    return InvalidArgument("{}: \"rope_scaling\" must be an object or null", k.file());
  const Keys r(v, k.file() + " rope_scaling");
  // transformers accepts "rope_type" (current) or "type" (legacy).
  LLMS_ASSIGN_OR_RETURN(std::string type, r.string_or("rope_type", ""));
  if (type.empty()) {
    LLMS_ASSIGN_OR_RETURN(type, r.string_or("type", ""));
  }
  if (type.empty()) {  // {} means none; a factor without a type has no meaning in transformers
    if (r.has("factor"))
      return InvalidArgument("{}: \"rope_scaling\" has a factor but no \"rope_type\"", k.file());
    type = "default";
  }
  if (type == "default") return rs;
  if (type == "linear") {
    rs.type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::kLlama3;
    LLMS_ASSIGN_OR_RETURN(double lo, r.number("low_freq_factor"));
    LLMS_ASSIGN_OR_RETURN(double hi, r.number("high_freq_factor"));
    LLMS_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          r.size("original_max_position_embeddings"));
    rs.low_freq_factor = static_cast<float>(lo);
    rs.high_freq_factor = static_cast<float>(hi);
  } else if (type == "yarn") {
    rs.type = RopeScalingType::kYarn;
    // Without original_max_position_embeddings transformers uses max_position_embeddings: the
    // caller fills it in (0 here).
    LLMS_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          r.size_or("original_max_position_embeddings", 0));
    LLMS_ASSIGN_OR_RETURN(double fast, r.number_or("beta_fast", 32.0));
    LLMS_ASSIGN_OR_RETURN(double slow, r.number_or("beta_slow", 1.0));
    LLMS_ASSIGN_OR_RETURN(rs.truncate, r.boolean_or("truncate", true));
    if (!(fast > 0) || !(slow > 0))
      return InvalidArgument("{}: rope_scaling beta_fast ({}) and beta_slow ({}) must be > 0", k.file(), fast, slow);
    rs.beta_fast = static_cast<float>(fast);
    rs.beta_slow = static_cast<float>(slow);
    LLMS_ASSIGN_OR_RETURN(double factor, r.number("factor"));
    if (!(factor > 0) || !std::isfinite(factor))
      return InvalidArgument("{}: rope_scaling factor {} must be > 0", k.file(), factor);
    auto mscale = [factor](double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
    if (r.has("attention_factor")) {
      LLMS_ASSIGN_OR_RETURN(double af, r.number("attention_factor"));
      if (!(af > 0) || !std::isfinite(af))
        return InvalidArgument("{}: rope_scaling attention_factor {} must be > 0", k.file(), af);
      rs.attention_factor = static_cast<float>(af);
    } else if (r.has("mscale") && r.has("mscale_all_dim")) {
      LLMS_ASSIGN_OR_RETURN(double m, r.number("mscale"));
      LLMS_ASSIGN_OR_RETURN(double mall, r.number("mscale_all_dim"));
      if (m != 0 && mall != 0) rs.attention_factor = static_cast<float>(mscale(m) / mscale(mall));
    }
  } else if (type == "longrope" || type == "su") {  // "su": Phi-3's first configs
    rs.type = RopeScalingType::kLongRope;
    for (auto [key, out] : {std::pair{"long_factor", &rs.long_factor}, std::pair{"short_factor", &rs.short_factor}}) {
      if (!r.has(key) || !r.raw().at(key).is_array())
        return InvalidArgument("{}: longrope needs \"{}\", a list of numbers", k.file(), key);
      for (const json& v : r.raw().at(key)) {
        if (!v.is_number()) return InvalidArgument("{}: \"{}\" must hold numbers, got {}", k.file(), key, v.dump());
        out->push_back(v.get<float>());
      }
    }
    if (r.has("attention_factor")) {
      LLMS_ASSIGN_OR_RETURN(double af, r.number("attention_factor"));
      if (!(af > 0) || af > 1e4)
        return InvalidArgument("{}: rope_scaling attention_factor {} must be > 0", k.file(), af);
      rs.attention_factor = static_cast<float>(af);
    }
    // factor and original_max_position_embeddings: the caller (they may sit at the top level).
    LLMS_ASSIGN_OR_RETURN(double factor, r.number_or("factor", 0.0));
    rs.factor = static_cast<float>(factor);
    LLMS_ASSIGN_OR_RETURN(rs.original_max_position_embeddings, r.size_or("original_max_position_embeddings", 0));
    return rs;
  } else {
    return Unimplemented("{}: rope_scaling type \"{}\" is not supported (supported: linear, "
                         "llama3, yarn, longrope)", k.file(), type);
  }
  LLMS_ASSIGN_OR_RETURN(double factor, r.number("factor"));
  rs.factor = static_cast<float>(factor);
  return rs;
}

// (HF name inside model.layers.N., GGUF name inside blk.N.)
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // Phi-3: q, k, v fused
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},       // Phi-3: gate then up (llama.cpp's ffn_up)
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
    {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
    {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},  // MoE router: present = MoE layer
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},  // Mixtral's router
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},  // Qwen2-MoE
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},  // DeepSeek
    {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},  // DeepSeek-V3 selection bias
};
// Gemma 2 / 3: norms around attention and the MLP (llama.cpp's names); the rest as above.
constexpr std::pair<const char*, const char*> kGemmaLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};
bool is_gemma(std::string_view arch) { return arch == "gemma2" || arch == "gemma3"; }
// One expert's projections, mlp.experts.E.<hf> -> blk.N.<gguf>.E.weight (the per-expert names
// of llama.cpp's older Mixtral GGUFs; newer GGUFs stack experts in blk.N.ffn_*_exps.weight).
constexpr std::pair<const char*, const char*> kExpertNames[] = {
    {"gate_proj.weight", "ffn_gate"},
    {"up_proj.weight", "ffn_up"},
    {"down_proj.weight", "ffn_down"},
};
// Mixtral's: block_sparse_moe.experts.E.w1 (gate), w3 (up), w2 (down).
constexpr std::pair<const char*, const char*> kMixtralExpertNames[] = {
    {"w1.weight", "ffn_gate"},
    {"w3.weight", "ffn_up"},
    {"w2.weight", "ffn_down"},
};
constexpr std::pair<const char*, const char*> kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

bool parse_layer(std::string_view name, std::string_view prefix, int* layer,
                 std::string_view* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 9) return false;
  if (dot > 1 && name[0] == '0') return false;  // "01" is not a layer index
  int v = 0;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *layer = v;
  *rest = name.substr(dot + 1);
  return true;
}

}  // namespace

std::optional<std::string> gguf_name_for_hf(std::string_view hf_name, std::string_view architecture) {
  if (architecture == "gemma3") {  // Gemma3ForConditionalGeneration's text model
    std::string_view rest = hf_name;
    if (rest.substr(0, 15) == "language_model.") return gguf_name_for_hf(rest.substr(15), "gemma3");
    if (rest.substr(0, 21) == "model.language_model.")
      return gguf_name_for_hf("model." + std::string(rest.substr(21)), "gemma3");
  }
  for (const auto& [hf, gg] : kGlobalNames)
    if (hf_name == hf) return std::string(gg);
  int layer = 0;
  std::string_view rest;
  if (!parse_layer(hf_name, "model.layers.", &layer, &rest)) return std::nullopt;
  if (is_gemma(architecture)) {
    for (const auto& [hf, gg] : kGemmaLayerNames)
      if (rest == hf) return "blk." + std::to_string(layer) + "." + gg;
  }
  for (const auto& [hf, gg] : kLayerNames)
    if (rest == hf) return "blk." + std::to_string(layer) + "." + gg;
  int expert = 0;
  std::string_view what;
  if (parse_layer(rest, "mlp.experts.", &expert, &what)) {
    for (const auto& [hf, gg] : kExpertNames)
      if (what == hf) return "blk." + std::to_string(layer) + "." + gg + "." + std::to_string(expert) + ".weight";
  }
  if (parse_layer(rest, "block_sparse_moe.experts.", &expert, &what)) {
    for (const auto& [hf, gg] : kMixtralExpertNames)
      if (what == hf) return "blk." + std::to_string(layer) + "." + gg + "." + std::to_string(expert) + ".weight";
  }
  return std::nullopt;
}

std::optional<std::string> hf_name_for_gguf(std::string_view gguf_name, std::string_view architecture) {
  for (const auto& [hf, gg] : kGlobalNames)
    if (gguf_name == gg) return std::string(hf);
  int layer = 0;
  std::string_view rest;
  if (!parse_layer(gguf_name, "blk.", &layer, &rest)) return std::nullopt;
  if (is_gemma(architecture)) {
    for (const auto& [hf, gg] : kGemmaLayerNames)
      if (rest == gg) return "model.layers." + std::to_string(layer) + "." + hf;
  }
  for (const auto& [hf, gg] : kLayerNames)
    if (rest == gg) return "model.layers." + std::to_string(layer) + "." + hf;
  for (const auto& [hf, gg] : kExpertNames) {
    const std::string_view prefix = gg;
    int expert = 0;
    std::string_view tail;
    if (rest.substr(0, prefix.size()) == prefix && rest.size() > prefix.size() && rest[prefix.size()] == '.' &&
        parse_layer(rest.substr(prefix.size() + 1), "", &expert, &tail) && tail == "weight")
      return "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(expert) + "." + hf;
  }
  return std::nullopt;
}

/// Sliding-window attention as transformers configures it: Mistral, Mixtral and Phi-3 slide
/// in every layer when sliding_window is set; Qwen2/Qwen3 (and their MoE) only with
/// use_sliding_window, in the layers >= max_window_layers (Qwen2Config's layer_types); an
/// explicit layer_types list ("sliding_attention" / "full_attention") wins.
static Status read_sliding_window(const Keys& k, std::string_view model_type, ModelConfig& c) {
  const std::string& path = k.file();
  const bool qwen = model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen2_moe" ||
                    model_type == "qwen3_moe";
  const bool gemma = model_type == "gemma2" || model_type == "gemma3_text";
  bool sliding = k.has("sliding_window") && (model_type == "mistral" || model_type == "mixtral" || model_type == "phi3");
  if (qwen) {
    LLMS_ASSIGN_OR_RETURN(sliding, k.boolean_or("use_sliding_window", false));
  }
  if (gemma) sliding = true;  // Gemma2Config / Gemma3TextConfig: sliding_window 4096 by default
  if (!sliding) return Status::Ok();
  if (!k.has("sliding_window") && !gemma)
    return InvalidArgument("{}: use_sliding_window is true but sliding_window is not set", path);
  LLMS_ASSIGN_OR_RETURN(c.sliding_window, k.size_or("sliding_window", 4096));
  c.sliding_layers.clear();
  if (k.has("layer_types")) {
    const nlohmann::json& t = k.raw().at("layer_types");
    if (!t.is_array() || static_cast<int64_t>(t.size()) != c.n_layers)
      return InvalidArgument("{}: \"layer_types\" must be a list of {} strings", path, c.n_layers);
    for (const nlohmann::json& v : t) {
      const std::string type = v.is_string() ? v.get<std::string>() : v.dump();
      if (type != "sliding_attention" && type != "full_attention")
        return Unimplemented("{}: layer_types entry \"{}\" is not supported (sliding_attention, "
                             "full_attention)", path, type);
      c.sliding_layers.push_back(type == "sliding_attention");
    }
  } else if (qwen) {
    int64_t first = 28;  // Qwen2Config's default; 0 = every layer slides
    if (k.has("max_window_layers")) {
      LLMS_ASSIGN_OR_RETURN(first, k.integer("max_window_layers"));
    }
    if (first < 0) return InvalidArgument("{}: \"max_window_layers\" = {} must be >= 0", path, first);
    for (int32_t l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back(l >= first);
  } else if (gemma) {
    // Gemma2Config: layer i slides when (i + 1) % 2 != 0; Gemma3TextConfig: when
    // (i + 1) % sliding_window_pattern != 0 (default 6).
    int64_t period = 2;
    if (model_type == "gemma3_text") {
      LLMS_ASSIGN_OR_RETURN(period, k.has("sliding_window_pattern") ? k.integer("sliding_window_pattern")
                                                                    : Expected<int64_t>(int64_t{6}));
      if (period < 1 || period > INT32_MAX)
        return InvalidArgument("{}: \"sliding_window_pattern\" = {} must be positive", path, period);
    }
    for (int32_t l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back((l + 1) % period != 0);
  }
  bool any = c.sliding_layers.empty();
  for (uint8_t s : c.sliding_layers) any |= s != 0;
  if (!any) {  // full attention everywhere
    c.sliding_window = 0;
    c.sliding_layers.clear();
  }
  return Status::Ok();
}

/// DeepSeek-V2/V3 MoE keys (modeling_deepseek.py DeepseekV2MoE / MoEGate and transformers'
/// DeepseekV3TopkRouter; defaults of DeepseekV2Config / DeepseekV3Config): layer l is an MoE
/// layer when l >= first_k_dense_replace and l % moe_layer_freq == 0 (only 1 is supported).
static Status read_deepseek_moe(const Keys& k, bool v3, ModelConfig& c) {
  const std::string& path = k.file();
  LLMS_ASSIGN_OR_RETURN(c.n_experts, k.size("n_routed_experts"));
  LLMS_ASSIGN_OR_RETURN(int32_t freq, k.size_or("moe_layer_freq", 1));
  if (freq != 1)
    return Unimplemented("{}: moe_layer_freq = {} is not supported (only 1: every layer after "
                         "first_k_dense_replace is an MoE layer)", path, freq);
  int64_t first_dense = v3 ? 3 : 0;
  if (k.has("first_k_dense_replace")) {
    LLMS_ASSIGN_OR_RETURN(first_dense, k.integer("first_k_dense_replace"));
  }
  if (first_dense < 0)
    return InvalidArgument("{}: first_k_dense_replace = {} must be >= 0", path, first_dense);
  c.n_dense_leading_layers = static_cast<int32_t>(std::min<int64_t>(first_dense, c.n_layers));
  LLMS_ASSIGN_OR_RETURN(c.n_experts_used, k.size("num_experts_per_tok"));
  LLMS_ASSIGN_OR_RETURN(c.expert_ffn_dim, k.size("moe_intermediate_size"));
  int64_t shared = v3 ? 1 : 0;
  if (k.has("n_shared_experts")) {
    LLMS_ASSIGN_OR_RETURN(shared, k.integer("n_shared_experts"));
  }
  if (shared < 0 || shared > 1024)
    return InvalidArgument("{}: n_shared_experts = {} is out of range", path, shared);
  c.shared_expert_ffn_dim = static_cast<int32_t>(shared) * c.expert_ffn_dim;
  c.shared_expert_gated = false;
  LLMS_ASSIGN_OR_RETURN(c.norm_topk_prob, k.boolean_or("norm_topk_prob", v3));
  LLMS_ASSIGN_OR_RETURN(double scale, k.number_or("routed_scaling_factor", v3 ? 2.5 : 1.0));
  if (!(scale > 0 && scale <= 1e4))  // released models: 1 to 16
    return InvalidArgument("{}: routed_scaling_factor = {} is out of range (0 to 1e4)", path, scale);
  c.routed_scaling_factor = static_cast<float>(scale);
  LLMS_ASSIGN_OR_RETURN(std::string scoring, k.string_or("scoring_func", v3 ? "sigmoid" : "softmax"));
  if (scoring == "softmax") {
    c.moe_scoring = MoeScoring::kSoftmax;
  } else if (scoring == "sigmoid") {
    c.moe_scoring = MoeScoring::kSigmoid;
  } else {
    return Unimplemented("{}: scoring_func \"{}\" is not supported (softmax, sigmoid)", path, scoring);
  }
  // DeepseekV2Config's default is spelled "gready"; MoEGate compares with "greedy".
  LLMS_ASSIGN_OR_RETURN(std::string method, k.string_or("topk_method", v3 ? "noaux_tc" : "greedy"));
  if (method == "greedy" || method == "gready") {
    c.n_expert_groups = c.n_expert_groups_used = 1;  // n_group / topk_group unused
  } else if (method == "group_limited_greedy" || method == "noaux_tc") {
    LLMS_ASSIGN_OR_RETURN(c.n_expert_groups, k.size_or("n_group", v3 ? 8 : 1));
    LLMS_ASSIGN_OR_RETURN(c.n_expert_groups_used, k.size_or("topk_group", v3 ? 4 : 1));
    c.moe_group_score = method == "noaux_tc" ? MoeGroupScore::kTop2Sum : MoeGroupScore::kMax;
  } else {
    return Unimplemented("{}: topk_method \"{}\" is not supported (greedy, group_limited_greedy, "
                         "noaux_tc)", path, method);
  }
  if (c.n_dense_leading_layers == c.n_layers) c.n_experts = 0;  // every layer dense
  return Status::Ok();
}

/// Gemma 2 / Gemma 3 text keys (transformers' Gemma2Config / Gemma3TextConfig defaults):
/// GeGLU (hidden_activation "gelu_pytorch_tanh"), head_dim 256, query_pre_attn_scalar 256,
/// tied embeddings; Gemma 2's attention and final soft-capping (50 / 30, null = off); Gemma 3's
/// q/k norms and its sliding layers' RoPE (rope_local_base_freq 10000, unscaled; rope_theta
/// 1e6 and rope_scaling for the global layers). The norm weights' 1 + w is ModelFile's.
static Status read_gemma(const Keys& k, bool gemma2, ModelConfig& c) {
  const std::string& path = k.file();
  const char* act_key = k.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  LLMS_ASSIGN_OR_RETURN(std::string act, k.string_or(act_key, "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    return Unimplemented("{}: {} \"{}\" is not supported for Gemma (only gelu_pytorch_tanh)", path, act_key, act);
  c.hidden_activation = MlpActivation::kGeluTanh;
  auto number_or_null = [&](const char* key, double fallback, float* out) -> Status {
    double v = fallback;
    if (k.raw().contains(key) && k.raw().at(key).is_null()) v = 0.0;  // null = off
    else if (k.has(key)) {
      LLMS_ASSIGN_OR_RETURN(v, k.number(key));
    }
    if (!(v >= 0.0) || v > 1e9)
      return InvalidArgument("{}: \"{}\" = {} is out of range (null or 0 = off for the caps; positive up to 1e9)",
                             path, key, v);
    *out = static_cast<float>(v);
    return Status::Ok();
  };
  LLMS_RETURN_IF_ERROR(number_or_null("attn_logit_softcapping", gemma2 ? 50.0 : 0.0, &c.attn_logit_softcapping));
  LLMS_RETURN_IF_ERROR(number_or_null("final_logit_softcapping", gemma2 ? 30.0 : 0.0, &c.final_logit_softcapping));
  LLMS_RETURN_IF_ERROR(number_or_null("query_pre_attn_scalar", 256.0, &c.query_pre_attn_scalar));
  if (c.query_pre_attn_scalar == 0.0f)
    return InvalidArgument("{}: \"query_pre_attn_scalar\" must be positive", path);
  if (!gemma2) {
    LLMS_RETURN_IF_ERROR(number_or_null("rope_local_base_freq", 10000.0, &c.rope_local_base_freq));
    if (c.rope_local_base_freq == 0.0f)
      return InvalidArgument("{}: \"rope_local_base_freq\" must be positive", path);
    LLMS_ASSIGN_OR_RETURN(bool bidirectional, k.boolean_or("use_bidirectional_attention", false));
    if (bidirectional)
      return Unimplemented("{}: use_bidirectional_attention = true (an embedding model without the causal mask) is "
                           "not supported", path);
  }
  return Status::Ok();
}

/// Gemma 3's multimodal checkpoints (model_type "gemma3", Gemma3ForConditionalGeneration: the
/// 4B/12B/27B releases) hold the text model's config in "text_config" (a Gemma3TextConfig,
/// often only the keys that differ from its defaults). The text model is served; the vision
/// tower's tensors are not loaded (ModelFile logs how many; requests are text only).
static Expected<json> gemma3_text_config(const json& top, const std::string& path) {
  if (!top.contains("text_config") || !top.at("text_config").is_object())
    return InvalidArgument("{}: a Gemma3ForConditionalGeneration config needs a \"text_config\" object", path);
  json t = top.at("text_config");
  if (t.contains("model_type") && t.at("model_type") != "gemma3_text")
    return Unimplemented("{}: text_config model_type {} is not supported (gemma3_text)", path,
                         t.at("model_type").dump());
  t["model_type"] = "gemma3_text";
  t["architectures"] = json::array({"Gemma3ForCausalLM"});
  return t;
}

/// transformers 5 spells rope_theta + rope_scaling (+ partial_rotary_factor) as one
/// "rope_parameters" object, per layer type for Gemma 3 ({"full_attention": {...},
/// "sliding_attention": {...}}, the latter's rope_theta being rope_local_base_freq). Rewrites `j`
/// into the transformers 4 keys the reader knows; a config giving both spellings is refused.
static Status normalize_rope_parameters(json& j, const std::string& path) {
  const json rp = j.at("rope_parameters");
  j.erase("rope_parameters");
  if (!rp.is_object()) return InvalidArgument("{}: \"rope_parameters\" must be an object", path);
  auto flat = [&](const json& p, const char* theta_key, bool scaling_allowed) -> Status {
    if (!p.is_object()) return InvalidArgument("{}: \"rope_parameters\" entries must be objects", path);
    json scaling = p;
    for (const char* key : {"rope_theta", "partial_rotary_factor"}) {
      if (!p.contains(key)) continue;
      const char* to = std::string_view(key) == "rope_theta" ? theta_key : key;
      if (j.contains(to) && !j.at(to).is_null() && j.at(to) != p.at(key))
        return InvalidArgument("{}: \"{}\" and rope_parameters' {} disagree", path, to, key);
      j[to] = p.at(key);
      scaling.erase(key);
    }
    const std::string type = scaling.value("rope_type", scaling.value("type", std::string("default")));
    if (type == "default" && scaling.size() <= 1) return Status::Ok();
    if (!scaling_allowed)
      return Unimplemented("{}: rope_parameters sliding_attention rope_type \"{}\" is not supported (default only)",
                           path, type);
    if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null() && j.at("rope_scaling") != scaling)
      return InvalidArgument("{}: both \"rope_scaling\" and \"rope_parameters\" are given and disagree", path);
    j["rope_scaling"] = scaling;
    return Status::Ok();
  };
  if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
    if (j.value("model_type", std::string()) != "gemma3_text")
      return Unimplemented("{}: per-layer-type rope_parameters are supported for Gemma 3 only", path);
    for (const auto& [key, v] : rp.items())
      if (key != "full_attention" && key != "sliding_attention")
        return Unimplemented("{}: rope_parameters entry \"{}\" is not supported (full_attention, "
                             "sliding_attention)", path, key);
    if (rp.contains("full_attention")) LLMS_RETURN_IF_ERROR(flat(rp.at("full_attention"), "rope_theta", true));
    if (rp.contains("sliding_attention"))
      LLMS_RETURN_IF_ERROR(flat(rp.at("sliding_attention"), "rope_local_base_freq", false));
    return Status::Ok();
  }
  return flat(rp, "rope_theta", true);
}

Expected<ModelConfig> read_hf_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  LLMS_ASSIGN_OR_RETURN(json top, read_json_file(path));
  json j = std::move(top);
  bool multimodal = false;
  {
    const Keys t(j, path);
    LLMS_ASSIGN_OR_RETURN(std::string type, t.string_or("model_type", ""));
    bool conditional = false;
    if (t.has("architectures") && j.at("architectures").is_array() && !j.at("architectures").empty())
      conditional = j.at("architectures")[0] == "Gemma3ForConditionalGeneration";
    if (type == "gemma3" || (type.empty() && conditional)) {
      LLMS_ASSIGN_OR_RETURN(j, gemma3_text_config(j, path));
      multimodal = true;
    }
    if (j.contains("rope_parameters") && !j.at("rope_parameters").is_null()) {
      LLMS_RETURN_IF_ERROR(normalize_rope_parameters(j, path));
    }
  }
  const Keys k(j, path);

  LLMS_ASSIGN_OR_RETURN(std::string model_type, k.string_or("model_type", ""));
  std::string class_name;
  if (k.has("architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string())
      return InvalidArgument("{}: \"architectures\" must be a non-empty list of strings", path);
    class_name = a[0].get<std::string>();
  }
  const ArchInfo* info = nullptr;
  for (const ArchInfo& a : kArchs)
    if ((!model_type.empty() && model_type == a.model_type) ||
        (model_type.empty() && class_name == a.class_name))
      info = &a;
  if (info == nullptr)
    return Unimplemented("{}: unsupported architecture (model_type \"{}\", architectures "
                         "\"{}\"); supported: LlamaForCausalLM, MistralForCausalLM, "
                         "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, "
                         "MixtralForCausalLM, Phi3ForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, "
                         "Gemma2ForCausalLM, Gemma3ForCausalLM",
                         path, model_type, class_name);
  if (!class_name.empty() && class_name != info->class_name)
    return Unimplemented("{}: architectures \"{}\" is not supported for model_type \"{}\" "
                         "(expected {})", path, class_name, info->model_type, info->class_name);

  ModelConfig c;
  c.architecture = info->arch;
  c.vision_tower_not_loaded = multimodal;
  if (c.architecture == "gemma2" || c.architecture == "gemma3") {
    // Gemma2Config / Gemma3TextConfig defaults (a multimodal Gemma 3's text_config gives only
    // the keys that differ): the 2B/1B-class shape.
    LLMS_ASSIGN_OR_RETURN(c.dim, k.size_or("hidden_size", 2304));
    LLMS_ASSIGN_OR_RETURN(c.ffn_dim, k.size_or("intermediate_size", 9216));
    LLMS_ASSIGN_OR_RETURN(c.n_heads, k.size_or("num_attention_heads", 8));
    LLMS_ASSIGN_OR_RETURN(c.n_layers, k.size_or("num_hidden_layers", 26));
    LLMS_ASSIGN_OR_RETURN(c.vocab_size, k.size_or("vocab_size", c.architecture == "gemma2" ? 256000 : 262208));
    LLMS_ASSIGN_OR_RETURN(c.n_kv_heads, k.size_or("num_key_value_heads", 4));
  } else {
    LLMS_ASSIGN_OR_RETURN(c.dim, k.size("hidden_size"));
    LLMS_ASSIGN_OR_RETURN(c.ffn_dim, k.size("intermediate_size"));
    LLMS_ASSIGN_OR_RETURN(c.n_heads, k.size("num_attention_heads"));
    LLMS_ASSIGN_OR_RETURN(c.n_layers, k.size("num_hidden_layers"));
    LLMS_ASSIGN_OR_RETURN(c.vocab_size, k.size("vocab_size"));
    LLMS_ASSIGN_OR_RETURN(c.n_kv_heads, k.size_or("num_key_value_heads", c.n_heads));
  }
  LLMS_ASSIGN_OR_RETURN(c.max_position_embeddings,
                        k.size_or("max_position_embeddings", info->default_max_positions));
  LLMS_ASSIGN_OR_RETURN(double eps, k.number_or("rms_norm_eps", 1e-6));
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  LLMS_ASSIGN_OR_RETURN(double theta, k.number_or("rope_theta", c.architecture == "gemma3" ? 1e6 : 10000.0));
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  LLMS_ASSIGN_OR_RETURN(c.tie_word_embeddings, k.boolean_or("tie_word_embeddings", gemma));
  LLMS_ASSIGN_OR_RETURN(c.rope_scaling, read_rope_scaling(k));
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.original_max_position_embeddings == 0)
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  if (c.rope_scaling.type == RopeScalingType::kLongRope) {
    // transformers' _compute_longrope_parameters: with a top-level original_max_position_embeddings
    // (Phi-3) the factor is max_position_embeddings / it; else the original is
    // max_position_embeddings and rope_scaling's factor is used. The attention factor defaults
    // to sqrt(1 + ln(factor) / ln(original)) (1 when factor <= 1).
    RopeScaling& rs = c.rope_scaling;
    // (transformers 5 moves the original context into rope_parameters: the same meaning.)
    if (k.has("original_max_position_embeddings")) {
      LLMS_ASSIGN_OR_RETURN(int32_t orig, k.size("original_max_position_embeddings"));
      if (rs.original_max_position_embeddings != 0 && rs.original_max_position_embeddings != orig)
        return InvalidArgument("{}: original_max_position_embeddings {} and rope_scaling's {} disagree", path, orig,
                               rs.original_max_position_embeddings);
      rs.original_max_position_embeddings = orig;
    }
    if (rs.original_max_position_embeddings != 0) {
      rs.factor = static_cast<float>(double(c.max_position_embeddings) / rs.original_max_position_embeddings);
    } else {
      rs.original_max_position_embeddings = c.max_position_embeddings;
      if (rs.factor < 0.0f || !std::isfinite(rs.factor))
        return InvalidArgument("{}: rope_scaling factor {} must be positive", path, rs.factor);
      if (rs.factor == 0.0f) rs.factor = 1.0f;
    }
    if (rs.attention_factor == 0.0f) {
      const double f = rs.factor, orig = rs.original_max_position_embeddings;
      if (f > 1.0 && orig <= 1)
        return InvalidArgument("{}: longrope with an original context of {} needs an explicit attention_factor "
                               "(sqrt(1 + ln(factor) / ln(original)) divides by 0)", path, orig);
      rs.attention_factor = f <= 1.0 ? 1.0f : static_cast<float>(std::sqrt(1.0 + std::log(f) / std::log(orig)));
    }
  }
  LLMS_ASSIGN_OR_RETURN(std::string act, k.string_or("hidden_act", "silu"));
  if (gemma) {
    LLMS_RETURN_IF_ERROR(read_gemma(k, c.architecture == "gemma2", c));
  } else if (act != "silu")
    return Unimplemented("{}: hidden_act \"{}\" is not supported (only silu / SwiGLU)", path,
                         act);
  LLMS_ASSIGN_OR_RETURN(bool mlp_bias, k.boolean_or("mlp_bias", false));
  if (mlp_bias) return Unimplemented("{}: mlp_bias = true is not supported", path);

  if (c.architecture == "deepseek2") {
    if (c.rope_scaling.type == RopeScalingType::kYarn) {
      // DeepseekV2YarnRotaryEmbedding: cos and sin times get_mscale(factor, mscale) /
      // get_mscale(factor, mscale_all_dim) (defaults 1 and 0), and DeepseekV2Attention's
      // softmax scale times get_mscale(factor, mscale_all_dim)^2.
      const Keys r(k.raw().at("rope_scaling"), path + " rope_scaling");
      LLMS_ASSIGN_OR_RETURN(double m, r.number_or("mscale", 1.0));
      LLMS_ASSIGN_OR_RETURN(double mall, r.number_or("mscale_all_dim", 0.0));
      if (!(m >= 0 && m <= 100) || !(mall >= 0 && mall <= 100))  // released models: 0.707 and 1
        return InvalidArgument("{}: rope_scaling mscale ({}) and mscale_all_dim ({}) must be within 0 to 100", path,
                               m, mall);
      if (r.has("attention_factor"))
        return Unimplemented("{}: rope_scaling attention_factor is not supported for DeepSeek (it uses mscale "
                             "and mscale_all_dim)", path);
      const double f = c.rope_scaling.factor;
      auto get_mscale = [f](double v) { return f <= 1 ? 1.0 : 0.1 * v * std::log(f) + 1.0; };
      c.rope_scaling.attention_factor = static_cast<float>(get_mscale(m) / get_mscale(mall));
      c.rope_scaling.mscale_all_dim = static_cast<float>(mall);
    }
    c.rope_style = RopeStyle::kAdjacentPairs;  // modeling_deepseek de-interleaves q_pe / k_pe
    LLMS_ASSIGN_OR_RETURN(bool interleave, k.boolean_or("rope_interleave", true));
    if (!interleave)  // transformers' DeepseekV3: rotate-half on the raw dims instead
      return Unimplemented("{}: rope_interleave = false is not supported (DeepSeek's RoPE on adjacent pairs only)",
                           path);
    LLMS_ASSIGN_OR_RETURN(c.kv_lora_rank, k.size("kv_lora_rank"));
    LLMS_ASSIGN_OR_RETURN(c.q_lora_rank, k.size_or("q_lora_rank", 0));
    LLMS_ASSIGN_OR_RETURN(c.qk_nope_head_dim, k.size("qk_nope_head_dim"));
    LLMS_ASSIGN_OR_RETURN(c.qk_rope_head_dim, k.size("qk_rope_head_dim"));
    LLMS_ASSIGN_OR_RETURN(c.v_head_dim, k.size("v_head_dim"));
    c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
    c.n_kv_heads = 1;  // the latent is one shared "head"
    LLMS_ASSIGN_OR_RETURN(bool bias, k.boolean_or("attention_bias", false));
    if (bias) return Unimplemented("{}: attention_bias = true is not supported for MLA", path);
    LLMS_ASSIGN_OR_RETURN(int64_t experts,
                          k.has("n_routed_experts") ? k.integer("n_routed_experts")
                                                    : Expected<int64_t>(int64_t{0}));
    if (experts > 0) {
      LLMS_RETURN_IF_ERROR(read_deepseek_moe(k, info->model_type == std::string_view("deepseek_v3"), c));
    }
  } else {
    c.rope_style = RopeStyle::kRotateHalf;  // HF Q/K layout (no GGUF permutation)
    LLMS_ASSIGN_OR_RETURN(c.head_dim, k.size_or("head_dim", gemma ? 256 : c.dim / c.n_heads));
    if (!k.has("head_dim") && !gemma && c.dim % c.n_heads != 0)
      return InvalidArgument("{}: hidden_size {} is not a multiple of num_attention_heads {} "
                             "and no head_dim is given", path, c.dim, c.n_heads);
    // transformers: dim = int(head_dim * partial_rotary_factor) of each head is rotated.
    LLMS_ASSIGN_OR_RETURN(double partial, k.number_or("partial_rotary_factor", 1.0));
    if (!(partial > 0.0 && partial <= 1.0))
      return InvalidArgument("{}: partial_rotary_factor {} must be in (0, 1]", path, partial);
    const int32_t rotary = static_cast<int32_t>(c.head_dim * partial);
    if (rotary % 2 != 0 || rotary == 0)
      return InvalidArgument("{}: partial_rotary_factor {} gives {} rotary dims of head_dim {}: "
                             "must be even and positive", path, partial, rotary, c.head_dim);
    if (rotary < c.head_dim) c.rotary_dim = rotary;
    // Qwen2's attention always has q/k/v biases (transformers hard-codes bias=True).
    LLMS_ASSIGN_OR_RETURN(c.attention_bias,
                          k.boolean_or("attention_bias", c.architecture == "qwen2" || c.architecture == "qwen2moe"));
    c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3moe" || c.architecture == "gemma3";
    if (info->model_type == std::string_view("mixtral")) {  // MixtralSparseMoeBlock
      LLMS_ASSIGN_OR_RETURN(c.n_experts, k.size("num_local_experts"));
      LLMS_ASSIGN_OR_RETURN(c.n_experts_used, k.size("num_experts_per_tok"));
      c.expert_ffn_dim = c.ffn_dim;
      c.norm_topk_prob = true;  // transformers always renormalises Mixtral's top-k
    }
    if (c.architecture == "qwen3moe" || c.architecture == "qwen2moe") {
      LLMS_ASSIGN_OR_RETURN(c.n_experts, k.size("num_experts"));
      LLMS_ASSIGN_OR_RETURN(c.n_experts_used, k.size("num_experts_per_tok"));
      LLMS_ASSIGN_OR_RETURN(c.expert_ffn_dim, k.size("moe_intermediate_size"));
      LLMS_ASSIGN_OR_RETURN(c.norm_topk_prob, k.boolean_or("norm_topk_prob", false));
      if (c.architecture == "qwen2moe") {
        LLMS_ASSIGN_OR_RETURN(c.shared_expert_ffn_dim, k.size_or("shared_expert_intermediate_size", 0));
      }
    }
    if (c.is_moe()) {
      if (c.n_experts_used > c.n_experts)
        return InvalidArgument("{}: num_experts_per_tok {} is more than num_experts {}", path,
                               c.n_experts_used, c.n_experts);
      // Dense layers among the sparse ones (decoder_sparse_step > 1, mlp_only_layers) are not
      // implemented: refused rather than run as experts.
      LLMS_ASSIGN_OR_RETURN(int32_t step, k.size_or("decoder_sparse_step", 1));
      if (step != 1)
        return Unimplemented("{}: decoder_sparse_step = {} (dense MLP layers between MoE "
                             "layers) is not supported", path, step);
      if (k.has("mlp_only_layers") && !(j.at("mlp_only_layers").is_array() && j.at("mlp_only_layers").empty()))
        return Unimplemented("{}: mlp_only_layers (dense MLP layers in an MoE model) is not "
                             "supported", path);
    }
    if (c.n_heads % c.n_kv_heads != 0)
      return InvalidArgument("{}: num_attention_heads {} is not a multiple of "
                             "num_key_value_heads {}", path, c.n_heads, c.n_kv_heads);
    LLMS_RETURN_IF_ERROR(read_sliding_window(k, info->model_type, c));
  }
  if (Status st = c.validate(); !st.ok()) return InvalidArgument("{}: {}", path, st.message());
  return c;
}

Expected<GenerationConfig> read_hf_generation_config(const std::string& dir) {
  const std::filesystem::path gen = std::filesystem::path(dir) / "generation_config.json";
  std::error_code ec;
  const bool has_gen = std::filesystem::exists(std::filesystem::symlink_status(gen, ec));
  const std::string path = has_gen ? gen.string()
                                   : (std::filesystem::path(dir) / "config.json").string();
  LLMS_ASSIGN_OR_RETURN(json j, read_json_file(path));
  const Keys k(j, path);
  GenerationConfig g;
  if (k.has("eos_token_id")) {
    const json& e = j.at("eos_token_id");
    auto take = [&](const json& v) -> Status {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        return InvalidArgument("{}: \"eos_token_id\" must be a token id or a list of them, "
                               "got {}", path, v.dump());
      g.eos_token_ids.push_back(v.get<int32_t>());
      return Status::Ok();
    };
    if (e.is_array()) {
      for (const json& v : e) LLMS_RETURN_IF_ERROR(take(v));
    } else {
      LLMS_RETURN_IF_ERROR(take(e));
    }
  }
  if (k.has("bos_token_id")) {
    LLMS_ASSIGN_OR_RETURN(int64_t bos, k.integer("bos_token_id"));
    if (bos < 0 || bos > INT32_MAX)
      return InvalidArgument("{}: \"bos_token_id\" = {} is out of range", path, bos);
    g.bos_token_id = static_cast<int32_t>(bos);
  }
  if (has_gen) {
    // Ranges as SamplingParams::validate checks them, so a bad file fails at load instead of
    // turning every request that relies on the default into a 400.
    if (k.has("temperature")) {
      LLMS_ASSIGN_OR_RETURN(double t, k.number("temperature"));
      if (t < 0 || t > 1e6)
        return InvalidArgument("{}: \"temperature\" = {} must be in [0, 1e6]", path, t);
      g.temperature = static_cast<float>(t);
    }
    if (k.has("top_p")) {
      LLMS_ASSIGN_OR_RETURN(double p, k.number("top_p"));
      if (!(p > 0 && p <= 1))
        return InvalidArgument("{}: \"top_p\" = {} must be in (0, 1]", path, p);
      g.top_p = static_cast<float>(p);
    }
    if (k.has("min_p")) {
      LLMS_ASSIGN_OR_RETURN(double p, k.number("min_p"));
      if (!(p >= 0 && p <= 1))
        return InvalidArgument("{}: \"min_p\" = {} must be in [0, 1]", path, p);
      g.min_p = static_cast<float>(p);
    }
    if (k.has("max_new_tokens")) {
      LLMS_ASSIGN_OR_RETURN(int64_t m, k.integer("max_new_tokens"));
      if (m < 1 || m > INT32_MAX)
        return InvalidArgument("{}: \"max_new_tokens\" = {} is out of range", path, m);
      g.max_new_tokens = static_cast<int32_t>(m);
    }
    if (k.has("repetition_penalty")) {
      LLMS_ASSIGN_OR_RETURN(double r, k.number("repetition_penalty"));
      if (!(r > 0))
        return InvalidArgument("{}: \"repetition_penalty\" = {} must be > 0", path, r);
      g.repetition_penalty = static_cast<float>(r);
    }
    if (k.has("top_k")) {
      LLMS_ASSIGN_OR_RETURN(int64_t tk, k.integer("top_k"));
      if (tk < -1 || tk > INT32_MAX)
        return InvalidArgument("{}: \"top_k\" = {} is out of range (-1 or 0 = off)", path, tk);
      g.top_k = static_cast<int32_t>(tk);
    }
  }
  return g;
}

}  // namespace llmserve
