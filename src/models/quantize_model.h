// Quantizing a model's weights, shared by `llmserve quantize` (writes a GGUF file) and
// `--quantization` (replaces the weights in memory at load time): the plan (the per-tensor
// rules of quant/quant_scheme.h over a ModelFile's tensors), the conversion of a tensor's rows,
// and the in-memory replacement. Both paths run the same planner and the same quantizer on
// the same float32 rows, so they produce the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "models/model_file.h"
#include "quant/quant_scheme.h"

namespace llmserve {

class ThreadPool;

/// One tensor of a model and the type a scheme gives it.
struct TensorPlan {
  const TensorView* tensor = nullptr;  // as the ModelFile holds it (HF name in an HF directory)
  std::string gguf_name;               // the name models and GGUF files use
  DType type = DType::kF32;            // target; equal to tensor->dtype when kept as is
};

/// What the rules need about `file`'s model (architecture, layers, heads).
QuantModelInfo quant_model_info(const ModelFile& file);

/// The plan for `scheme` over every tensor of `file` that has a GGUF name (HF buffers such as
/// rotary_emb.inv_freq are skipped), in file order. Errors: InvalidArgument naming the file and
/// the tensor when a row length fits neither the chosen type nor a fallback.
Expected<std::vector<TensorPlan>> plan_model_quantization(const ModelFile& file,
                                                          const QuantScheme& scheme);

/// Source row of output row r (e.g. llama.cpp's Q/K row permutation); null = the same row.
using RowMap = std::function<int64_t(int64_t)>;

/// Output rows [row0, row0 + rows) of tensor `t` (rows of t.shape.back() values; f32, f16 or
/// bf16) in `type`, written to `out` (rows * dtype_row_bytes(type, cols) bytes), through
/// float32 `scratch` (resized to rows * cols). Errors: Unimplemented for a quantized or other
/// source dtype, InvalidArgument for a value that is not finite; both name the tensor.
Status quantize_tensor_rows(const TensorView& t, DType type, int64_t row0, int64_t rows,
                            const RowMap& source_row, std::vector<float>& scratch, uint8_t* out,
                            ThreadPool* pool);

/// What --quantization did.
struct QuantizationSummary {
  std::string value;                  // the --quantization value
  bool already_quantized = false;     // the file's weights were already of that type
  std::map<DType, int> matrices;      // tensors quantized, by type
  uint64_t bytes_before = 0, bytes_after = 0;  // of the quantized tensors
  double seconds = 0;
  /// One line for the start-up log: "q4_k_m: 16 weight matrices -> Q4_K x13, Q6_K x3,
  /// 6.5 MiB -> 1.1 MiB in 0.21 s".
  std::string describe() const;
};

/// What --quantization `value` would do to an opened model, converting nothing: the tensors it
/// replaces and their new types, or (already_quantized) nothing because the file is already
/// quantized as asked. `inspect --quantization` reports from it; apply_quantization carries it
/// out.
struct QuantizationPlan {
  bool already_quantized = false;
  std::map<DType, int> present;      // the file's quantized tensors, by type
  std::vector<TensorPlan> changes;   // tensors whose type changes, in file order
};

/// The checks and plan of apply_quantization (same errors, except the conversion's own).
Expected<QuantizationPlan> plan_quantization_flag(const ModelFile& file, std::string_view value);

/// --quantization `value` (find_quantization_flag) on an opened model: every matrix the plan
/// quantizes is converted and replaces the file's tensor in memory (ModelFile::replace_tensor;
/// call before building a model from the file); 1-D tensors (norms, biases) are untouched.
/// A file that already holds quantized tensors is left as it is when its tensor types are
/// exactly those the value gives its shapes (fallbacks included), or when its main type (most
/// elements among its quantized tensors) is the value's type, and is an error otherwise.
/// Errors: InvalidArgument for an unknown value, an already-quantized file of another type
/// (naming the file's types), rows no type fits, non-finite weights; Unimplemented for
/// tensors of a dtype that cannot be converted.
Expected<QuantizationSummary> apply_quantization(ModelFile& file, std::string_view value,
                                                 ThreadPool* pool);

}  // namespace llmserve
