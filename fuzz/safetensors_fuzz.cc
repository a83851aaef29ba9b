// safetensors reader: SafetensorsFile::open on arbitrary bytes (8-byte header length, JSON
// header, data), then every tensor view and the metadata.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "weights/safetensors.h"

using namespace llmserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file;
  auto st = SafetensorsFile::open(file.write(data, size));
  if (!st.ok()) return 0;
  const uint8_t* prev_end = nullptr;
  for (const auto& t : st->tensors()) {
    fuzz::touch_view(t, size);
    FUZZ_CHECK(st->find_tensor(t.name) != nullptr, "tensor %s not found by name", t.name.c_str());
    // Sorted by offset and not overlapping (the reader promises both).
    const auto* begin = static_cast<const uint8_t*>(t.data);
    if (prev_end != nullptr && t.nbytes > 0) {
      FUZZ_CHECK(begin >= prev_end, "tensor %s overlaps its predecessor", t.name.c_str());
    }
    if (t.nbytes > 0) prev_end = begin + t.nbytes;
  }
  size_t n = 0;
  for (const auto& [k, v] : st->metadata()) n += k.size() + v.size();
  FUZZ_CHECK(n <= size, "metadata larger than the input");
  return 0;
}
