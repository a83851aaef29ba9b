// llama-quantize's per-tensor rules (llama.cpp src/llama-quant.cpp, Aug 2026), for the schemes
// in kSchemes and dense models. Names of the llama.cpp functions each piece mirrors are given
// inline; see quant_scheme.h for the rules in words.
#include "quant/quant_scheme.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <numeric>

namespace llmserve {
namespace {

// enum llama_ftype (llama.h) for each llama-quantize --type, and llama_ftype_get_default_type.
// The first scheme of each base type is the one a pure --quantization value stands for.
constexpr QuantScheme kSchemes[] = {
    {"Q8_0", DType::kQ8_0, 7},    {"Q4_0", DType::kQ4_0, 2},    {"Q4_1", DType::kQ4_1, 3},
    {"Q5_0", DType::kQ5_0, 8},    {"Q5_1", DType::kQ5_1, 9},    {"Q4_K_M", DType::kQ4_K, 15},
    {"Q4_K_S", DType::kQ4_K, 14}, {"Q5_K_M", DType::kQ5_K, 17}, {"Q5_K_S", DType::kQ5_K, 16},
    {"Q6_K", DType::kQ6_K, 18},
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const QuantScheme* scheme_named(std::string_view name) {
  for (const QuantScheme& s : kSchemes)
    if (s.name == name) return &s;
  return nullptr;
}

// tensor_category / tensor_get_category: broad classes by name.
enum class Category { kTokenEmbd, kOutput, kAttnV, kAttnK, kAttnOutput, kFfnDown, kOther };

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  // category_is_attn_v: attn_v, and the fused attn_qkv / attn_kv_b that contain V.
  for (const char* v : {"attn_qkv.weight", "attn_kv_b.weight", "attn_v.weight"})
    if (name.find(v) != std::string::npos) return Category::kAttnV;
  if (name.find("ffn_down") != std::string::npos) return Category::kFfnDown;
  if (name.find("attn_k.weight") != std::string::npos) return Category::kAttnK;
  if (name.find("attn_output.weight") != std::string::npos) return Category::kAttnOutput;
  return Category::kOther;
}

int layer_of(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama_tensor_get_type_impl's use_more_bits.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// tensor_type_fallback: a type whose block the row length is not a multiple of.
Expected<DType> fallback(const QuantTensor& t, DType type) {
  const int64_t cols = t.shape.back();
  if (cols % dtype_block_elems(type) == 0) return type;
  DType alt;
  switch (type) {
    case DType::kQ4_K: alt = DType::kQ5_0; break;
    case DType::kQ5_K: alt = DType::kQ5_1; break;
    case DType::kQ6_K: alt = DType::kQ8_0; break;
    default:
      return InvalidArgument("tensor {}: rows of {} values are not whole {}-value blocks of {}, "
                             "and {} has no fallback type", t.name, cols,
                             dtype_block_elems(type), dtype_ggml_name(type), dtype_ggml_name(type));
  }
  return cols % dtype_block_elems(alt) == 0 ? alt : DType::kF16;
}

}  // namespace

std::optional<QuantScheme> find_quant_scheme(std::string_view name) {
  std::string n = upper(name);
  if (n == "Q4_K") n = "Q4_K_M";  // aliases of tools/quantize/quantize.cpp
  if (n == "Q5_K") n = "Q5_K_M";
  if (const QuantScheme* s = scheme_named(n)) return *s;
  return std::nullopt;
}

std::string quant_scheme_names() {
  std::string out;
  for (const QuantScheme& s : kSchemes) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out + ", Q4_K (= Q4_K_M), Q5_K (= Q5_K_M)";
}

std::optional<QuantScheme> find_quantization_flag(std::string_view value) {
  for (char c : value)
    if (std::isupper(static_cast<unsigned char>(c))) return std::nullopt;  // lower case only
  const std::string n = upper(value);
  if (const QuantScheme* s = scheme_named(n); s && (ends_with(n, "_S") || ends_with(n, "_M")))
    return *s;
  for (const QuantScheme& s : kSchemes) {
    if (dtype_ggml_name(s.base) == n) {  // the plain type: that type everywhere
      QuantScheme pure = s;
      pure.pure = true;
      return pure;
    }
  }
  return std::nullopt;
}

namespace {
constexpr const char* kPureValues[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
constexpr const char* kMixValues[] = {"q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m"};
}  // namespace

std::vector<std::string> quantization_flag_values() {
  std::vector<std::string> v(std::begin(kPureValues), std::end(kPureValues));
  v.insert(v.end(), std::begin(kMixValues), std::end(kMixValues));
  return v;
}

std::string quantization_flag_names() {
  auto join = [](const auto& list) {
    std::string s;
    for (const char* v : list) s += (s.empty() ? "" : ", ") + std::string(v);
    return s;
  };
  return join(kPureValues) + " (that type for every weight matrix), " + join(kMixValues) +
         " (llama-quantize's mixes)";
}

bool tensor_is_quantizable(const QuantTensor& t) {
  return t.shape.size() >= 2 && ends_with(t.name, "weight") &&
         t.name.find("_norm.weight") == std::string::npos &&
         t.name.find("ffn_gate_inp") == std::string::npos;  // routers, and Qwen2-MoE's shared-expert gate
}

Expected<std::vector<DType>> plan_tensor_types(const QuantScheme& scheme,
                                               const QuantModelInfo& model,
                                               const std::vector<QuantTensor>& tensors) {
  // llama.cpp visits tensors in weights_map order (weight_name_comparer: layer, then name);
  // the attn_v counter depends on it.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  bool tied = true;  // has_tied_embeddings until output.weight is seen
  int n_attn_v = 0;
  for (const QuantTensor& t : tensors) {
    const Category c = category_of(t.name);
    if (c == Category::kOutput) tied = false;
    if (c == Category::kAttnV) ++n_attn_v;
  }
  const int n_layers = model.n_layers;
  // LLM_TYPE_70B (llama.cpp src/models/llama.cpp, qwen2.cpp): 80 layers, GQA for llama.
  const bool is_70b = n_layers == 80 && ((model.architecture == "llama" &&
                                          model.n_heads != model.n_kv_heads) ||
                                         model.architecture == "qwen2");
  const std::string_view ft = scheme.name;
  const bool more_bits_mix = ft == "Q4_K_M" || ft == "Q5_K_M";
  int i_attn_v = 0, i_ffn_down = 0;
  // llama.cpp's hparams.n_expert == 8 rules (Mixtral's size; they apply to any 8-expert model).
  const bool eight_experts = model.n_experts == 8;
  std::vector<DType> out(tensors.size());
  for (size_t idx : order) {
    const QuantTensor& t = tensors[idx];
    if (!tensor_is_quantizable(t)) {
      out[idx] = t.dtype;
      continue;
    }
    DType type = scheme.base;
    const Category c = category_of(t.name);
    if (!scheme.pure) {  // llama_tensor_get_type_impl
      if (c == Category::kOutput || (tied && c == Category::kTokenEmbd)) {
        if (t.shape.back() % dtype_block_elems(type) != 0) type = DType::kQ8_0;
        else if (type != DType::kQ8_0) type = DType::kQ6_K;
      } else if (c == Category::kAttnV) {
        if (more_bits_mix && use_more_bits(i_attn_v, n_attn_v)) type = DType::kQ6_K;
        else if (ft == "Q4_K_S" && i_attn_v < 4) type = DType::kQ5_K;
        if (is_70b && type == DType::kQ4_K) type = DType::kQ5_K;
        if (eight_experts) type = DType::kQ8_0;
        ++i_attn_v;
      } else if (c == Category::kAttnK) {
        if (eight_experts) type = DType::kQ8_0;
      } else if (c == Category::kAttnOutput) {
        if (eight_experts && (ft == "Q4_K_S" || ft == "Q4_K_M")) type = DType::kQ5_K;
      } else if (c == Category::kFfnDown) {
        // layer_info(i_ffn_down, n_ffn_down = n_layer, name): the counter over ffn_down tensors
        // (the layer, for a dense model), or with experts the layer parsed from the name (a
        // Qwen2-MoE layer has two ffn_down tensors, an old per-expert Mixtral GGUF eight).
        const int i_layer = model.n_experts > 1 ? layer_of(t.name) : i_ffn_down;
        if (more_bits_mix && use_more_bits(i_layer, n_layers)) type = DType::kQ6_K;
        else if (ft == "Q4_K_S" && i_layer < n_layers / 8) type = DType::kQ5_K;
        ++i_ffn_down;
      }
    }
    LLMS_ASSIGN_OR_RETURN(out[idx], fallback(t, type));
  }
  return out;
}

}  // namespace llmserve
