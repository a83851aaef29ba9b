// llmserve inspect: what a model checkpoint is (format, architecture, shape, RoPE, parameter
// count) and what its KV cache costs: bytes per token, the attention type that decides them,
// and how many blocks / tokens / max-length sequences fit in a KV memory budget, next to the
// same figures for the model's MHA equivalent. Opens and builds the model like the engine does
// (ModelFile::open + create_model: every tensor's presence and shape is checked, so a model
// `serve` would refuse is an error here too) and sizes the pool with the engine's formula, so
// `inspect` and `serve` agree on the number of blocks. Text (aligned) or one JSON object.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/human_int.h"
#include "cli/weight_cost.h"
#include "models/model.h"
#include "common/check.h"
#include "models/model_file.h"
#include "models/quantize_model.h"
#include "quant/quant_scheme.h"
#include "kv_cache/kv_cache_manager.h"
#include "runner/model_runner.h"

namespace llmserve::cli {
namespace {

std::string format_name(ModelFile::Format f) {
  switch (f) {
    case ModelFile::Format::kGguf: return "gguf";
    case ModelFile::Format::kLlama2c: return "llama2c";
    case ModelFile::Format::kHfDir: return "hf";
  }
  return "unknown";
}

std::string rope_style_name(RopeStyle s) {
  return s == RopeStyle::kRotateHalf ? "rotate_half" : "adjacent_pairs";
}

std::string rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLongRope: return "longrope";
  }
  return "unknown";
}

/// 434560 -> "0.43M", 1100048384 -> "1.10B".
std::string human_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", double(n) / 1e9);
  return fmt::format("{:.2f}M", double(n) / 1e6);
}

/// Binary units: 1536 -> "1.50 KiB", 2147483648 -> "2.00 GiB".
std::string human_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, units[u]);
}

/// "12.5", "25", "100": a percentage without trailing zeros.
std::string percent(double p) {
  std::string s = fmt::format("{:.2f}", p);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

/// What a KV memory budget holds for one per-token-per-layer cost.
struct KvCapacity {
  int64_t bytes_per_token_per_layer = 0;
  int64_t bytes_per_token = 0;  // all layers
  int64_t bytes_per_block = 0;  // block_size tokens, all layers
  int64_t blocks = 0;
  int64_t tokens = 0;
  int64_t sequences = 0;  // of max_model_len tokens each, held at once
};

/// blocks = budget / bytes_per_block, capped at 2^30 as LLMEngine does; a sequence of
/// max_model_len tokens takes ceil(max_model_len / block_size) blocks.
KvCapacity capacity(int64_t per_token_per_layer, int32_t n_layers, int32_t block_size,
                    int64_t budget, int64_t max_model_len) {
  KvCapacity c;
  c.bytes_per_token_per_layer = per_token_per_layer;
  c.bytes_per_token = per_token_per_layer * n_layers;
  c.bytes_per_block = c.bytes_per_token * block_size;
  c.blocks = c.bytes_per_block > 0 ? std::min<int64_t>(budget / c.bytes_per_block, 1 << 30) : 0;
  c.tokens = c.blocks * block_size;
  const int64_t blocks_per_seq = (max_model_len + block_size - 1) / block_size;
  c.sequences = blocks_per_seq > 0 ? c.blocks / blocks_per_seq : 0;
  return c;
}

nlohmann::json capacity_json(const KvCapacity& c) {
  return {{"bytes_per_token_per_layer", c.bytes_per_token_per_layer},
          {"bytes_per_token", c.bytes_per_token},
          {"bytes_per_block", c.bytes_per_block},
          {"blocks", c.blocks},
          {"tokens", c.tokens},
          {"sequences", c.sequences}};
}

/// Prints rows of (label, value) with the values aligned in one column.
void print_rows(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t width = 0;
  for (const auto& [k, v] : rows) width = std::max(width, k.size());
  for (const auto& [k, v] : rows) std::printf("%-*s  %s\n", int(width), k.c_str(), v.c_str());
}

}  // namespace

InspectCommand::InspectCommand(CLI::App& app) {
  cmd_ = app.add_subcommand(
      "inspect", "Describe a model (shape, attention type, parameters) and what its KV cache "
                 "holds in a memory budget");
  add_model_options(*cmd_, model_path_, model_flag_,
                    "Model: GGUF file, llama2.c .bin, or Hugging Face directory "
                    "(config.json + safetensors)");
  cmd_->add_option("--kv-cache-memory", kv_cache_memory_,
                   "KV cache budget in bytes (suffixes KiB/MiB/GiB accepted; default 2GiB, "
                   "as serve)");
  cmd_->add_option("--max-model-len", max_model_len_,
                   "Sequence length for 'sequences that fit' (default: the model's context "
                   "length)")
      ->transform(human_int(1));
  cmd_->add_option("--dtype", dtype_,
                   "Weight dtype serve would run with (as serve's --dtype): the float matrices' "
                   "type (bytes, decode roofline) and what --kv-cache-dtype auto means")
      ->check(dtype_validator())
      ->capture_default_str();
  cmd_->add_option("--kv-cache-dtype", kv_cache_dtype_,
                   "KV cache element type: auto (the model's dtype after --dtype; f32 for quantized weights), float32 / "
                   "f32, bfloat16 / bf16, float16 / half / f16")
      ->check(dtype_validator())
      ->capture_default_str();
  cmd_->add_option("--block-size", block_size_, "Tokens per KV cache block")
      ->capture_default_str();
  cmd_->add_option("--quantization", quantization_,
                   "Report the weights as serve --quantization would make them at load (types, "
                   "bytes, decode bytes per token, the KV dtype auto gives): " +
                       quantization_flag_names())
      ->check(CLI::IsMember(quantization_flag_values()));
  cmd_->add_flag("--json", json_, "Print one JSON object instead of the text report");
}

int InspectCommand::run() {
  // Flags first (no file is opened for a bad command line).
  auto model_path = resolve_model_path(model_path_, model_flag_, /*required=*/true);
  if (!model_path.ok()) return fail(model_path.status());
  CacheConfig cache;
  cache.block_size = block_size_;
  if (!kv_cache_memory_.empty()) {
    auto bytes = parse_bytes(kv_cache_memory_);
    if (!bytes.ok()) return fail(bytes.status());
    cache.kv_cache_memory_bytes = *bytes;
  }
  if (Status st = cache.validate(); !st.ok()) return fail(st);
  auto dtype_flag = parse_dtype("--dtype", dtype_);
  if (!dtype_flag.ok()) return fail(dtype_flag.status());
  auto kv_dtype_flag = parse_dtype("--kv-cache-dtype", kv_cache_dtype_);
  if (!kv_dtype_flag.ok()) return fail(kv_dtype_flag.status());

  auto file = ModelFile::open(*model_path);
  if (!file.ok()) return fail(file.status());
  const ModelFile& mf = **file;
  if (auto model = create_model(mf); !model.ok()) return fail(model.status());
  const ModelConfig& c = mf.config();

  // --quantization: what apply_quantization would replace (its checks and errors), converting
  // nothing; then what --dtype converts.
  std::map<const TensorView*, DType> planned;
  std::optional<QuantizationPlan> qplan;
  if (!quantization_.empty()) {
    auto plan = plan_quantization_flag(mf, quantization_);
    if (!plan.ok()) return fail(plan.status());
    qplan = std::move(*plan);
    for (const TensorPlan& p : qplan->changes) planned[p.tensor] = p.type;
  }
  // The cost as loaded: with --dtype's conversion of the float matrices too (weight_dtype
  // below stays the file's, after --quantization).
  std::map<const TensorView*, DType> loaded = planned;
  if (*dtype_flag) plan_dtype_conversion(mf, **dtype_flag, loaded);
  int64_t params = 0;
  for (const TensorView* t : mf.tensors()) params += t->numel();
  const WeightCost cost = weight_cost(mf, loaded);
  const int64_t weight_bytes = cost.total_bytes;

  // As LLMEngine::init: auto = auto_kv_dtype, the model's dtype after --dtype (f16 for quantized
  // weights without --dtype, --quantization's included: a quantized token embedding makes the
  // model's weight dtype quantized); budget = flag or the 2 GiB default.
  ModelConfig quantized_config = c;
  if (const TensorView* emb = mf.find_tensor("token_embd.weight"); emb && planned.count(emb))
    quantized_config.weight_dtype = planned.at(emb);
  const DType weights_dtype = model_dtype(quantized_config, ModelLoadOptions{*dtype_flag});
  const DType kv_dtype =
      kv_dtype_flag->value_or(auto_kv_dtype(quantized_config, ModelLoadOptions{*dtype_flag}));
  const int64_t budget = cache.kv_cache_memory_bytes > 0 ? cache.kv_cache_memory_bytes
                                                         : kDefaultKvCacheMemoryBytes;
  const int64_t max_len = max_model_len_ > 0 ? max_model_len_ : c.max_position_embeddings;
  const int32_t bs = cache.block_size;
  const KvCapacity kv =
      capacity(c.kv_bytes_per_token_per_layer(kv_dtype), c.n_layers, bs, budget, max_len);
  const KvCapacity mha =
      capacity(c.mha_kv_bytes_per_token_per_layer(kv_dtype), c.n_layers, bs, budget, max_len);
  // Sliding window in every layer: a decoding sequence holds at most ceil(window / block_size)
  // + 1 blocks (the scheduler frees those before the window).
  struct {
    int64_t blocks_per_sequence = 0;  // 0: not bounded by a window
    int64_t sequences = 0;
  } window;
  if (c.all_layers_sliding() && c.sliding_window < max_len) {  // decoding: one-token steps
    window.blocks_per_sequence = KVCacheManager::blocks_held(max_len, c.sliding_window, 1, bs);
    window.sequences = window.blocks_per_sequence > 0 ? kv.blocks / window.blocks_per_sequence : 0;
  }
  // The engine sizes its pool with ModelRunner::kv_bytes_per_block; the figure here is the same.
  LLMS_CHECK(kv.bytes_per_block == ModelRunner::kv_bytes_per_block(c, bs, kv_dtype));
  const double ratio = mha.bytes_per_token_per_layer > 0
                           ? 100.0 * double(kv.bytes_per_token_per_layer) /
                                 double(mha.bytes_per_token_per_layer)
                           : 0.0;
  const std::string attn = c.attention_type();
  const int32_t group = c.is_mla() ? 0 : c.n_heads / c.n_kv_heads;

  if (json_) {
    nlohmann::json j;
    j["path"] = mf.path();
    j["format"] = format_name(mf.format());
    j["architecture"] = c.architecture;
    j["name"] = c.name;
    j["num_layers"] = c.n_layers;
    j["hidden_size"] = c.dim;
    j["num_heads"] = c.n_heads;
    j["num_kv_heads"] = c.n_kv_heads;
    j["head_dim"] = c.head_dim;
    j["ffn_dim"] = c.ffn_dim;
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["weight_dtype"] = std::string(dtype_name(quantized_config.weight_dtype));
    j["dtype"] = std::string(dtype_name(weights_dtype));
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["attention_bias"] = c.attention_bias;
    j["qk_norm"] = c.qk_norm;
    j["hidden_activation"] = c.hidden_activation == MlpActivation::kGeluTanh ? "gelu_pytorch_tanh" : "silu";
    j["attention_scale"] = c.attention_scale();
    j["attn_logit_softcapping"] = c.attn_logit_softcapping;
    j["final_logit_softcapping"] = c.final_logit_softcapping;
    if (c.rope_local_base_freq > 0) j["rope_local_base_freq"] = c.rope_local_base_freq;
    nlohmann::json scaling = {{"type", rope_scaling_name(c.rope_scaling.type)},
                              {"factor", c.rope_scaling.factor}};
    if (c.rope_scaling.type == RopeScalingType::kLlama3) {
      scaling["low_freq_factor"] = c.rope_scaling.low_freq_factor;
      scaling["high_freq_factor"] = c.rope_scaling.high_freq_factor;
      scaling["original_max_position_embeddings"] =
          c.rope_scaling.original_max_position_embeddings;
    }
    if (c.rope_scaling.type == RopeScalingType::kYarn) {
      scaling["original_max_position_embeddings"] = c.rope_scaling.original_max_position_embeddings;
      scaling["beta_fast"] = c.rope_scaling.beta_fast;
      scaling["beta_slow"] = c.rope_scaling.beta_slow;
      scaling["attention_factor"] = c.rope_attention_factor();
    }
    if (c.rope_scaling.type == RopeScalingType::kLongRope) {
      ModelConfig served = c;
      served.select_longrope(static_cast<int32_t>(max_len));
      scaling["original_max_position_embeddings"] = c.rope_scaling.original_max_position_embeddings;
      scaling["attention_factor"] = c.rope_attention_factor();
      scaling["factors_used"] = served.rope_scaling.use_long_factor ? "long" : "short";
      scaling["for_max_model_len"] = max_len;
    }
    j["rope"] = {{"theta", c.rope_theta},
                 {"style", rope_style_name(c.rope_style)},
                 {"dim", c.rope_dim()},
                 {"freq_factors", c.rope_freq_factors.size()},
                 {"scaling", scaling}};
    if (c.is_mla())
      j["mla"] = {{"q_lora_rank", c.q_lora_rank},
                  {"kv_lora_rank", c.kv_lora_rank},
                  {"qk_nope_head_dim", c.qk_nope_head_dim},
                  {"qk_rope_head_dim", c.qk_rope_head_dim},
                  {"v_head_dim", c.v_head_dim}};
    j["parameters"] = params;
    j["parameters_human"] = human_count(params);
    j["weight_bytes"] = weight_bytes;
    nlohmann::json types = nlohmann::json::array();
    for (const TypeUsage& u : cost.types)
      types.push_back({{"type", std::string(dtype_ggml_name(u.dtype))},
                       {"tensors", u.tensors},
                       {"parameters", u.params},
                       {"bytes", u.bytes}});
    j["tensor_types"] = types;
    if (qplan) {
      std::map<std::string, int> by_type;
      for (const TensorPlan& p : qplan->changes) ++by_type[std::string(dtype_ggml_name(p.type))];
      j["quantization"] = {{"value", quantization_},
                           {"already_quantized", qplan->already_quantized},
                           {"matrices", by_type}};
    }
    j["weight_matrix_bits_per_weight"] = cost.matrix_bits_per_weight;
    j["decode_bytes_per_token"] = cost.decode_bytes_per_token;
    if (c.is_moe())
      j["experts"] = {{"n_experts", c.n_experts},
                      {"n_experts_used", c.n_experts_used},
                      {"expert_ffn_dim", c.expert_ffn_dim},
                      {"norm_topk_prob", c.norm_topk_prob},
                      {"shared_expert_ffn_dim", c.shared_expert_ffn_dim},
                      {"shared_expert_gated", c.shared_expert_ffn_dim > 0 && c.shared_expert_gated},
                      {"n_dense_leading_layers", c.n_dense_leading_layers},
                      {"scoring", c.moe_scoring == MoeScoring::kSigmoid ? "sigmoid" : "softmax"},
                      {"n_expert_groups", c.n_expert_groups},
                      {"n_expert_groups_used", c.n_expert_groups_used},
                      {"routed_scaling_factor", c.routed_scaling_factor},
                      {"expert_parameters", cost.expert_params},
                      {"expert_bytes", cost.expert_bytes},
                      {"active_expert_parameters", cost.active_expert_params},
                      {"active_expert_bytes", cost.active_expert_bytes}};
    j["attention"] = {{"type", attn}};
    if (!c.is_mla()) j["attention"]["group_size"] = group;
    if (c.sliding_window > 0) {
      nlohmann::json layers = nlohmann::json::array();
      for (int32_t l = 0; l < c.n_layers; ++l)
        if (c.layer_window(l) > 0) layers.push_back(l);
      j["attention"]["sliding_window"] = {{"window", c.sliding_window}, {"layers", layers}};
      if (window.blocks_per_sequence > 0)
        j["attention"]["sliding_window"]["kv_per_sequence"] = {
            {"max_blocks", window.blocks_per_sequence},
            {"max_bytes", window.blocks_per_sequence * kv.bytes_per_block},
            {"sequences_held", window.sequences}};
    }
    nlohmann::json k = capacity_json(kv);
    k["dtype"] = std::string(dtype_name(kv_dtype));
    k["block_size"] = bs;
    k["memory_bytes"] = budget;
    k["max_model_len"] = max_len;
    k["mha_equivalent"] = capacity_json(mha);
    k["ratio_to_mha_percent"] = ratio;
    j["kv_cache"] = k;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  std::vector<std::pair<std::string, std::string>> rows = {
      {"path", mf.path()},
      {"format", format_name(mf.format())},
      {"architecture", c.architecture},
      {"name", c.name},
      {"layers", std::to_string(c.n_layers)},
      {"hidden size", std::to_string(c.dim)},
      {"heads", std::to_string(c.n_heads)},
      {"kv heads", std::to_string(c.n_kv_heads)},
      {"head_dim", std::to_string(c.head_dim)},
      // A MoE model's ffn_dim is its dense MLPs' width: the leading dense layers', or none.
      {"ffn dim", !c.is_moe() ? std::to_string(c.ffn_dim)
                  : c.n_dense_leading_layers > 0
                      ? fmt::format("{} (the {} leading dense layer{}; experts below)", c.ffn_dim,
                                    c.n_dense_leading_layers, c.n_dense_leading_layers == 1 ? "" : "s")
                      : fmt::format("{} (unused: every layer's MLP is experts, below)", c.ffn_dim)},
      {"vocab", std::to_string(c.vocab_size)},
      {"max_position_embeddings", std::to_string(c.max_position_embeddings)},
      {"weight dtype",
       std::string(dtype_name(quantized_config.weight_dtype)) +
           (weights_dtype == quantized_config.weight_dtype ? std::string()
            : dtype_flag->has_value()
                ? fmt::format(" ({} with --dtype)", dtype_name(weights_dtype))
                : fmt::format(" (activations {}, KV cache auto: {})", dtype_name(weights_dtype),
                              dtype_name(auto_kv_dtype(quantized_config, ModelLoadOptions{}))))},
  };
  std::string rope = fmt::format("theta {}, {}, dim {}", c.rope_theta, rope_style_name(c.rope_style),
                                 c.rope_dim());
  if (c.rope_scaling.type == RopeScalingType::kNone) rope += ", no scaling";
  else rope += fmt::format(", scaling {} x{}", rope_scaling_name(c.rope_scaling.type),
                           c.rope_scaling.factor);
  if (c.rope_scaling.type == RopeScalingType::kYarn)
    rope += fmt::format(" (original context {}, beta {}/{}, attention factor {:.4f})",
                        c.rope_scaling.original_max_position_embeddings, c.rope_scaling.beta_fast,
                        c.rope_scaling.beta_slow, c.rope_attention_factor());
  if (c.rope_scaling.type == RopeScalingType::kLongRope) {
    ModelConfig served = c;
    served.select_longrope(static_cast<int32_t>(max_len));
    rope += fmt::format(" ({} factors for max_model_len {}: long when it exceeds the original context {}; attention "
                        "factor {:.4f})",
                        served.rope_scaling.use_long_factor ? "long" : "short", max_len,
                        c.rope_scaling.original_max_position_embeddings, c.rope_attention_factor());
  }
  if (!c.rope_freq_factors.empty())
    rope += fmt::format(", {} freq factors", c.rope_freq_factors.size());
  if (c.rope_local_base_freq > 0)
    rope += fmt::format("; sliding layers theta {}, no scaling", c.rope_local_base_freq);
  rows.push_back({"rope", rope});
  if (c.hidden_activation == MlpActivation::kGeluTanh) rows.push_back({"mlp", "GeGLU (gelu_pytorch_tanh)"});
  if (c.query_pre_attn_scalar > 0)
    rows.push_back({"attention scale", fmt::format("1/sqrt({}) (query_pre_attn_scalar)", c.query_pre_attn_scalar)});
  if (c.attn_logit_softcapping > 0 || c.final_logit_softcapping > 0)
    rows.push_back({"soft-capping", fmt::format("attention scores {}, final logits {} (cap * tanh(x / cap); 0 = off)",
                                                c.attn_logit_softcapping, c.final_logit_softcapping)});
  if (c.is_mla()) {
    rows.push_back({"mla q_lora_rank", std::to_string(c.q_lora_rank)});
    rows.push_back({"mla kv_lora_rank", std::to_string(c.kv_lora_rank)});
    rows.push_back({"mla qk_nope_head_dim", std::to_string(c.qk_nope_head_dim)});
    rows.push_back({"mla qk_rope_head_dim", std::to_string(c.qk_rope_head_dim)});
    rows.push_back({"mla v_head_dim", std::to_string(c.v_head_dim)});
  }
  if (qplan) {
    std::map<DType, int> by_type;
    for (const TensorPlan& p : qplan->changes) ++by_type[p.type];
    std::string types;
    for (const auto& [t, n] : by_type)
      types += fmt::format("{}{} x {}", types.empty() ? "" : ", ", dtype_ggml_name(t), n);
    rows.push_back({"quantization",
                    qplan->already_quantized
                        ? fmt::format("{}: the file is already quantized as asked", quantization_)
                        : fmt::format("{} at load: {} weight matrices -> {} (figures below as "
                                      "serve would hold them)",
                                      quantization_, qplan->changes.size(), types)});
  }
  rows.push_back({"parameters", fmt::format("{} ({})", params, human_count(params))});
  rows.push_back({"weight bytes", fmt::format("{} ({})", weight_bytes, human_bytes(weight_bytes))});
  for (const TypeUsage& u : cost.types)
    rows.push_back({fmt::format("  {} tensors", dtype_ggml_name(u.dtype)),
                    fmt::format("{} ({} parameters, {} bytes, {})", u.tensors, u.params, u.bytes,
                                human_bytes(u.bytes))});
  rows.push_back({"bits per weight", fmt::format("{:.2f} (weight matrices)",
                                                 cost.matrix_bits_per_weight)});
  if (c.is_moe()) {
    rows.push_back({"experts", fmt::format("{} per layer, {} used per token, width {}{}{}", c.n_experts,
                                           c.n_experts_used, c.expert_ffn_dim,
                                           c.norm_topk_prob ? ", top-k weights renormalised" : "",
                                           c.shared_expert_ffn_dim > 0
                                               ? fmt::format(", plus a{} shared expert of width {} (every token)",
                                                             c.shared_expert_gated ? " gated" : "n ungated",
                                                             c.shared_expert_ffn_dim)
                                               : std::string())});
    std::string routing = c.moe_scoring == MoeScoring::kSigmoid ? "sigmoid scores" : "softmax scores";
    if (c.n_expert_groups > 1)
      routing += fmt::format(", experts from the best {} of {} groups ({})", c.n_expert_groups_used,
                             c.n_expert_groups,
                             c.moe_group_score == MoeGroupScore::kTop2Sum ? "by their top-2 sum" : "by their best");
    if (c.routed_scaling_factor != 1.0f) routing += fmt::format(", weights x {:g}", c.routed_scaling_factor);
    if (c.n_dense_leading_layers > 0)
      routing += fmt::format("; layers 0..{} dense", c.n_dense_leading_layers - 1);
    rows.push_back({"  routing", routing});
    rows.push_back({"  expert parameters",
                    fmt::format("{} ({}, {}) in all; {} ({}, {}) read per token", cost.expert_params,
                                human_count(cost.expert_params), human_bytes(cost.expert_bytes),
                                cost.active_expert_params, human_count(cost.active_expert_params),
                                human_bytes(cost.active_expert_bytes))});
    const int64_t active = params - cost.expert_params + cost.active_expert_params;
    rows.push_back({"  active parameters", fmt::format("{} ({}) per token of {} ({})", active,
                                                       human_count(active), params, human_count(params))});
  }
  rows.push_back({"decode bytes per token",
                  fmt::format("{} ({}: every weight matrix once{} + one embedding row)",
                              cost.decode_bytes_per_token, human_bytes(cost.decode_bytes_per_token),
                              c.is_moe() ? ", of the experts only the used ones' share" : "")});
  std::string attn_text = attn;
  if (attn == "GQA")
    attn_text += fmt::format(" (group size {}: {} query heads share {} KV heads)", group,
                             c.n_heads, c.n_kv_heads);
  else if (attn == "MQA")
    attn_text += fmt::format(" ({} query heads share 1 KV head)", c.n_heads);
  else if (attn == "MLA")
    attn_text += fmt::format(" (one latent of kv_lora_rank {} + qk_rope {} per token)",
                             c.kv_lora_rank, c.qk_rope_head_dim);
  rows.push_back({"attention", attn_text});
  if (c.sliding_window > 0) {
    std::string layers;
    int32_t n = 0;
    for (int32_t l = 0; l < c.n_layers; ++l)
      if (c.layer_window(l) > 0) layers += (n++ ? ", " : "") + std::to_string(l);
    rows.push_back({"sliding window",
                    c.all_layers_sliding()
                        ? fmt::format("{} tokens, every layer", c.sliding_window)
                        : fmt::format("{} tokens in layers {} (the other {} full attention)", c.sliding_window,
                                      layers, c.n_layers - n)});
    if (window.blocks_per_sequence > 0)
      rows.push_back({"  KV per sequence",
                      fmt::format("at most {} block(s) ({}) while decoding past the window: blocks before it "
                                  "return to the pool (a step of S tokens adds about S / block size); {} such "
                                  "sequences fit",
                                  window.blocks_per_sequence,
                                  human_bytes(window.blocks_per_sequence * kv.bytes_per_block), window.sequences)});
    else if (!c.all_layers_sliding())
      rows.push_back({"  KV per sequence",
                      fmt::format("hybrid: the sliding layers keep at most {} block(s) while decoding, in a pool "
                                  "of their own; the full-attention layers keep every block",
                                  KVCacheManager::blocks_held(max_len, c.sliding_window, 1, bs))});
    else
      rows.push_back({"  KV per sequence", "every block is kept (the window is as long as the context)"});
  }
  print_rows(rows);

  std::printf("\nKV cache: %s, block size %d, %s budget (%lld bytes), sequences of %lld tokens\n",
              std::string(dtype_name(kv_dtype)).c_str(), bs, human_bytes(budget).c_str(),
              static_cast<long long>(budget), static_cast<long long>(max_len));
  const std::vector<std::pair<std::string, int64_t KvCapacity::*>> fields = {
      {"bytes per token per layer", &KvCapacity::bytes_per_token_per_layer},
      {fmt::format("bytes per token ({} layers)", c.n_layers), &KvCapacity::bytes_per_token},
      {fmt::format("bytes per block ({} tokens)", bs), &KvCapacity::bytes_per_block},
      {"blocks", &KvCapacity::blocks},
      {"tokens", &KvCapacity::tokens},
      {fmt::format("sequences of {} tokens", max_len), &KvCapacity::sequences},
  };
  std::vector<std::string> labels, left, right;
  labels.push_back("");
  left.push_back(attn);
  right.push_back("MHA equivalent");
  for (const auto& [label, field] : fields) {
    labels.push_back(label);
    left.push_back(std::to_string(kv.*field));
    right.push_back(std::to_string(mha.*field));
  }
  labels.push_back("ratio to MHA");
  left.push_back(percent(ratio) + "%");
  right.push_back("100%");
  size_t w0 = 0, w1 = 0, w2 = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    w0 = std::max(w0, labels[i].size());
    w1 = std::max(w1, left[i].size());
    w2 = std::max(w2, right[i].size());
  }
  for (size_t i = 0; i < labels.size(); ++i)
    std::printf("  %-*s  %*s  %*s\n", int(w0), labels[i].c_str(), int(w1), left[i].c_str(),
                int(w2), right[i].c_str());
  if (kv.blocks == 0)
    std::printf("note: the budget holds no block; serve would refuse to start\n");
  else if (kv.sequences == 0)
    std::printf("note: the pool holds %lld tokens, fewer than one sequence of %lld; serve "
                "would reject requests that long\n",
                static_cast<long long>(kv.tokens), static_cast<long long>(max_len));
  return 0;
}

}  // namespace llmserve::cli
