#include "models/quantize_model.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/ops.h"
#include "models/hf_config.h"
#include "quant/quantize.h"

namespace llmserve {
namespace {

std::string join_counts(const std::map<DType, int>& counts) {
  std::string s;
  for (const auto& [type, n] : counts)
    s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", dtype_ggml_name(type), n);
  return s;
}

double mib(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

QuantModelInfo quant_model_info(const ModelFile& file) {
  const ModelConfig& c = file.config();
  return {c.architecture, c.n_layers, c.n_heads, c.n_kv_heads, c.n_experts};
}

Expected<std::vector<TensorPlan>> plan_model_quantization(const ModelFile& file,
                                                          const QuantScheme& scheme) {
  std::vector<TensorPlan> plan;
  std::vector<QuantTensor> tensors;
  for (const TensorView* t : file.tensors()) {
    std::string name = t->name;
    if (file.format() == ModelFile::Format::kHfDir) {
      std::optional<std::string> g = gguf_name_for_hf(t->name, file.config().architecture);
      if (!g) continue;
      name = *g;
    }
    tensors.push_back({name, t->shape, t->dtype});
    plan.push_back({t, std::move(name), t->dtype});
  }
  auto types = plan_tensor_types(scheme, quant_model_info(file), tensors);
  if (!types.ok()) return InvalidArgument("{}: {}", file.path(), types.status().message());
  for (size_t i = 0; i < plan.size(); ++i) plan[i].type = (*types)[i];
  return plan;
}

Status quantize_tensor_rows(const TensorView& t, DType type, int64_t row0, int64_t rows,
                            const RowMap& source_row, std::vector<float>& scratch, uint8_t* out,
                            ThreadPool* pool) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    return Unimplemented("tensor {} is {}: only f32, f16 and bf16 tensors can be quantized",
                         t.name, dtype_name(t.dtype));
  const int64_t cols = t.shape.back();
  const size_t src_row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
  scratch.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = source_row ? source_row(row0 + r) : row0 + r;
    to_f32(static_cast<const uint8_t*>(t.data) + src * src_row_bytes, t.dtype, cols,
           &scratch[static_cast<size_t>(r * cols)]);
  }
  Status st = quantize_rows(type, scratch.data(), out, rows, cols, pool);
  if (!st.ok()) return InvalidArgument("tensor {}: {}", t.name, st.message());
  return Status::Ok();
}

std::string QuantizationSummary::describe() const {
  if (already_quantized) return fmt::format("{}: the weights are already quantized as asked", value);
  int n = 0;
  for (const auto& [type, k] : matrices) n += k;
  return fmt::format("{}: {} weight matrices -> {}, {:.1f} MiB -> {:.1f} MiB in {:.2f} s", value,
                     n, join_counts(matrices), mib(bytes_before), mib(bytes_after), seconds);
}

Expected<QuantizationPlan> plan_quantization_flag(const ModelFile& file, std::string_view value) {
  const std::optional<QuantScheme> scheme = find_quantization_flag(value);
  if (!scheme)
    return InvalidArgument("--quantization: unknown value '{}' (known: {})", value,
                           quantization_flag_names());
  QuantizationPlan plan;
  // Already quantized (a llama-quantize file): fine when its main type is the one asked for.
  std::map<DType, int64_t> elements;
  for (const TensorView* t : file.tensors()) {
    if (!is_quantized(t->dtype)) continue;
    ++plan.present[t->dtype];
    elements[t->dtype] += t->numel();
  }
  if (!plan.present.empty()) {
    // Exactly what the value would make of these shapes, fallbacks included (a file written
    // by `llmserve quantize` or llama-quantize with that type, e.g. Q4_K_M over rows of 172
    // values: Q5_0 and Q8_0): as asked, whatever its main type.
    if (auto same = plan_model_quantization(file, *scheme); same.ok()) {
      const bool exact = std::all_of(same->begin(), same->end(), [](const TensorPlan& p) {
        return p.type == p.tensor->dtype;
      });
      if (exact) {
        plan.already_quantized = true;
        return plan;
      }
    }
    const DType main = std::max_element(elements.begin(), elements.end(), [](auto& a, auto& b) {
                         return a.second < b.second;
                       })->first;
    if (main != scheme->base) {
      // Suggest the flag value that matches, when there is one (IQ4_NL, Q2_K, ... have none).
      const std::string match = lower(dtype_ggml_name(main));
      const std::string hint = find_quantization_flag(match)
                                   ? fmt::format("pass --quantization {} or leave the flag out", match)
                                   : std::string("leave the flag out");
      return InvalidArgument("--quantization {}: {} is already quantized (tensors: {}; mostly "
                             "{}); {}", value, file.path(), join_counts(plan.present),
                             dtype_ggml_name(main), hint);
    }
    plan.already_quantized = true;
    return plan;
  }
  auto planned = plan_model_quantization(file, *scheme);
  if (!planned.ok())
    return Status(planned.status().code(),
                  fmt::format("--quantization {}: {}", value, planned.status().message()));
  for (const TensorPlan& p : *planned)
    if (p.type != p.tensor->dtype) plan.changes.push_back(p);
  return plan;
}

Expected<QuantizationSummary> apply_quantization(ModelFile& file, std::string_view value,
                                                 ThreadPool* pool) {
  LLMS_ASSIGN_OR_RETURN(QuantizationPlan plan, plan_quantization_flag(file, value));
  QuantizationSummary sum;
  sum.value = std::string(value);
  if (plan.already_quantized) {
    sum.already_quantized = true;
    spdlog::info("{} ({})", sum.describe(), join_counts(plan.present));
    return sum;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> scratch;
  for (const TensorPlan& p : plan.changes) {
    const TensorView& t = *p.tensor;
    const int64_t cols = t.shape.back(), rows = t.numel() / cols;
    const size_t bytes = static_cast<size_t>(rows * dtype_row_bytes(p.type, cols));
    std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes]);
    // Chunks of rows bound the float32 scratch (about 4 MiB) whatever the tensor's size.
    const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / cols);
    for (int64_t r = 0; r < rows; r += chunk) {
      const int64_t n = std::min(chunk, rows - r);
      Status st = quantize_tensor_rows(t, p.type, r, n, nullptr, scratch,
                                       buf.get() + r * dtype_row_bytes(p.type, cols), pool);
      if (!st.ok())
        return Status(st.code(), fmt::format("--quantization {}: {}: {}", value, file.path(),
                                             st.message()));
    }
    sum.bytes_before += t.nbytes;
    sum.bytes_after += bytes;
    ++sum.matrices[p.type];
    LLMS_RETURN_IF_ERROR(file.replace_tensor(p.gguf_name, p.type, std::move(buf), bytes));
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{}", sum.describe());
  return sum;
}

}  // namespace llmserve
