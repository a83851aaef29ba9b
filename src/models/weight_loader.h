// WeightLoader: fetches a model's tensors by GGUF name from a ModelFile and checks their
// shapes against the model config, so that every model loader reports a missing or misshapen
// tensor the same way (one line naming the file and the tensor). Shared by llama.cc and
// deepseek2.cc.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "models/model_file.h"

namespace llmserve {

class WeightLoader {
 public:
  /// `file` must outlive the loader and every matrix it returns (they borrow its mapping).
  explicit WeightLoader(const ModelFile& file) : file_(file) {}

  /// The tensor `name` with exactly `shape` (outermost first, PyTorch order), any dtype.
  /// Errors: NotFound (absent), DataLoss (shape differs), both naming file and tensor.
  Expected<const TensorView*> tensor(const std::string& name, const std::vector<int64_t>& shape) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, file_.tensor(name));
    LLMS_RETURN_IF_ERROR(check_shape(*t, shape));
    used_.insert(t);
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

  /// A 2-D weight [rows, cols] viewed in place (file dtype, not copied; quantized types stay
  /// quantized: the GGUF reader has checked cols is whole blocks).
  Expected<WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    LLMS_ASSIGN_OR_RETURN(const TensorView* t, tensor(name, {rows, cols}));
    WeightMatrix m;
    m.data = t->data;
    m.dtype = t->dtype;
    m.rows = rows;
    m.cols = cols;
    return m;
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
  const ModelFile& file_;
  std::unordered_set<const TensorView*> used_;
};

}  // namespace llmserve
