// GGUF reader: GgufFile::open on arbitrary bytes, then every accessor, every tensor view (the
// first rows of each dequantized, so the dequantizer never reads past a tensor's bytes), and
// the GGUF tokenizer loader (tokenizer.ggml.*) on whatever metadata parsed.
#include <cstddef>
#include <cstdint>

#include <algorithm>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "quant/dequantize_ref.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"

using namespace llmserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  auto gguf = GgufFile::open(path);
  if (!gguf.ok()) return 0;
  for (const auto& t : gguf->tensors()) {
    fuzz::touch_view(t, size);
    const int64_t row = t.shape.empty() ? 1 : t.shape.back();
    const int64_t rows = std::min<int64_t>(t.numel() / row, 4);
    if (row <= (int64_t{1} << 16)) {
      static std::vector<float> out;
      out.resize(static_cast<size_t>(row));
      for (int64_t r = 0; r < rows; ++r)
        dequantize_row_ref(t.dtype,
                           static_cast<const uint8_t*>(t.data) + r * dtype_row_bytes(t.dtype, row),
                           out.data(), row);
    }
    FUZZ_CHECK(gguf->find_tensor(t.name) != nullptr, "tensor %s not found by name", t.name.c_str());
  }
  for (const auto& [key, value] : gguf->metadata()) {
    (void)gguf->get_int(key);
    (void)gguf->get_float(key);
    (void)gguf->get_bool(key);
    (void)gguf->get_string(key);
    (void)gguf->get_string_array(key);
    (void)gguf->get_float_array(key);
    (void)gguf->get_int_array(key);
  }
  auto tok = load_tokenizer_from_gguf(*gguf);
  if (tok.ok()) {
    const Tokenizer& t = **tok;
    static const char* kTexts[] = {"Hello world", " a  b\n\tc", "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80",
                                   "<s></s><|endoftext|>", "\xff\xfe"};
    for (const char* text : kTexts) {
      for (int mode = 0; mode < 2; ++mode) {
        EncodeOptions opt;
        opt.add_special = mode == 1;
        opt.parse_special = mode == 1;
        const std::vector<int32_t> ids = t.encode(text, opt);
        for (int32_t id : ids) {
          FUZZ_CHECK(id >= 0 && id < t.vocab_size(), "id %d outside vocab %d", id, t.vocab_size());
        }
        (void)t.decode(ids, DecodeOptions{});
      }
    }
  }
  return 0;
}
