// ModelFile: an opened model checkpoint of any supported format (GGUF, llama2.c .bin, Hugging
// Face directory with config.json + safetensors), with the hyperparameters it declares and its
// tensors under GGUF names (HF names are mapped on open). Owns the mappings; models built from
// it borrow the tensor data, so it must outlive them.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/model_config.h"
#include "weights/gguf.h"
#include "weights/llama2c.h"
#include "weights/safetensors.h"

namespace llmserve {

/// Generation defaults a checkpoint declares (HF generation_config.json, else config.json's
/// token ids; GGUF tokenizer.ggml.{bos,eos}_token_id). Unset fields stay empty.
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;  // every id that ends generation
  int32_t bos_token_id = -1;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  /// HF max_new_tokens: the default max_tokens of requests that send none, capped by the
  /// context's room (vLLM's rule; LLMEngine::default_max_tokens).
  std::optional<int32_t> max_new_tokens;
};

class ModelFile {
 public:
  enum class Format { kGguf, kLlama2c, kHfDir };

  /// Opens `path`: a directory is a Hugging Face model (config.json, model.safetensors or
  /// model.safetensors.index.json, optional generation_config.json); a file is GGUF (by its
  /// magic) or else llama2.c. Reads the ModelConfig (validated). Errors are one line naming
  /// the file and the key or tensor: NotFound, DataLoss, Unimplemented (unknown architecture,
  /// MoE layers, sliding window, unsupported rope_scaling type or dtype), InvalidArgument
  /// (inconsistent metadata / config.json).
  static Expected<std::unique_ptr<ModelFile>> open(const std::string& path);

  Format format() const { return format_; }
  /// The file, or the directory for kHfDir.
  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation_config() const { return generation_; }
  /// Every tensor of the checkpoint (for parameter counts), in file order.
  std::vector<const TensorView*> tensors() const;
  /// kHfDir: path of tokenizer.json when the directory has one, else "".
  const std::string& tokenizer_json_path() const { return tokenizer_json_; }
  /// Non-null only for GGUF files (the tokenizer reads its vocabulary metadata).
  const GgufFile* gguf() const { return gguf_ ? &*gguf_ : nullptr; }

  /// Tensor by GGUF name, or NotFound naming the file and the tensor.
  Expected<const TensorView*> tensor(std::string_view name) const;
  /// Tensor by name, or nullptr if absent (for optional tensors).
  const TensorView* find_tensor(std::string_view name) const;

  /// Replaces the data of tensor `gguf_name` by `data` in `dtype` (load-time quantization,
  /// --quantization): same name and shape; from then on find_tensor, tensor and tensors()
  /// return the replacement, and config().weight_dtype follows token_embd.weight as open()
  /// sets it. `data` (kept alive by the ModelFile) holds rows of dtype_row_bytes(dtype,
  /// shape.back()) bytes. Call before building a model from the file (models borrow the
  /// views; replacing a tensor twice frees the first replacement). Errors: NotFound (no such
  /// tensor), InvalidArgument (`nbytes` does not match the shape in that dtype).
  Status replace_tensor(std::string_view gguf_name, DType dtype, std::shared_ptr<const void> data,
                        size_t nbytes);

 private:
  Status open_hf_dir();

  Format format_ = Format::kGguf;
  std::string path_;
  ModelConfig config_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Llama2cCheckpoint> llama2c_;
  std::unique_ptr<SafetensorsModel> safetensors_;
  std::map<std::string, const TensorView*, std::less<>> hf_by_gguf_name_;  // kHfDir
  std::set<const TensorView*> not_loaded_;  // kHfDir: a Gemma 3 vision tower (not in tensors())
  GenerationConfig generation_;
  std::string tokenizer_json_;
  // replace_tensor: for each replaced tensor (the file's view), its replacement and the
  // bytes that points to.
  struct Replacement {
    std::unique_ptr<TensorView> view;
    std::shared_ptr<const void> data;
  };
  std::map<const TensorView*, Replacement> replaced_;
};

}  // namespace llmserve
