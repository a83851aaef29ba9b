#include "models/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include <spdlog/spdlog.h>

#include "kernels/ops.h"
#include "models/hf_config.h"

namespace llmserve {
namespace {

std::string file_stem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

/// The first (up to 16) bytes of a file in hex and as text, e.g.
/// `7b 22 61 22 3a 31 7d 0a "{"a":1}."` (non-printable bytes shown as '.').
std::string first_bytes(const std::string& path) {
  unsigned char buf[16];
  size_t n = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    n = std::fread(buf, 1, sizeof(buf), f);
    std::fclose(f);
  }
  std::string hex, text;
  for (size_t i = 0; i < n; ++i) {
    hex += fmt::format("{}{:02x}", i ? " " : "", buf[i]);
    text += buf[i] >= 0x20 && buf[i] < 0x7f ? static_cast<char>(buf[i]) : '.';
  }
  return hex + " \"" + text + "\"";
}

/// DeepSeek-V2/V3 mixture-of-experts keys as llama.cpp's deepseek2 loader reads them
/// (src/models/deepseek2.cpp, llama-graph.cpp build_moe_ffn): expert_used_count,
/// expert_feed_forward_length, expert_shared_count (ungated shared experts),
/// expert_weights_norm (false), expert_weights_scale (1), expert_gating_func (1 softmax,
/// 2 sigmoid; absent = softmax), expert_group_count / expert_group_used_count (none).
Status read_deepseek_moe(const GgufFile& g, const std::string& pre, int64_t experts, int32_t leading_dense,
                         ModelConfig& c) {
  auto get_count = [&](const std::string& key, int64_t lo, int64_t fallback, bool required) -> Expected<int32_t> {
    if (!g.has_key(pre + key)) {
      if (required) return InvalidArgument("{}: metadata {}{} is missing", g.path(), pre, key);
      return static_cast<int32_t>(fallback);
    }
    LLMS_ASSIGN_OR_RETURN(int64_t v, g.get_int(pre + key));
    if (v < lo || v > (1LL << 31) - 1)
      return InvalidArgument("{}: metadata {}{} = {} is out of range", g.path(), pre, key, v);
    return static_cast<int32_t>(v);
  };
  if (experts > (1LL << 31) - 1)
    return InvalidArgument("{}: metadata {}expert_count = {} is out of range", g.path(), pre, experts);
  c.n_experts = static_cast<int32_t>(experts);
  c.n_dense_leading_layers = leading_dense;
  LLMS_ASSIGN_OR_RETURN(c.n_experts_used, get_count("expert_used_count", 1, 0, true));
  LLMS_ASSIGN_OR_RETURN(c.expert_ffn_dim, get_count("expert_feed_forward_length", 1, 0, true));
  LLMS_ASSIGN_OR_RETURN(int32_t shared, get_count("expert_shared_count", 0, 0, false));
  if (int64_t{shared} * c.expert_ffn_dim > (1LL << 31) - 1 || shared > 1024)
    return InvalidArgument("{}: metadata {}expert_shared_count = {} is out of range", g.path(), pre, shared);
  c.shared_expert_ffn_dim = shared * c.expert_ffn_dim;
  c.shared_expert_gated = false;
  c.norm_topk_prob = false;
  if (g.has_key(pre + "expert_weights_norm")) {
    LLMS_ASSIGN_OR_RETURN(c.norm_topk_prob, g.get_bool(pre + "expert_weights_norm"));
  }
  if (g.has_key(pre + "expert_weights_scale")) {
    LLMS_ASSIGN_OR_RETURN(double scale, g.get_float(pre + "expert_weights_scale"));
    // llama.cpp: 0 (its "unset") means no scaling. Released models use 1 to 16; a factor
    // this large only overflows float32 activations.
    if (!(scale >= 0.0 && scale <= 1e4))
      return InvalidArgument("{}: metadata {}expert_weights_scale = {} is out of range (0 to 1e4)", g.path(), pre,
                             scale);
    if (scale != 0.0) c.routed_scaling_factor = static_cast<float>(scale);
  }
  LLMS_ASSIGN_OR_RETURN(int32_t gating, get_count("expert_gating_func", 0, 1, false));
  if (gating == 0 || gating == 1) {
    c.moe_scoring = MoeScoring::kSoftmax;
  } else if (gating == 2) {
    c.moe_scoring = MoeScoring::kSigmoid;
  } else {
    return Unimplemented("{}: metadata {}expert_gating_func = {} is not supported (1 softmax, 2 sigmoid)",
                         g.path(), pre, gating);
  }
  LLMS_ASSIGN_OR_RETURN(c.n_expert_groups, get_count("expert_group_count", 1, 1, false));
  LLMS_ASSIGN_OR_RETURN(c.n_expert_groups_used,
                        get_count("expert_group_used_count", 1, c.n_expert_groups, c.n_expert_groups > 1));
  // A group's score: V3 (sigmoid, noaux_tc) sums its two best selection values; V2's
  // group_limited_greedy (softmax) takes its best expert's score, as transformers' MoEGate
  // does (llama.cpp sums the top two for every architecture; the file does not say which
  // topk_method the model was trained with, and transformers' semantics is the reference).
  c.moe_group_score = c.moe_scoring == MoeScoring::kSigmoid ? MoeGroupScore::kTop2Sum : MoeGroupScore::kMax;
  return Status::Ok();
}

/// Gemma 2 / Gemma 3 as llama.cpp's loader reads them (src/models/gemma2.cpp, gemma3.cpp), the
/// file's norm weights already 1 + w (its converter adds 1): GeGLU (tanh); gemma2 slides every
/// other layer with a window of 4096 unless attention.sliding_window says otherwise, caps
/// attention scores at attn_logit_softcapping (default 50) and logits at
/// final_logit_softcapping (default 30); gemma3 slides only when attention.sliding_window is
/// set, five layers of every six (attention.sliding_window_pattern: a period, or one bool per
/// layer), with rope.freq_base_swa (default 10000) and no RoPE scaling on those layers, and caps
/// logits only when final_logit_softcapping is set. The files carry no query_pre_attn_scalar:
/// llama.cpp's rule (hidden / heads for the 27B layer counts, 46 and 62; head_dim otherwise).
/// The vision tower and projector of a Gemma3ForConditionalGeneration checkpoint (transformers
/// < 4.52 and >= 4.52 layouts).
bool is_gemma3_vision_tensor(std::string_view name) {
  for (std::string_view p : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                             "model.multi_modal_projector."})
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

Status read_gemma_gguf(const GgufFile& g, const std::string& pre, bool gemma2, ModelConfig& c) {
  auto has = [&](const char* key) { return g.has_key(pre + key); };
  c.hidden_activation = MlpActivation::kGeluTanh;
  if (gemma2 && !has("attention.sliding_window")) c.sliding_window = 4096;
  if (c.sliding_window > 0) {
    const std::string key = pre + "attention.sliding_window_pattern";
    int64_t period = gemma2 ? 2 : 6;
    c.sliding_layers.assign(c.n_layers, 0);
    const GgufValue* v = g.find_value(key);
    const auto* arr = v ? std::get_if<GgufValue::Array>(&v->value) : nullptr;
    if (arr != nullptr) {  // one flag per layer
      if (static_cast<int64_t>(arr->items.size()) != c.n_layers || arr->elem_type != GgufType::kBool)
        return InvalidArgument("{}: metadata {} must be a period or {} bools (one per layer)", g.path(), key,
                               c.n_layers);
      for (int32_t l = 0; l < c.n_layers; ++l) c.sliding_layers[l] = std::get<bool>(arr->items[l].value);
    } else {
      if (v != nullptr) {
        LLMS_ASSIGN_OR_RETURN(period, g.get_int(key));
      }
      if (period < 0 || period > (1LL << 31) - 1)
        return InvalidArgument("{}: metadata {} = {} is out of range", g.path(), key, period);
      for (int32_t l = 0; l < c.n_layers; ++l)  // llama_hparams::set_swa_pattern
        c.sliding_layers[l] = period == 0 || l % period < period - 1;
    }
    if (std::none_of(c.sliding_layers.begin(), c.sliding_layers.end(), [](uint8_t s) { return s != 0; })) {
      c.sliding_window = 0;  // a period of 1: no layer slides
      c.sliding_layers.clear();
    }
  } else if (has("attention.sliding_window_pattern")) {
    return InvalidArgument("{}: metadata {}attention.sliding_window_pattern is set but there is no sliding "
                           "window", g.path(), pre);
  }
  auto get_cap = [&](const char* key, float fallback, float* out) -> Status {
    *out = fallback;
    if (!has(key)) return Status::Ok();
    LLMS_ASSIGN_OR_RETURN(double v, g.get_float(pre + key));
    *out = static_cast<float>(v);
    return Status::Ok();
  };
  if (gemma2) {
    LLMS_RETURN_IF_ERROR(get_cap("attn_logit_softcapping", 50.0f, &c.attn_logit_softcapping));
  } else if (has("attn_logit_softcapping")) {
    return Unimplemented("{}: metadata {}attn_logit_softcapping is not used by gemma3 (llama.cpp ignores it)",
                         g.path(), pre);
  }
  LLMS_RETURN_IF_ERROR(get_cap("final_logit_softcapping", gemma2 ? 30.0f : 0.0f, &c.final_logit_softcapping));
  float local_base = gemma2 ? c.rope_theta : 10000.0f;
  LLMS_RETURN_IF_ERROR(get_cap("rope.freq_base_swa", local_base, &local_base));
  if (!(local_base > 0.0f) || !std::isfinite(local_base))
    return InvalidArgument("{}: metadata {}rope.freq_base_swa = {} must be positive", g.path(), pre, local_base);
  // gemma2: llama.cpp keeps the global RoPE scaling on the sliding layers too; a separate local
  // base only matters when the file gives one.
  if (!gemma2 || local_base != c.rope_theta) c.rope_local_base_freq = local_base;
  if (gemma2 && c.rope_local_base_freq > 0 && c.rope_scaling.type != RopeScalingType::kNone)
    return Unimplemented("{}: gemma2 with rope.freq_base_swa and RoPE scaling is not supported", g.path());
  const bool is_27b = c.n_layers == (gemma2 ? 46 : 62);
  c.query_pre_attn_scalar = is_27b ? static_cast<float>(c.dim / c.n_heads) : static_cast<float>(c.head_dim);
  return Status::Ok();
}

Expected<ModelConfig> config_from_gguf(const GgufFile& g) {
  LLMS_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" && arch != "qwen2moe" &&
      arch != "phi3" && arch != "deepseek2" && arch != "gemma2" && arch != "gemma3")
    return Unimplemented("{}: unsupported architecture '{}' (supported: llama, qwen2, qwen3, "
                         "qwen2moe, qwen3moe, phi3, deepseek2, gemma2, gemma3)", g.path(), arch);
  ModelConfig c;
  c.architecture = arch;
  const std::string pre = arch + ".";
  // llama.cpp's converter permutes llama Q/K rows for adjacent-pair RoPE (LLAMA_ROPE_TYPE_NORM);
  // qwen2/qwen3 keep the HF order (NEOX, rotate-half); deepseek2 uses adjacent pairs.
  c.rope_style = arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" || arch == "qwen2moe" ||
                         arch == "phi3" || arch == "gemma2" || arch == "gemma3"
                     ? RopeStyle::kRotateHalf
                                                     : RopeStyle::kAdjacentPairs;
  auto get_i = [&](const std::string& key) -> Expected<int32_t> {
    LLMS_ASSIGN_OR_RETURN(int64_t v, g.get_int(pre + key));
    if (v <= 0 || v > (1LL << 31) - 1)
      return InvalidArgument("{}: metadata {}{} = {} is out of range", g.path(), pre, key, v);
    return static_cast<int32_t>(v);
  };
  auto has = [&](const std::string& key) { return g.has_key(pre + key); };
  LLMS_ASSIGN_OR_RETURN(c.dim, get_i("embedding_length"));
  LLMS_ASSIGN_OR_RETURN(c.n_layers, get_i("block_count"));
  LLMS_ASSIGN_OR_RETURN(c.n_heads, get_i("attention.head_count"));
  LLMS_ASSIGN_OR_RETURN(c.ffn_dim, get_i("feed_forward_length"));
  LLMS_ASSIGN_OR_RETURN(c.max_position_embeddings, get_i("context_length"));
  c.n_kv_heads = c.n_heads;
  if (has("attention.head_count_kv")) {
    LLMS_ASSIGN_OR_RETURN(c.n_kv_heads, get_i("attention.head_count_kv"));
  }
  if (has("attention.layer_norm_rms_epsilon")) {
    LLMS_ASSIGN_OR_RETURN(double eps, g.get_float(pre + "attention.layer_norm_rms_epsilon"));
    c.rms_norm_eps = static_cast<float>(eps);
  }
  if (has("rope.freq_base")) {
    LLMS_ASSIGN_OR_RETURN(double theta, g.get_float(pre + "rope.freq_base"));
    c.rope_theta = static_cast<float>(theta);
  }
  if (!std::isfinite(c.rms_norm_eps) || !std::isfinite(c.rope_theta))
    return InvalidArgument("{}: metadata rms_norm_eps ({}) and rope.freq_base ({}) must be finite",
                           g.path(), c.rms_norm_eps, c.rope_theta);

  if (arch == "deepseek2") {
    LLMS_ASSIGN_OR_RETURN(c.kv_lora_rank, get_i("attention.kv_lora_rank"));
    if (has("attention.q_lora_rank")) {
      LLMS_ASSIGN_OR_RETURN(c.q_lora_rank, get_i("attention.q_lora_rank"));
    }
    LLMS_ASSIGN_OR_RETURN(c.qk_rope_head_dim, get_i("rope.dimension_count"));
    LLMS_ASSIGN_OR_RETURN(int32_t key_len, get_i("attention.key_length"));
    LLMS_ASSIGN_OR_RETURN(int32_t value_len, get_i("attention.value_length"));
    if (has("attention.key_length_mla")) {
      // llama.cpp >= 2025: the cached "head" is the latent (key_length = kv_lora + rope,
      // value_length = kv_lora); the per-head sizes moved to *_mla.
      LLMS_ASSIGN_OR_RETURN(int32_t key_mla, get_i("attention.key_length_mla"));
      LLMS_ASSIGN_OR_RETURN(c.v_head_dim, get_i("attention.value_length_mla"));
      c.qk_nope_head_dim = key_mla - c.qk_rope_head_dim;
      if (key_len != c.kv_lora_rank + c.qk_rope_head_dim || value_len != c.kv_lora_rank)
        return InvalidArgument("{}: deepseek2.attention.key_length {} / value_length {} do not "
                               "match kv_lora_rank {} + rope.dimension_count {}", g.path(),
                               key_len, value_len, c.kv_lora_rank, c.qk_rope_head_dim);
    } else {
      c.qk_nope_head_dim = key_len - c.qk_rope_head_dim;
      c.v_head_dim = value_len;
    }
    if (c.qk_nope_head_dim <= 0)
      return InvalidArgument("{}: deepseek2 key length leaves no non-RoPE part (qk_nope = {})",
                             g.path(), c.qk_nope_head_dim);
    c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
    c.n_kv_heads = 1;
    int64_t experts = 0;
    if (has("expert_count")) {
      LLMS_ASSIGN_OR_RETURN(experts, g.get_int(pre + "expert_count"));
      if (experts < 0)
        return InvalidArgument("{}: metadata {}expert_count = {} is out of range", g.path(), pre, experts);
    }
    // llama.cpp's deepseek2 loader: leading_dense_block_count defaults to 0 (every layer
    // MoE when the file has experts).
    int32_t leading_dense = experts > 0 ? 0 : c.n_layers;
    if (has("leading_dense_block_count")) {
      LLMS_ASSIGN_OR_RETURN(int64_t v, g.get_int(pre + "leading_dense_block_count"));
      if (v < 0 || v > c.n_layers)
        return InvalidArgument("{}: metadata {}leading_dense_block_count = {} is out of range (0 to {} layers)",
                               g.path(), pre, v, c.n_layers);
      leading_dense = static_cast<int32_t>(v);
    }
    if (experts > 0 && leading_dense < c.n_layers) {
      LLMS_RETURN_IF_ERROR(read_deepseek_moe(g, pre, experts, leading_dense, c));
    }
  } else {
    c.head_dim = c.dim / c.n_heads;
    if (has("attention.key_length")) {
      LLMS_ASSIGN_OR_RETURN(c.head_dim, get_i("attention.key_length"));
    }
    if (has("attention.value_length")) {
      LLMS_ASSIGN_OR_RETURN(int32_t value_len, get_i("attention.value_length"));
      if (value_len != c.head_dim)
        return Unimplemented("{}: {}attention.value_length {} != key_length {} is not supported",
                             g.path(), pre, value_len, c.head_dim);
    }
    if (has("rope.dimension_count")) {
      LLMS_ASSIGN_OR_RETURN(int64_t rope_dim, g.get_int(pre + "rope.dimension_count"));
      if (rope_dim <= 0 || rope_dim > c.head_dim || rope_dim % 2 != 0)
        return InvalidArgument("{}: {}rope.dimension_count = {} must be even and within head_dim "
                               "{}", g.path(), pre, rope_dim, c.head_dim);
      if (rope_dim < c.head_dim) c.rotary_dim = static_cast<int32_t>(rope_dim);  // partial rotary
    }
    // qwen2 always has q/k/v biases and qwen3 always q/k norms (llama.cpp requires them);
    // llama-arch files may carry optional biases.
    c.attention_bias = arch == "qwen2" || arch == "qwen2moe" || g.find_tensor("blk.0.attn_q.bias") != nullptr;
    c.qk_norm = arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3";
    // Mixtures of experts, as llama.cpp's graphs run them: qwen3moe renormalises the top-k
    // weights, qwen2moe does not (Qwen1.5-MoE) and adds a shared expert, and a llama file with
    // experts is Mixtral (renormalised; the experts' width is feed_forward_length).
    if (arch == "qwen3moe" || arch == "qwen2moe" || (arch == "llama" && has("expert_count"))) {
      LLMS_ASSIGN_OR_RETURN(c.n_experts, get_i("expert_count"));
      LLMS_ASSIGN_OR_RETURN(c.n_experts_used, get_i("expert_used_count"));
      // As llama.cpp's qwen2moe.cpp / qwen3moe.cpp: expert_feed_forward_length defaults to
      // feed_forward_length / expert_used_count, the shared expert's width to
      // feed_forward_length (Qwen2-MoE always has one).
      if (arch == "llama") {
        c.expert_ffn_dim = c.ffn_dim;
      } else if (has("expert_feed_forward_length")) {
        LLMS_ASSIGN_OR_RETURN(c.expert_ffn_dim, get_i("expert_feed_forward_length"));
      } else {
        c.expert_ffn_dim = c.ffn_dim / c.n_experts_used;
      }
      c.norm_topk_prob = arch != "qwen2moe";
      if (arch == "qwen2moe") {
        c.shared_expert_ffn_dim = c.ffn_dim;
        if (has("expert_shared_feed_forward_length")) {
          LLMS_ASSIGN_OR_RETURN(c.shared_expert_ffn_dim, get_i("expert_shared_feed_forward_length"));
        }
      }
      if (c.n_experts_used > c.n_experts)
        return InvalidArgument("{}: {}expert_used_count {} is more than expert_count {}", g.path(),
                               pre, c.n_experts_used, c.n_experts);
    }
  }
  int64_t window = 0;  // 0: none (llama.cpp's phi3 converter writes 0 for a null sliding_window)
  if (has("attention.sliding_window")) {
    LLMS_ASSIGN_OR_RETURN(window, g.get_int(pre + "attention.sliding_window"));
    if (window < 0 || window > (1LL << 31) - 1)
      return InvalidArgument("{}: metadata {}attention.sliding_window = {} is out of range", g.path(), pre, window);
  }
  // Sliding window in every layer (transformers' semantics for Mistral, Qwen2 and Phi-3; note
  // that llama.cpp ignores the key for llama/qwen2 and disables it for phi3).
  c.sliding_window = static_cast<int32_t>(window);
  // RoPE scaling as llama.cpp reads it: the factor (rope.scaling.factor, or the legacy
  // rope.scale_linear) applies as linear interpolation, or as YaRN with rope.scaling.type yarn
  // (original_context_length, optional yarn_beta_fast / yarn_beta_slow; llama.cpp's default
  // attention factor 0.1 ln(factor) + 1); llama3 frequency scaling arrives as the precomputed
  // rope_freqs.weight tensor.
  std::string scaling = "linear";
  if (has("rope.scaling.type")) {
    LLMS_ASSIGN_OR_RETURN(scaling, g.get_string(pre + "rope.scaling.type"));
  }
  double factor = 0.0;
  for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (has(key)) {
      LLMS_ASSIGN_OR_RETURN(factor, g.get_float(pre + key));
      break;
    }
  }
  if (scaling != "none" && scaling != "linear" && scaling != "yarn")
    return Unimplemented("{}: {}rope.scaling.type '{}' is not supported (supported: none, "
                         "linear, yarn, llama3 via rope_freqs)", g.path(), pre, scaling);
  if (scaling == "yarn") {
    for (const char* key : {"rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_ext_factor",
                            "rope.scaling.yarn_attn_factor", "rope.scaling.attn_factor"})
      if (has(key) && !(arch == "deepseek2" && std::string_view(key) == "rope.scaling.yarn_log_multiplier"))
        return Unimplemented("{}: {}{} is not supported", g.path(), pre, key);
    if (arch == "deepseek2" && has("rope.scaling.yarn_log_multiplier")) {
      // llama.cpp's DeepSeek converter writes 0.1 * mscale_all_dim here, and its loader assumes
      // mscale == mscale_all_dim (every released DeepSeek config): cos and sin unscaled, the
      // softmax scale times get_mscale(factor, mscale_all_dim)^2 (src/models/deepseek2.cpp).
      LLMS_ASSIGN_OR_RETURN(double log_mul, g.get_float(pre + "rope.scaling.yarn_log_multiplier"));
      if (!(log_mul >= 0.0 && log_mul <= 10.0))  // released models: 0.0707 and 0.1
        return InvalidArgument("{}: {}rope.scaling.yarn_log_multiplier = {} is out of range (0 to 10)", g.path(),
                               pre, log_mul);
      c.rope_scaling.mscale_all_dim = static_cast<float>(log_mul / 0.1);
      c.rope_scaling.attention_factor = 1.0f;
    }
    if (!has("rope.scaling.factor"))
      return InvalidArgument("{}: {}rope.scaling.type is yarn but {}rope.scaling.factor is missing", g.path(),
                             pre, pre);
    if (!(factor > 0.0) || !std::isfinite(factor))
      return InvalidArgument("{}: {}rope.scaling.type is yarn but rope.scaling.factor is {}", g.path(), pre, factor);
    c.rope_scaling.type = RopeScalingType::kYarn;
    c.rope_scaling.factor = static_cast<float>(factor);
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
    if (has("rope.scaling.original_context_length")) {
      LLMS_ASSIGN_OR_RETURN(c.rope_scaling.original_max_position_embeddings, get_i("rope.scaling.original_context_length"));
    }
    for (auto [key, field] : {std::pair{"rope.scaling.yarn_beta_fast", &c.rope_scaling.beta_fast},
                              std::pair{"rope.scaling.yarn_beta_slow", &c.rope_scaling.beta_slow}}) {
      if (!has(key)) continue;
      LLMS_ASSIGN_OR_RETURN(double v, g.get_float(pre + key));
      if (!(v > 0.0)) return InvalidArgument("{}: {}{} = {} must be > 0", g.path(), pre, key, v);
      *field = static_cast<float>(v);
    }
  } else if (scaling == "none") {
    // llama.cpp: "never scale if scaling type is none", whatever the factor says.
  } else if (factor != 0.0 && factor != 1.0) {
    if (!(factor > 0.0) || !std::isfinite(factor))
      return InvalidArgument("{}: {}rope.scaling.factor = {} must be > 0", g.path(), pre, factor);
    c.rope_scaling.type = RopeScalingType::kLinear;
    c.rope_scaling.factor = static_cast<float>(factor);
  }
  // LongRoPE as llama.cpp's Phi-3 converter writes it: rope_factors_long / rope_factors_short
  // tensors [rope_dim / 2], rope.scaling.attn_factor, rope.scaling.original_context_length.
  const TensorView* long_f = g.find_tensor("rope_factors_long.weight");
  const TensorView* short_f = g.find_tensor("rope_factors_short.weight");
  if ((long_f == nullptr) != (short_f == nullptr))
    return DataLoss("{}: rope_factors_long.weight and rope_factors_short.weight come together", g.path());
  if (long_f != nullptr) {
    if (g.find_tensor("rope_freqs.weight") != nullptr)
      return Unimplemented("{}: rope_freqs.weight together with LongRoPE's rope_factors_long/short is not supported",
                           g.path());
    if (scaling == "yarn" || c.rope_scaling.type != RopeScalingType::kNone)
      return Unimplemented("{}: LongRoPE factors with {}rope.scaling.type {} are not supported", g.path(), pre, scaling);
    RopeScaling& rs = c.rope_scaling;
    rs.type = RopeScalingType::kLongRope;
    for (auto [t, out] : {std::pair{long_f, &rs.long_factor}, std::pair{short_f, &rs.short_factor}}) {
      if (t->shape.size() != 1 || t->shape[0] != c.rope_dim() / 2 || !is_float_dtype(t->dtype))
        return DataLoss("{}: {} has shape [{}] and type {}, expected [{}] floats", g.path(), t->name,
                        fmt::join(t->shape, ", "), dtype_name(t->dtype), c.rope_dim() / 2);
      out->resize(t->shape[0]);
      to_f32(t->data, t->dtype, t->shape[0], out->data());
    }
    rs.original_max_position_embeddings = c.max_position_embeddings;
    if (has("rope.scaling.original_context_length")) {
      LLMS_ASSIGN_OR_RETURN(rs.original_max_position_embeddings, get_i("rope.scaling.original_context_length"));
    }
    rs.factor = static_cast<float>(double(c.max_position_embeddings) / rs.original_max_position_embeddings);
    const double f = rs.factor, orig = rs.original_max_position_embeddings;
    rs.attention_factor = f <= 1.0 || orig <= 1 ? 1.0f : static_cast<float>(std::sqrt(1.0 + std::log(f) / std::log(orig)));
    if (has("rope.scaling.attn_factor")) {
      LLMS_ASSIGN_OR_RETURN(double af, g.get_float(pre + "rope.scaling.attn_factor"));
      if (!(af > 0.0) || af > 1e4)
        return InvalidArgument("{}: metadata {}rope.scaling.attn_factor = {} must be > 0", g.path(), pre, af);
      rs.attention_factor = static_cast<float>(af);
    }
  } else if (scaling != "yarn" && has("rope.scaling.attn_factor")) {
    LLMS_ASSIGN_OR_RETURN(double af, g.get_float(pre + "rope.scaling.attn_factor"));
    if (af != 1.0)
      return Unimplemented("{}: metadata {}rope.scaling.attn_factor = {} without YaRN or LongRoPE is not supported",
                           g.path(), pre, af);
  }
  if (arch == "gemma2" || arch == "gemma3") {
    LLMS_RETURN_IF_ERROR(read_gemma_gguf(g, pre, arch == "gemma2", c));
  }
  if (const TensorView* f = g.find_tensor("rope_freqs.weight")) {
    if (f->shape.size() != 1 || f->shape[0] != c.rope_dim() / 2)
      return DataLoss("{}: rope_freqs.weight has shape [{}], expected [{}]", g.path(),
                      fmt::join(f->shape, ", "), c.rope_dim() / 2);
    c.rope_freq_factors.resize(f->shape[0]);
    to_f32(f->data, f->dtype, f->shape[0], c.rope_freq_factors.data());
  }

  for (const TensorView& t : g.tensors()) {  // layers beyond block_count mean bad metadata
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1 && layer >= c.n_layers)
      return InvalidArgument("{}: tensor {} belongs to layer {} but {}block_count = {}",
                             g.path(), t.name, layer, pre, c.n_layers);
  }
  const TensorView* emb = g.find_tensor("token_embd.weight");
  if (!emb) return NotFound("{}: missing tensor token_embd.weight", g.path());
  if (emb->shape.size() != 2)
    return DataLoss("{}: token_embd.weight has {} dims, expected 2", g.path(), emb->shape.size());
  c.vocab_size = static_cast<int32_t>(emb->shape[0]);
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.weight_dtype = emb->dtype;
  return c;
}

GenerationConfig generation_from_gguf(const GgufFile& g) {
  GenerationConfig gen;
  if (auto eos = g.get_int("tokenizer.ggml.eos_token_id"); eos.ok() && *eos >= 0)
    gen.eos_token_ids.push_back(static_cast<int32_t>(*eos));
  if (auto bos = g.get_int("tokenizer.ggml.bos_token_id"); bos.ok() && *bos >= 0)
    gen.bos_token_id = static_cast<int32_t>(*bos);
  return gen;
}

ModelConfig config_from_llama2c(const Llama2cHeader& h) {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = h.vocab_size;
  c.dim = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.ffn_dim = h.hidden_dim;
  c.max_position_embeddings = h.seq_len;
  c.rms_norm_eps = 1e-5f;  // run.c rmsnorm
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::kAdjacentPairs;
  c.tie_word_embeddings = h.shared_classifier;
  return c;
}

}  // namespace

Expected<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("{}: no such model file", path);
  auto mf = std::make_unique<ModelFile>();
  mf->path_ = path;
  if (std::filesystem::is_directory(path, ec)) {
    LLMS_RETURN_IF_ERROR(mf->open_hf_dir());
  } else if (!std::filesystem::is_regular_file(path, ec)) {
    return InvalidArgument("{}: not a regular file or directory (expected a .gguf file, a "
                           "llama2.c .bin file or a Hugging Face model directory)", path);
  } else if (GgufFile::has_magic(path)) {
    mf->format_ = Format::kGguf;
    LLMS_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
    mf->gguf_ = std::make_unique<GgufFile>(std::move(g));
    LLMS_ASSIGN_OR_RETURN(mf->config_, config_from_gguf(*mf->gguf_));
    mf->generation_ = generation_from_gguf(*mf->gguf_);
    mf->config_.name = file_stem(path);
  } else {
    // Not GGUF; a llama2.c checkpoint has only its header to go by. A file whose header is not
    // one is "not a model file", shown by its first bytes, not a llama2.c header complaint.
    if (std::filesystem::file_size(path, ec) == 0)
      return InvalidArgument("{}: not a model file: the file is empty", path);
    if (auto header = Llama2cCheckpoint::read_header(path); !header.ok()) {
      std::string why = header.status().message();
      if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
      return InvalidArgument("{}: not a model file: not GGUF (it starts with {}; GGUF files "
                             "start with \"GGUF\") nor a llama2.c checkpoint ({})", path,
                             first_bytes(path), why);
    }
    mf->format_ = Format::kLlama2c;
    LLMS_ASSIGN_OR_RETURN(Llama2cCheckpoint ck, Llama2cCheckpoint::open(path));
    mf->llama2c_ = std::make_unique<Llama2cCheckpoint>(std::move(ck));
    mf->config_ = config_from_llama2c(mf->llama2c_->header());
    mf->generation_.bos_token_id = 1;  // llama2.c tokenizer.bin conventions
    mf->generation_.eos_token_ids = {2};
    mf->config_.name = file_stem(path);
  }
  Status st = mf->config_.validate();
  if (!st.ok()) return InvalidArgument("{}: {}", path, st.message());
  if (mf->format_ != Format::kLlama2c) {
    // The declared layer count must match the tensors before anything is sized from it.
    const std::string last = "blk." + std::to_string(mf->config_.n_layers - 1) + ".attn_norm.weight";
    if (mf->find_tensor(last) == nullptr) {
      Status missing = mf->tensor(last).status();
      return NotFound("{} (the config declares {} layers)", missing.message(),
                      mf->config_.n_layers);
    }
  }
  return mf;
}

Status ModelFile::open_hf_dir() {
  namespace fs = std::filesystem;
  format_ = Format::kHfDir;
  std::error_code ec;
  if (!fs::exists(fs::path(path_) / "config.json", ec))
    return NotFound("{}: not a model: the directory has no config.json (expected a Hugging "
                    "Face model directory)", path_);
  LLMS_ASSIGN_OR_RETURN(config_, read_hf_config(path_));
  LLMS_ASSIGN_OR_RETURN(generation_, read_hf_generation_config(path_));
  for (int32_t id : generation_.eos_token_ids)
    if (id >= config_.vocab_size)
      return InvalidArgument("{}: eos_token_id {} is outside the vocabulary (vocab_size {})",
                             path_, id, config_.vocab_size);
  if (generation_.bos_token_id >= config_.vocab_size)
    return InvalidArgument("{}: bos_token_id {} is outside the vocabulary (vocab_size {})", path_,
                           generation_.bos_token_id, config_.vocab_size);
  LLMS_ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::open_dir(path_));
  safetensors_ = std::make_unique<SafetensorsModel>(std::move(st));
  std::vector<std::string> unused;
  for (const TensorView* t : safetensors_->tensors()) {
    std::optional<std::string> name = gguf_name_for_hf(t->name, config_.architecture);
    if (!name) {
      unused.push_back(t->name);
      continue;
    }
    int layer = -1;
    if (std::sscanf(name->c_str(), "blk.%d.", &layer) == 1 && layer >= config_.n_layers)
      return InvalidArgument("{}: tensor {} belongs to layer {} but config.json has "
                             "num_hidden_layers = {}", path_, t->name, layer, config_.n_layers);
    if (!hf_by_gguf_name_.emplace(*name, t).second)
      return DataLoss("{}: tensors {} and {} are the same weight", path_,
                      hf_by_gguf_name_[*name]->name, t->name);
  }
  int64_t vision_tensors = 0;
  for (const std::string& n : unused) {
    // Buffers some exporters save; everything else unknown means an unsupported feature.
    if (n.find("rotary_emb.inv_freq") != std::string::npos) continue;
    if (config_.vision_tower_not_loaded && is_gemma3_vision_tensor(n)) {
      ++vision_tensors;
      not_loaded_.insert(safetensors_->find_tensor(n));
      continue;
    }
    return Unimplemented("{}: tensor {} is not used by the {} architecture (an unsupported "
                         "feature)", path_, n, config_.architecture);
  }
  if (vision_tensors > 0)
    spdlog::info("{}: Gemma 3 with a vision tower: serving the text model; {} vision tensors not loaded (requests "
                  "are text only)", path_, vision_tensors);
  const TensorView* emb = find_tensor("token_embd.weight");
  if (emb == nullptr) return NotFound("{}: missing tensor model.embed_tokens.weight", path_);
  if (emb->shape.size() != 2 || emb->shape[0] != config_.vocab_size ||
      emb->shape[1] != config_.dim)
    return DataLoss("{}: tensor model.embed_tokens.weight has shape [{}], expected [{}, {}] "
                    "from config.json (vocab_size, hidden_size)", path_,
                    fmt::join(emb->shape, ", "), config_.vocab_size, config_.dim);
  config_.weight_dtype = emb->dtype;
  if (config_.architecture == "gemma2" || config_.architecture == "gemma3") {
    // Gemma's RMSNorm multiplies by 1 + weight (transformers' Gemma2RMSNorm / Gemma3RMSNorm);
    // the GGUF files llama.cpp's converter writes store 1 + weight, which the model reads:
    // every norm vector becomes a float32 copy of 1 + weight here.
    std::vector<std::string> norms;
    for (const auto& [name, t] : hf_by_gguf_name_)
      if (name.size() > 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0) norms.push_back(name);
    for (const std::string& name : norms) {
      const TensorView* t = find_tensor(name);
      if (t->shape.size() != 1 || !is_float_dtype(t->dtype))
        return DataLoss("{}: tensor {} must be a float vector, has shape [{}] and type {}", path_, t->name,
                        fmt::join(t->shape, ", "), dtype_name(t->dtype));
      const int64_t n = t->shape[0];
      std::shared_ptr<float[]> w(new float[n]);
      to_f32(t->data, t->dtype, n, w.get());
      for (int64_t i = 0; i < n; ++i) w[i] += 1.0f;
      LLMS_RETURN_IF_ERROR(replace_tensor(name, DType::kF32, std::shared_ptr<const void>(w, w.get()),
                                          static_cast<size_t>(n) * sizeof(float)));
    }
  }
  const fs::path tok = fs::path(path_) / "tokenizer.json";
  if (fs::exists(tok, ec)) tokenizer_json_ = tok.string();
  fs::path p = fs::path(path_);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  config_.name = p.filename().string();
  return Status::Ok();
}

namespace {

/// The replacement of `t` in `replaced`, else `t` itself.
template <typename Map>
const TensorView* current(const Map& replaced, const TensorView* t) {
  if (t == nullptr || replaced.empty()) return t;
  auto it = replaced.find(t);
  return it == replaced.end() ? t : it->second.view.get();
}

}  // namespace

const TensorView* ModelFile::find_tensor(std::string_view name) const {
  const TensorView* t = nullptr;
  if (format_ == Format::kHfDir) {
    auto it = hf_by_gguf_name_.find(name);
    t = it == hf_by_gguf_name_.end() ? nullptr : it->second;
  } else {
    t = gguf_ ? gguf_->find_tensor(name) : llama2c_->find_tensor(name);
  }
  return current(replaced_, t);
}

std::vector<const TensorView*> ModelFile::tensors() const {
  std::vector<const TensorView*> out;
  if (safetensors_) {
    for (const TensorView* t : safetensors_->tensors())
      if (!not_loaded_.count(t)) out.push_back(t);
  } else if (gguf_) {
    for (const TensorView& t : gguf_->tensors()) out.push_back(&t);
  } else if (llama2c_) {
    for (const TensorView& t : llama2c_->tensors()) out.push_back(&t);
  }
  for (const TensorView*& t : out) t = current(replaced_, t);
  return out;
}

Status ModelFile::replace_tensor(std::string_view gguf_name, DType dtype,
                                 std::shared_ptr<const void> data, size_t nbytes) {
  const TensorView* now = find_tensor(gguf_name);
  if (now == nullptr) return NotFound("{}: no tensor {} to replace", path_, gguf_name);
  const int64_t cols = now->shape.empty() ? 1 : now->shape.back();
  if (cols % dtype_block_elems(dtype) != 0 ||
      static_cast<uint64_t>(now->numel() / cols * dtype_row_bytes(dtype, cols)) != nbytes)
    return InvalidArgument("{}: {} bytes of {} do not hold tensor {} [{}]", path_, nbytes,
                           dtype_name(dtype), gguf_name, fmt::join(now->shape, ", "));
  const TensorView* original = now;  // the file's view, the key of replaced_
  for (const auto& [orig, repl] : replaced_)
    if (repl.view.get() == now) original = orig;
  auto view = std::make_unique<TensorView>(*now);
  view->dtype = dtype;
  view->data = data.get();
  view->nbytes = nbytes;
  replaced_[original] = Replacement{std::move(view), std::move(data)};
  if (gguf_name == "token_embd.weight") config_.weight_dtype = dtype;
  return Status::Ok();
}

Expected<const TensorView*> ModelFile::tensor(std::string_view name) const {
  const TensorView* t = find_tensor(name);
  if (t) return t;
  if (format_ == Format::kHfDir) {
    if (std::optional<std::string> hf = hf_name_for_gguf(name, config_.architecture))
      return NotFound("{}: missing tensor {}", path_, *hf);
  }
  return NotFound("{}: missing tensor {}", path_, name);
}

}  // namespace llmserve
