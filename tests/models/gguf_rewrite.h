// Test helper: re-encodes a GGUF file with its weight tensors (two or more dimensions) stored
// as F16 or BF16 (or as F32 holding the same rounded values), metadata copied unchanged.
// Written from the GGUF spec (ggml docs/gguf.md) independently of src/weights.
#pragma once

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "model_test_util.h"
#include "weights/gguf.h"

namespace llmserve::testing {

enum class Rewrite { kF32, kF16, kBF16, kF32RoundedF16, kF32RoundedBF16 };

class GgufEncoder {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufType::kUint8: put<uint8_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kInt8: put<int8_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kUint16: put<uint16_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kInt16: put<int16_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kUint32: put<uint32_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kInt32: put<int32_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kUint64: put<uint64_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kInt64: put<int64_t>(std::get<int64_t>(v.value)); break;
      case GgufType::kFloat32: put<float>(static_cast<float>(std::get<double>(v.value))); break;
      case GgufType::kFloat64: put<double>(std::get<double>(v.value)); break;
      case GgufType::kBool: put<uint8_t>(std::get<bool>(v.value) ? 1 : 0); break;
      case GgufType::kString: str(std::get<std::string>(v.value)); break;
      case GgufType::kArray: {
        const auto& a = std::get<GgufValue::Array>(v.value);
        put<uint32_t>(static_cast<uint32_t>(a.elem_type));
        put<uint64_t>(a.items.size());
        for (const auto& item : a.items) value(item);
        break;
      }
    }
  }
  std::vector<uint8_t> out;
};

/// Writes `src` to `dst` with every tensor of two or more dimensions converted per `mode`;
/// 1-D tensors stay F32.
/// `metadata_overrides` adds or replaces metadata keys.
inline void rewrite_gguf(const GgufFile& src, const std::string& dst, Rewrite mode,
                         const std::map<std::string, GgufValue>& metadata_overrides = {}) {
  std::map<std::string, GgufValue, std::less<>> metadata = src.metadata();
  for (const auto& [key, v] : metadata_overrides) metadata[key] = v;
  GgufEncoder e;
  e.out.insert(e.out.end(), {'G', 'G', 'U', 'F'});
  e.put<uint32_t>(3);
  e.put<uint64_t>(src.tensors().size());
  e.put<uint64_t>(metadata.size());
  for (const auto& [key, v] : metadata) {
    e.str(key);
    e.put<uint32_t>(static_cast<uint32_t>(v.type));
    e.value(v);
  }
  std::vector<std::vector<uint8_t>> blobs;
  uint64_t offset = 0;
  for (const TensorView& t : src.tensors()) {
    const float* f = static_cast<const float*>(t.data);  // the synthetic models are F32
    std::vector<uint8_t> blob;
    uint32_t type = 0;
    const bool convert = t.shape.size() >= 2;
    for (int64_t i = 0; i < t.numel(); ++i) {
      float x = f[i];
      if (convert && (mode == Rewrite::kF16 || mode == Rewrite::kBF16)) {
        const uint16_t h = mode == Rewrite::kF16 ? f32_to_f16(x) : f32_to_bf16(x);
        blob.push_back(h & 0xff);
        blob.push_back(h >> 8);
        type = mode == Rewrite::kF16 ? 1 : 30;
        continue;
      }
      if (convert && mode == Rewrite::kF32RoundedF16) x = f16_to_f32(f32_to_f16(x));
      if (convert && mode == Rewrite::kF32RoundedBF16) x = bf16_to_f32(f32_to_bf16(x));
      const auto* p = reinterpret_cast<const uint8_t*>(&x);
      blob.insert(blob.end(), p, p + 4);
    }
    e.str(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) e.put<uint64_t>(*it);
    e.put<uint32_t>(type);
    e.put<uint64_t>(offset);
    offset += (blob.size() + 31) / 32 * 32;
    blobs.push_back(std::move(blob));
  }
  while (e.out.size() % 32) e.out.push_back(0);
  for (auto& b : blobs) {
    e.out.insert(e.out.end(), b.begin(), b.end());
    while (e.out.size() % 32) e.out.push_back(0);
  }
  std::ofstream(dst, std::ios::binary).write(reinterpret_cast<const char*>(e.out.data()),
                                             static_cast<std::streamsize>(e.out.size()));
}

/// Writes a GGUF v3 file with `src`'s metadata and `tensors` (F32), per ggml docs/gguf.md.
/// `metadata` (default: src's) replaces the metadata key/values.
inline void write_gguf(const GgufFile& src, const std::vector<OutTensor>& tensors,
                const std::string& dst,
                const std::map<std::string, GgufValue, std::less<>>* metadata = nullptr) {
  const auto& meta = metadata != nullptr ? *metadata : src.metadata();
  testing::GgufEncoder e;
  e.out.insert(e.out.end(), {'G', 'G', 'U', 'F'});
  e.put<uint32_t>(3);
  e.put<uint64_t>(tensors.size());
  e.put<uint64_t>(meta.size());
  for (const auto& [key, v] : meta) {
    e.str(key);
    e.put<uint32_t>(static_cast<uint32_t>(v.type));
    e.value(v);
  }
  uint64_t offset = 0;
  for (const OutTensor& t : tensors) {
    e.str(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) e.put<uint64_t>(*it);
    e.put<uint32_t>(0);  // F32
    e.put<uint64_t>(offset);
    offset += (t.data.size() * 4 + 31) / 32 * 32;
  }
  while (e.out.size() % 32) e.out.push_back(0);
  for (const OutTensor& t : tensors) {
    const auto* p = reinterpret_cast<const uint8_t*>(t.data.data());
    e.out.insert(e.out.end(), p, p + t.data.size() * 4);
    while (e.out.size() % 32) e.out.push_back(0);
  }
  std::ofstream(dst, std::ios::binary)
      .write(reinterpret_cast<const char*>(e.out.data()),
             static_cast<std::streamsize>(e.out.size()));
}

}  // namespace llmserve::testing
