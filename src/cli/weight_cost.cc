#include "cli/weight_cost.h"

#include <cstdio>

#include "models/quantize_model.h"

namespace llmserve::cli {

bool is_expert_tensor(const std::string& name) {
  if (name.find("_exps.") != std::string::npos || name.find("mlp.experts.") != std::string::npos ||
      name.find("block_sparse_moe.experts.") != std::string::npos)
    return true;
  int layer = 0, expert = 0, n = 0;
  char what[16];
  return std::sscanf(name.c_str(), "blk.%d.ffn_%15[a-z].%d.weight%n", &layer, what, &expert, &n) == 3 &&
         n == static_cast<int>(name.size());
}

WeightCost weight_cost(const ModelFile& mf, const std::map<const TensorView*, DType>& types) {
  WeightCost c;
  std::vector<TypeUsage> by_type(kNumDTypes);
  const TensorView* emb = mf.find_tensor("token_embd.weight");
  const bool tied = mf.config().tie_word_embeddings;
  int64_t matrix_params = 0, matrix_bytes = 0;
  auto type_of = [&types](const TensorView* t) {
    const auto it = types.find(t);
    return it != types.end() ? it->second : t->dtype;
  };
  for (const TensorView* t : mf.tensors()) {
    const DType type = type_of(t);
    // A 1-D tensor keeps its type; a matrix of n rows has n rows of whole blocks.
    const int64_t bytes = type == t->dtype
                              ? static_cast<int64_t>(t->nbytes)
                              : t->numel() / t->shape.back() * dtype_row_bytes(type, t->shape.back());
    TypeUsage& u = by_type[static_cast<size_t>(type)];
    u.dtype = type;
    ++u.tensors;
    u.params += t->numel();
    u.bytes += bytes;
    c.total_bytes += bytes;
    if (t->shape.size() < 2) continue;
    matrix_params += t->numel();
    matrix_bytes += bytes;
    const ModelConfig& cfg = mf.config();
    if (cfg.is_moe() && is_expert_tensor(t->name)) {
      c.expert_params += t->numel();
      c.expert_bytes += bytes;
      c.active_expert_params += t->numel() / cfg.n_experts * cfg.n_experts_used;
      c.active_expert_bytes += bytes / cfg.n_experts * cfg.n_experts_used;
      c.decode_bytes_per_token += bytes / cfg.n_experts * cfg.n_experts_used;
      continue;
    }
    if (t != emb || tied) c.decode_bytes_per_token += bytes;
  }
  if (emb != nullptr && !emb->shape.empty())
    c.decode_bytes_per_token += dtype_row_bytes(type_of(emb), emb->shape.back());
  for (const TypeUsage& u : by_type)
    if (u.tensors > 0) c.types.push_back(u);
  c.matrix_bits_per_weight = matrix_params > 0 ? 8.0 * double(matrix_bytes) / double(matrix_params) : 0;
  return c;
}

void plan_dtype_conversion(const ModelFile& mf, DType dtype, std::map<const TensorView*, DType>& planned) {
  for (const TensorView* t : mf.tensors())
    if (t->shape.size() >= 2 && is_float_dtype(t->dtype) && t->dtype != dtype && !planned.count(t))
      planned[t] = dtype;
}

Expected<WeightCost> planned_weight_cost(const ModelFile& mf, std::string_view quantization,
                                         std::optional<DType> dtype) {
  std::map<const TensorView*, DType> planned;
  if (!quantization.empty()) {
    LLMS_ASSIGN_OR_RETURN(const QuantizationPlan plan, plan_quantization_flag(mf, quantization));
    for (const TensorPlan& p : plan.changes) planned[p.tensor] = p.type;
  }
  if (dtype) plan_dtype_conversion(mf, *dtype, planned);
  return weight_cost(mf, planned);
}

}  // namespace llmserve::cli
