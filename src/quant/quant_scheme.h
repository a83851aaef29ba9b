// Quantization schemes and llama-quantize's per-tensor type rules: which tensors of a model are
// quantized, to what, and what a row length that a type cannot hold falls back to. One rule
// set for both `llmserve quantize` (files) and `--quantization` (in memory at load time).
//
// The rules are those of llama.cpp's src/llama-quant.cpp (llama_tensor_get_type and
// llama_tensor_get_type_impl, tensor_allows_quantization, tensor_type_fallback), restricted
// to the schemes implemented here and to dense models (no MoE rules: llmserve rejects MoE
// layers). Notably:
//  - only tensors with >= 2 dimensions whose name ends in "weight" are quantized, never
//    "*_norm.weight" (1-D tensors such as norms and biases keep their type);
//  - output.weight (and token_embd.weight of a model with tied embeddings, which serves as
//    the output) becomes Q6_K unless the scheme's type is Q8_0, or Q8_0 when its rows are not
//    whole blocks of the scheme's type;
//  - attn_v.weight: Q4_K_M / Q5_K_M give Q6_K to the "use more bits" layers (layer i of n:
//    i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2); Q4_K_S gives Q5_K to the first 4; a llama
//    with 80 layers and GQA (LLM_TYPE_70B) gets Q5_K where the rules say Q4_K;
//  - ffn_down.weight: Q4_K_M / Q5_K_M give Q6_K to the "use more bits" layers, Q4_K_S gives
//    Q5_K to the first n/8;
//  - rows whose length is not a multiple of the chosen type's block fall back: Q4_K -> Q5_0,
//    Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 when even that does not fit; the 32-element types
//    have no fallback (an error).
// A "pure" scheme (llama-quantize --pure; the plain `q4_k`-style --quantization values) gives
// every quantizable tensor the scheme's type, output and embeddings included, with the same
// fallbacks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace llmserve {

/// A quantization scheme: a llama-quantize file type.
struct QuantScheme {
  std::string_view name;  // llama-quantize's spelling: "Q4_K_M"
  DType base;             // its default tensor type (llama_ftype_get_default_type)
  uint32_t file_type;     // general.file_type: enum llama_ftype in llama.h (Q4_K_M = 15)
  bool pure = false;      // every quantizable tensor gets `base` (no mix rules)
};

/// llama-quantize's --type names (case-insensitive): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_S,
/// Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, and the aliases Q4_K (= Q4_K_M) and Q5_K (= Q5_K_M) as
/// llama-quantize defines them (tools/quantize/quantize.cpp). nullopt for anything else.
std::optional<QuantScheme> find_quant_scheme(std::string_view name);
/// "Q8_0, Q4_0, ..." for error messages.
std::string quant_scheme_names();

/// The --quantization values (lower case, as vLLM spells its methods): a type name q8_0,
/// q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k means that type for every weight matrix (pure);
/// q4_k_s, q4_k_m, q5_k_s, q5_k_m are llama-quantize's mixes. nullopt for anything else.
std::optional<QuantScheme> find_quantization_flag(std::string_view value);
/// Every value find_quantization_flag accepts, pure types first.
std::vector<std::string> quantization_flag_values();
/// "q8_0, q4_0, ... (that type for every weight matrix), q4_k_s, ... (llama-quantize's
/// mixes)" for help texts and error messages.
std::string quantization_flag_names();

/// What the rules need to know about the model (llama-quant.cpp reads the same from the
/// model's hyperparameters).
struct QuantModelInfo {
  std::string architecture;  // "llama", "qwen2", ...
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t n_experts = 0;     // routed experts per layer (0 or 1: dense)
};

/// One tensor of the model: GGUF name, shape (outermost first, the row length last), type.
struct QuantTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
};

/// True for the tensors llama-quantize quantizes (tensor_allows_quantization, the part that
/// applies to our architectures): >= 2 dims, name ending in "weight", not a norm, not an MoE
/// router (ffn_gate_inp).
bool tensor_is_quantizable(const QuantTensor& t);

/// The type each tensor of `tensors` gets under `scheme` (same order; unquantizable tensors
/// keep their dtype). Counters such as "the i-th attn_v" run over the tensors in llama.cpp's
/// order (by layer, then by name). Errors: InvalidArgument naming the tensor when its row
/// length fits neither the chosen type nor any fallback (e.g. 100 values for Q8_0).
Expected<std::vector<DType>> plan_tensor_types(const QuantScheme& scheme,
                                               const QuantModelInfo& model,
                                               const std::vector<QuantTensor>& tensors);

}  // namespace llmserve
