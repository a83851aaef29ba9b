// llmserve tokenize: the token ids of one text file under a tokenizer (GGUF vocabulary, Hugging
// Face directory / tokenizer.json, or llama2.c tokenizer.bin, whose token count is read from
// the file's records unless --vocab-size gives it), with the same options the server
// uses: --add-special (BOS/EOS per the tokenizer's configuration) and --parse-special (special
// tokens written in the text are those tokens).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/human_int.h"
#include "tokenizer/tokenizer.h"

#include "weights/mapped_file.h"

namespace llmserve::cli {

TokenizeCommand::TokenizeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("tokenize", "Print the token ids of a text file");
  cmd_->add_option("--tokenizer", tokenizer_path_,
                   "Tokenizer: GGUF file, Hugging Face directory or tokenizer.json, or llama2.c "
                   "tokenizer.bin (with --vocab-size)");
  cmd_->add_option("--text-file", text_path_, "The text to encode (the whole file, one text)");
  cmd_->add_option("--vocab-size", vocab_size_,
                   "Number of tokens of a llama2.c tokenizer.bin (the file does not store it; "
                   "default: counted from its records)")
      ->transform(human_int(1));
  cmd_->add_flag("--add-special", add_special_,
                 "Add the special tokens the tokenizer's configuration asks for (BOS/EOS)");
  cmd_->add_flag("--parse-special", parse_special_,
                 "Recognise special tokens written in the text (e.g. <|im_start|>)");
  cmd_->add_flag("--json", json_, "Print {\"ids\": [...]} instead of space-separated ids");
}

int TokenizeCommand::run() {
  if (tokenizer_path_.empty()) return fail(InvalidArgument("no tokenizer given (--tokenizer)"));
  if (text_path_.empty()) return fail(InvalidArgument("no text given (--text-file)"));
  // Regular files only, bounded: a directory, FIFO or /dev/zero is an error, not a hang.
  Expected<std::string> text_or = read_text_file(text_path_, size_t{256} << 20);
  if (!text_or.ok()) return fail(text_or.status());
  const std::string& text = *text_or;

  TokenizerLoadOptions options;
  options.llama2c_vocab_size = vocab_size_;
  Expected<std::unique_ptr<Tokenizer>> tokenizer = load_tokenizer_from_path(tokenizer_path_, options);
  if (!tokenizer.ok() && vocab_size_ == 0 &&
      tokenizer.status().message().find("not a llama2.c tokenizer.bin") != std::string::npos)
    return fail(InvalidArgument("{}; if it is a tokenizer.bin with trailing bytes, give its token "
                                "count with --vocab-size", tokenizer.status().message()));
  if (!tokenizer.ok()) return fail(tokenizer.status());
  // --vocab-size counts a llama2.c tokenizer.bin's records; any other file brings its own.
  if (vocab_size_ != 0 && (*tokenizer)->vocab_size() != vocab_size_)
    return fail(InvalidArgument("--vocab-size {} does not apply to {}: it brings its own "
                                "vocabulary of {} tokens (the flag is for llama2.c "
                                "tokenizer.bin files)",
                                vocab_size_, tokenizer_path_, (*tokenizer)->vocab_size()));
  // A tokenizer.bin read to its end that holds another count: --vocab-size would cut it (the
  // ids of the tokens past it would be wrong), so it must be the file's own count.
  if (vocab_size_ != 0) {
    TokenizerLoadOptions whole;
    auto full = load_tokenizer_from_path(tokenizer_path_, whole);
    if (full.ok() && (*full)->vocab_size() != vocab_size_)
      return fail(InvalidArgument("--vocab-size {}: {} holds {} tokens (leave the flag out, or "
                                  "give that count)",
                                  vocab_size_, tokenizer_path_, (*full)->vocab_size()));
  }
  const std::vector<int32_t> ids =
      (*tokenizer)->encode(text, EncodeOptions{add_special_, parse_special_});
  if (json_) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace llmserve::cli
