// Tokenizers: encode arbitrary text with a SentencePiece vocabulary (stories260K, 512 tokens)
// and a byte-level BPE one (GPT-2, 50257 tokens), with and without special-token parsing; decode
// the ids and arbitrary id sequences; an IncrementalDetokenizer's chunks must concatenate to
// decode(ids, {skip_special, no clean-up}) and the decoded text must be valid UTF-8.
// Input: byte 0 = options, then the text (or, with bit 2, little-endian 16-bit ids).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

using namespace llmserve;

namespace {

std::unique_ptr<Tokenizer> g_tok[2];

std::unique_ptr<Tokenizer> load(const std::string& path) {
  auto tok = load_tokenizer_from_path(path);
  if (!tok.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\n", tok.status().message().c_str());
    std::abort();
  }
  return std::move(*tok);
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

void check_decode(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
  DecodeOptions opt;
  opt.skip_special_tokens = skip_special;
  opt.clean_up_tokenization_spaces = false;
  const std::string whole = t.decode(ids, opt);
  FUZZ_CHECK(valid_utf8(whole), "decode gave invalid UTF-8");
  IncrementalDetokenizer detok(t, -1, skip_special);
  std::string chunks;
  for (int32_t id : ids) {
    const std::string c = detok.push(id);
    FUZZ_CHECK(valid_utf8(c), "IncrementalDetokenizer chunk is invalid UTF-8");
    chunks += c;
  }
  chunks += detok.flush();
  FUZZ_CHECK(chunks == whole, "incremental detokenization (%zu bytes) != decode (%zu bytes)",
             chunks.size(), whole.size());
  opt.clean_up_tokenization_spaces = true;
  FUZZ_CHECK(valid_utf8(t.decode(ids, opt)), "decode with clean-up gave invalid UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tok[0] = load(LLMSERVE_SHARED_DIR "/models/stories260K/stories260K.gguf");
  g_tok[1] = load(LLMSERVE_SHARED_DIR "/testdata/tokenizer/ggml-vocab-gpt-2.gguf");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const uint8_t flags = data[0];
  const Tokenizer& t = *g_tok[flags & 1];
  const bool skip_special = flags & 2;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (flags & 4) {  // arbitrary ids, some out of range
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < rest.size(); i += 2) {
      uint16_t v;
      std::memcpy(&v, rest.data() + i, 2);
      ids.push_back(static_cast<int32_t>(v % (t.vocab_size() + 8)) - 4);
    }
    check_decode(t, ids, skip_special);
    for (int32_t id : ids) (void)t.piece(id), (void)t.is_special(id);
    return 0;
  }
  EncodeOptions opt;
  opt.add_special = flags & 8;
  opt.parse_special = flags & 16;
  const std::vector<int32_t> ids = t.encode(rest, opt);
  FUZZ_CHECK(rest.empty() || !ids.empty() || opt.parse_special, "non-empty text gave no tokens");
  for (int32_t id : ids) {
    FUZZ_CHECK(id >= 0 && id < t.vocab_size(), "id %d outside vocab %d", id, t.vocab_size());
  }
  check_decode(t, ids, skip_special);
  // Byte-level BPE is lossless on any text without special tokens.
  if ((flags & 1) == 1 && !opt.add_special && !opt.parse_special) {
    FUZZ_CHECK(t.decode(ids) == rest, "GPT-2 decode(encode(text)) != text");
  }
  return 0;
}
