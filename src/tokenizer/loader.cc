// load_tokenizer_from_path / load_tokenizer_from_gguf: format detection and dispatch.
#include <filesystem>

#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"

namespace llmserve {

Expected<std::unique_ptr<Tokenizer>> load_tokenizer_from_gguf(const GgufFile& gguf) {
  LLMS_ASSIGN_OR_RETURN(const std::string model, gguf.get_string("tokenizer.ggml.model"));
  if (model == "gpt2") return load_gguf_bpe_tokenizer(gguf);
  if (model != "llama") {
    return Unimplemented("{}: tokenizer.ggml.model '{}' is not supported (only 'llama', "
                         "SentencePiece BPE, and 'gpt2', byte-level BPE)", gguf.path(), model);
  }
  LLMS_ASSIGN_OR_RETURN(Vocab vocab, load_gguf_vocab(gguf));
  return make_spm_tokenizer(std::move(vocab));
}

Expected<std::unique_ptr<Tokenizer>> load_tokenizer_from_path(const std::string& path,
                                                              const TokenizerLoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound("{}: no such file or directory", path);
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    const fs::path json = dir / "tokenizer.json";
    if (!fs::is_regular_file(json, ec)) {
      return NotFound("{}: directory has no tokenizer.json", path);
    }
    const fs::path config = dir / "tokenizer_config.json";
    return load_tokenizer_json(json.string(),
                               fs::is_regular_file(config, ec) ? config.string() : std::string());
  }
  if (GgufFile::has_magic(path)) {
    LLMS_ASSIGN_OR_RETURN(const GgufFile gguf, GgufFile::open(path));
    return load_tokenizer_from_gguf(gguf);
  }
  if (fs::path(path).extension() == ".json") {
    const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
    const bool has_config = fs::path(path).filename() != "tokenizer_config.json" &&
                            fs::is_regular_file(config, ec);
    return load_tokenizer_json(path, has_config ? config.string() : std::string());
  }
  LLMS_ASSIGN_OR_RETURN(Vocab vocab, load_llama2c_vocab(path, options.llama2c_vocab_size));
  return make_spm_tokenizer(std::move(vocab));
}

}  // namespace llmserve
