// Hugging Face safetensors reader (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {...}}, then the tensor bytes (offsets relative to 8 + N).
// Memory-mapped; tensors are views into the mapping. Sharded checkpoints
// (model.safetensors.index.json with a "weight_map" of tensor name -> shard file) are opened
// as one SafetensorsModel.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "weights/mapped_file.h"
#include "weights/tensor_view.h"

namespace llmserve {

class SafetensorsFile {
 public:
  /// Opens and validates one .safetensors file. Errors (one line, naming the file and the
  /// tensor or field): NotFound (cannot open); DataLoss for a header length beyond the file,
  /// invalid JSON, a malformed entry, data offsets outside the data section, a byte size that
  /// does not match dtype x shape, or overlapping tensors; Unimplemented for a dtype other than
  /// F32/F16/BF16 (naming the tensor and the dtype).
  static Expected<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  /// Tensors sorted by data offset; shapes row-major outermost-first (as stored).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  /// nullptr if absent.
  const TensorView* find_tensor(std::string_view name) const;
  /// The "__metadata__" string map (empty if absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

/// The weights of a Hugging Face model directory: model.safetensors, or the shards listed by
/// model.safetensors.index.json.
class SafetensorsModel {
 public:
  /// Errors: NotFound when the directory has neither file; DataLoss for an invalid index (bad
  /// JSON, no weight_map, a shard path outside the directory) or when a tensor the index names
  /// is missing from its shard, or a tensor name appears in two shards; plus
  /// SafetensorsFile::open's errors for each shard.
  static Expected<SafetensorsModel> open_dir(const std::string& dir);

  /// nullptr if absent.
  const TensorView* find_tensor(std::string_view name) const;
  /// Every tensor of every shard.
  std::vector<const TensorView*> tensors() const;
  size_t num_shards() const { return shards_.size(); }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const TensorView*, std::less<>> by_name_;
};

}  // namespace llmserve
