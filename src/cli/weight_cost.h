// What a checkpoint's weights cost: per-type totals, bits per weight, and the decode roofline's
// bytes per token (inspect prints them; bench --roofline divides its probed bandwidth by them).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "models/model_file.h"

namespace llmserve::cli {

/// Tensors of one dtype in the checkpoint.
struct TypeUsage {
  DType dtype;
  int64_t tensors = 0, params = 0, bytes = 0;
};

/// What the weights cost: per-type totals (in DType order), the bits per weight of the weight
/// matrices (every tensor of 2+ dimensions, token embedding included), and the decode
/// roofline's bytes per token: every weight matrix read once (the token embedding only when it
/// is also the lm_head) plus one embedding row, as stored in the file.
struct WeightCost {
  std::vector<TypeUsage> types;
  double matrix_bits_per_weight = 0;
  int64_t decode_bytes_per_token = 0;
  int64_t total_bytes = 0;  // every tensor
  // Mixture of experts: the expert matrices' totals, and what one token reads of them (its
  // n_experts_used of n_experts, counted in decode_bytes_per_token instead of all of them).
  int64_t expert_params = 0, expert_bytes = 0, active_expert_params = 0, active_expert_bytes = 0;
};

/// A routed expert's weights: llama.cpp's stacked blk.N.ffn_*_exps, the older per-expert
/// blk.N.ffn_*.E.weight, or HF mlp.experts.E.* (Mixtral: block_sparse_moe.experts.E.*).
bool is_expert_tensor(const std::string& name);

/// `types`: tensors whose type --quantization would change (the rest as stored).
WeightCost weight_cost(const ModelFile& mf, const std::map<const TensorView*, DType>& types);

/// Adds to `planned` the tensors `--dtype dtype` converts at load: every float tensor of 2+
/// dimensions in another float type and not already planned (norms and biases stay as they
/// are, as models/weight_loader.h converts them).
void plan_dtype_conversion(const ModelFile& mf, DType dtype, std::map<const TensorView*, DType>& planned);

/// weight_cost with the types the engine would load: `--quantization VALUE`'s (empty: none;
/// plan_quantization_flag's errors), then `--dtype`'s conversion (nullopt: none;
/// plan_dtype_conversion).
Expected<WeightCost> planned_weight_cost(const ModelFile& mf, std::string_view quantization,
                                         std::optional<DType> dtype);

}  // namespace llmserve::cli
