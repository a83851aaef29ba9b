#include "weights/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace llmserve {
namespace {

Expected<DType> parse_dtype(const std::string& path, const std::string& name,
                            const std::string& dt) {
  if (dt == "F32") return DType::kF32;
  if (dt == "F16") return DType::kF16;
  if (dt == "BF16") return DType::kBF16;
  return Unimplemented("{}: tensor '{}' has dtype {} (supported: F32, F16, BF16)", path, name, dt);
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  LLMS_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  const uint8_t* base = f.file_.data();
  const uint64_t size = f.file_.size();
  if (size < 8) return DataLoss("{}: {} bytes, too short for a safetensors header", path, size);
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);  // little-endian on every machine we target
  if (header_len > size - 8)
    return DataLoss("{}: header length {} exceeds the file ({} bytes)", path, header_len, size);
  nlohmann::json header = nlohmann::json::parse(base + 8, base + 8 + header_len, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return DataLoss("{}: the header is not a JSON object", path);
  const uint8_t* data = base + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return DataLoss("{}: __metadata__ is not an object", path);
      for (auto& [k, v] : entry.items())
        if (v.is_string()) f.metadata_[k] = v.get<std::string>();
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() ||
        !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      return DataLoss("{}: tensor '{}' needs dtype, shape and data_offsets [begin, end]", path,
                      name);
    TensorView t;
    t.name = name;
    LLMS_ASSIGN_OR_RETURN(t.dtype, parse_dtype(path, name, entry["dtype"].get<std::string>()));
    uint64_t numel = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
        return DataLoss("{}: tensor '{}' has an invalid shape {}", path, name,
                        entry["shape"].dump());
      t.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      if (__builtin_mul_overflow(numel, d.get<uint64_t>(), &numel) || numel > (uint64_t{1} << 40))
        return DataLoss("{}: tensor '{}' is absurdly large", path, name);
    }
    const auto& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return DataLoss("{}: tensor '{}' has non-integer data_offsets", path, name);
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return DataLoss("{}: tensor '{}' data [{}, {}) lies outside the data section ({} bytes)",
                      path, name, begin, end, data_size);
    t.nbytes = static_cast<size_t>(end - begin);
    if (t.nbytes != numel * dtype_size(t.dtype))
      return DataLoss("{}: tensor '{}' has {} bytes, but {} {} elements need {}", path, name,
                      t.nbytes, numel, dtype_name(t.dtype), numel * dtype_size(t.dtype));
    t.data = data + begin;
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.data < b.data; });
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    const TensorView& t = f.tensors_[i];
    if (i > 0) {
      const TensorView& p = f.tensors_[i - 1];
      if (static_cast<const uint8_t*>(p.data) + p.nbytes > static_cast<const uint8_t*>(t.data))
        return DataLoss("{}: tensors '{}' and '{}' overlap", path, p.name, t.name);
    }
    f.index_[t.name] = i;
  }
  return f;
}

const TensorView* SafetensorsFile::find_tensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Expected<SafetensorsModel> SafetensorsModel::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsModel m;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  // symlink_status: a dangling link or a loop still counts as "present" (and then fails to
  // open with a clear error) instead of throwing.
  auto present = [&](const fs::path& p) {
    return fs::exists(fs::symlink_status(p, ec)) && !ec;
  };
  if (present(index_path)) {
    LLMS_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path.string()));
    nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object())
      return DataLoss("{}: not a JSON object with a \"weight_map\"", index_path.string());
    std::map<std::string, size_t> shard_of_file;
    for (auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        return DataLoss("{}: weight_map['{}'] is not a file name", index_path.string(), name);
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
        return DataLoss("{}: shard '{}' is not a file in the model directory",
                        index_path.string(), shard);
      if (!shard_of_file.count(shard)) {
        LLMS_ASSIGN_OR_RETURN(SafetensorsFile f,
                              SafetensorsFile::open((fs::path(dir) / shard).string()));
        shard_of_file[shard] = m.shards_.size();
        m.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
      }
      const SafetensorsFile& f = *m.shards_[shard_of_file[shard]];
      const TensorView* t = f.find_tensor(name);
      if (t == nullptr)
        return DataLoss("{}: tensor '{}' is listed in {} but missing from {}", dir, name,
                        index_path.filename().string(), f.path());
    }
  } else if (present(single_path)) {
    LLMS_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(single_path.string()));
    m.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
  } else {
    return NotFound("{}: neither model.safetensors nor model.safetensors.index.json", dir);
  }
  for (const auto& shard : m.shards_)
    for (const TensorView& t : shard->tensors()) {
      if (!m.by_name_.emplace(t.name, &t).second)
        return DataLoss("{}: tensor '{}' appears in two shards", dir, t.name);
    }
  return m;
}

const TensorView* SafetensorsModel::find_tensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const TensorView*> SafetensorsModel::tensors() const {
  std::vector<const TensorView*> out;
  for (const auto& [name, t] : by_name_) out.push_back(t);
  return out;
}

}  // namespace llmserve
