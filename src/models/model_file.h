// ModelFile: an opened model checkpoint of any supported format (GGUF, llama2.c .bin), with
// the hyperparameters it declares and its tensors under GGUF names. Owns the mapping; models
// built from it borrow the tensor data, so it must outlive them.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "config/model_config.h"
#include "weights/gguf.h"
#include "weights/llama2c.h"

namespace llmserve {

class ModelFile {
 public:
  enum class Format { kGguf, kLlama2c };

  /// Opens `path`, choosing the format by its magic ("GGUF" or else llama2.c), and reads the
  /// ModelConfig (validated). Errors name the file and the problem: NotFound, DataLoss,
  /// Unimplemented (architecture other than llama), InvalidArgument (inconsistent metadata).
  static Expected<std::unique_ptr<ModelFile>> open(const std::string& path);

  Format format() const { return format_; }
  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  /// Non-null only for GGUF files (the tokenizer reads its vocabulary metadata).
  const GgufFile* gguf() const { return gguf_ ? &*gguf_ : nullptr; }

  /// Tensor by GGUF name, or NotFound naming the file and the tensor.
  Expected<const TensorView*> tensor(std::string_view name) const;
  /// Tensor by name, or nullptr if absent (for optional tensors).
  const TensorView* find_tensor(std::string_view name) const;

 private:
  Format format_ = Format::kGguf;
  std::string path_;
  ModelConfig config_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Llama2cCheckpoint> llama2c_;
};

}  // namespace llmserve
