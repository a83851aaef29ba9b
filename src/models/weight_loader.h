// WeightLoader: fetches a model's tensors by GGUF name from a ModelFile and checks their
// shapes against the model config, so that every model loader reports a missing or misshapen
// tensor the same way (one line naming the file and the tensor), and converts float weights to
// --dtype when asked. Shared by llama.cc and deepseek2.cc, so every architecture and every
// format (GGUF, HF safetensors, llama2.c) loads through it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/status.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "models/model_file.h"
#include "quant/scale_check.h"

namespace llmserve {

class WeightLoader {
 public:
  /// `file` must outlive the loader and every matrix it returns (they borrow its mapping).
  /// `dtype` (--dtype; nullopt = auto): the type data() and matrix() convert float tensors to.
  explicit WeightLoader(const ModelFile& file, std::optional<DType> dtype = std::nullopt)
      : file_(file), dtype_(dtype) {}

  /// A weight tensor's elements as the model uses them: the file's bytes in place, or an owned
  /// copy converted to --dtype (`storage` keeps it alive; share it with views into it).
  struct Data {
    const void* data = nullptr;
    DType dtype = DType::kF32;
    std::shared_ptr<const void> storage;  // null when `data` points into the file's mapping
  };

  /// The tensor `name` with exactly `shape` (outermost first, PyTorch order), any dtype.
  /// Errors: NotFound (absent), DataLoss (shape differs, or a quantized block's scale is NaN
  /// or infinite: quant/scale_check.h), each naming file and tensor.
  Expected<const TensorView*> tensor(const std::string& name, const std::vector<int64_t>& shape) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, file_.tensor(name));
    LLMS_RETURN_IF_ERROR(check_shape(*t, shape));
    if (used_.insert(t).second && is_quantized(t->dtype)) {
      const quant::BadScale bad = quant::first_nonfinite_scale(
          t->dtype, t->data, static_cast<int64_t>(t->nbytes) / dtype_block_bytes(t->dtype));
      if (bad.block >= 0)
        return DataLoss("{}: tensor {} ({}): block {} has a non-finite scale ({} = {})",
                        file_.path(), t->name, dtype_ggml_name(t->dtype), bad.block, bad.field,
                        bad.value);
    }
    return t;
  }

  /// Marks a tensor as consumed without loading it (e.g. output.weight of a tied model, or
  /// rope_freqs.weight that the config already read). Absent names are ignored.
  void mark_used(const std::string& name) {
    if (const TensorView* t = file_.find_tensor(name)) used_.insert(t);
  }

  /// Every tensor of the file must have been loaded (or marked): a tensor the model would
  /// ignore means the checkpoint needs a feature the model lacks (a q/k norm on a llama
  /// config, MoE experts, ...), which would otherwise give silently wrong logits.
  /// Errors: Unimplemented naming the file, the first unused tensor (as the file names it)
  /// and the architecture.
  Status check_all_used() const {
    for (const TensorView* t : file_.tensors())
      if (!used_.count(t))
        return Unimplemented("{}: tensor {} is not used by the {} architecture as configured "
                             "(an unsupported feature, or a config that does not match the "
                             "weights)", file_.path(), t->name, file_.config().architecture);
    return Status::Ok();
  }

  /// The weight tensor `name` with exactly `shape` (two or more dimensions), converted to
  /// --dtype when that names another float type. Only F32/F16/BF16 tensors are converted
  /// (is_float_dtype); a tensor of any other type is returned as stored, untouched.
  Expected<Data> data(const std::string& name, const std::vector<int64_t>& shape) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, tensor(name, shape));
    if (!dtype_ || *dtype_ == t->dtype || !is_float_dtype(t->dtype)) {
      if (dtype_) ++kept_;
      return Data{t->data, t->dtype, nullptr};
    }
    const int64_t n = t->numel();
    auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[n * dtype_size(*dtype_)]);
    convert_dtype(t->data, t->dtype, buf.get(), *dtype_, n);
    Converted& c = converted_[t->dtype];
    ++c.tensors;
    c.bytes_before += static_cast<int64_t>(t->nbytes);
    c.bytes_after += n * static_cast<int64_t>(dtype_size(*dtype_));
    return Data{buf.get(), *dtype_, buf};
  }

  /// A 2-D weight [rows, cols]: in place in the file dtype, or converted (see data()).
  Expected<WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    LLMS_ASSIGN_OR_RETURN(Data d, data(name, {rows, cols}));
    WeightMatrix m;
    m.data = d.data;
    m.dtype = d.dtype;
    m.rows = rows;
    m.cols = cols;
    m.storage = std::move(d.storage);
    return m;
  }

  /// The n experts' [rows, cols] matrices of one projection of a mixture-of-experts layer:
  /// views of the stacked 3-D tensor `stacked` [n, rows, cols] (llama.cpp's ffn_*_exps,
  /// experts outermost; quantized rows are whole blocks, so an expert is a run of rows), or,
  /// when the file has no such tensor, the 2-D tensors `per_expert_prefix` + "E.weight" (HF
  /// mlp.experts.E.*, mapped by hf_config.h; older Mixtral GGUFs). Errors as matrix().
  Expected<std::vector<WeightMatrix>> experts(const std::string& stacked, const std::string& per_expert_prefix,
                                              int64_t n, int64_t rows, int64_t cols) {
    std::vector<WeightMatrix> out;
    if (file_.find_tensor(stacked) == nullptr && file_.find_tensor(per_expert_prefix + "0.weight") != nullptr) {
      for (int64_t e = 0; e < n; ++e) {
        LLMS_ASSIGN_OR_RETURN(WeightMatrix m, matrix(per_expert_prefix + std::to_string(e) + ".weight", rows, cols));
        out.push_back(std::move(m));
      }
      return out;
    }
    LLMS_ASSIGN_OR_RETURN(Data d, data(stacked, {n, rows, cols}));
    const int64_t expert_bytes = rows * dtype_row_bytes(d.dtype, cols);
    for (int64_t e = 0; e < n; ++e) {
      WeightMatrix m;
      m.data = static_cast<const uint8_t*>(d.data) + e * expert_bytes;
      m.dtype = d.dtype;
      m.rows = rows;
      m.cols = cols;
      m.storage = d.storage;
      out.push_back(std::move(m));
    }
    return out;
  }

  /// With --dtype: one info line saying what was converted (per source dtype: tensors and
  /// bytes) and what was already in that dtype or of another type. Without: nothing.
  void log_conversions() const {
    if (!dtype_) return;
    std::string what;
    int64_t total = 0;
    for (const auto& [from, c] : converted_) {
      what += fmt::format("{}{} {} -> {} ({:.2f} -> {:.2f} MiB)", what.empty() ? "" : ", ",
                          c.tensors, dtype_name(from), dtype_name(*dtype_),
                          c.bytes_before / 1048576.0, c.bytes_after / 1048576.0);
      total += c.tensors;
    }
    spdlog::info("--dtype {}: {} weight tensors converted at load{}{}; {} kept as stored "
                 "(already {} or not a float type); norms and biases stay f32",
                 dtype_name(*dtype_), total, what.empty() ? "" : ": ", what, kept_,
                 dtype_name(*dtype_));
  }

  /// A 1-D tensor [n] converted to float32 (norm weights; a quantized one is dequantized
  /// here, once, though llama-quantize keeps norms F32).
  Expected<std::vector<float>> vector(const std::string& name, int64_t n) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, tensor(name, {n}));
    std::vector<float> out(n);
    to_f32(t->data, t->dtype, n, out.data());
    return out;
  }

  const ModelFile& file() const { return file_; }

 private:
  Status check_shape(const TensorView& t, const std::vector<int64_t>& want) {
    if (t.shape != want)
      return DataLoss("{}: tensor {} has shape [{}], expected [{}] from the model config",
                      file_.path(), t.name, fmt::join(t.shape, ", "), fmt::join(want, ", "));
    return Status::Ok();
  }
  struct Converted {
    int64_t tensors = 0, bytes_before = 0, bytes_after = 0;
  };
  const ModelFile& file_;
  std::optional<DType> dtype_;
  std::map<DType, Converted> converted_;  // by source dtype
  int64_t kept_ = 0;                      // weight tensors --dtype left as they were
  std::unordered_set<const TensorView*> used_;
};

/// The ends of a decoder every architecture shares: the token embedding [vocab, dim], the final
/// RMSNorm [dim] and the classifier [vocab, dim] (the embedding itself when tied; a stored
/// output.weight is then marked used and ignored, as transformers does).
struct EmbeddingAndHead {
  WeightMatrix embedding, classifier;
  std::vector<float> final_norm;
};
inline Expected<EmbeddingAndHead> load_embedding_and_head(WeightLoader& w, const ModelConfig& c) {
  EmbeddingAndHead e;
  LLMS_ASSIGN_OR_RETURN(e.embedding, w.matrix("token_embd.weight", c.vocab_size, c.dim));
  LLMS_ASSIGN_OR_RETURN(e.final_norm, w.vector("output_norm.weight", c.dim));
  if (c.tie_word_embeddings) {
    e.classifier = e.embedding;
    w.mark_used("output.weight");
  } else {
    LLMS_ASSIGN_OR_RETURN(e.classifier, w.matrix("output.weight", c.vocab_size, c.dim));
  }
  return e;
}

}  // namespace llmserve
