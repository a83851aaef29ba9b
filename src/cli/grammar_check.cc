// llmserve grammar-check: for each instance file, `accept` iff the constrained decoder would let
// a model emit exactly that text (tokenized with --tokenizer, no special tokens) and then stop,
// else `reject` (with the token where it stopped). A constraint that does not compile is one
// "error: ..." line naming the keyword or construct, exit 2. --json prints one object per
// instance with per-token mask times (microseconds).
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "structured_output/constraint.h"
#include "structured_output/instance_check.h"
#include "tokenizer/tokenizer.h"
#include "weights/mapped_file.h"

namespace llmserve::cli {

GrammarCheckCommand::GrammarCheckCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("grammar-check", "Check instance files against a JSON schema, regex, GBNF grammar or choices");
  cmd_->add_option("--tokenizer", tokenizer_path_, "Tokenizer (GGUF, Hugging Face directory / tokenizer.json, tokenizer.bin)")
      ->required();
  cmd_->add_option("--json-schema", json_schema_path_, "JSON Schema file");
  cmd_->add_option("--regex", regex_, "Regular expression the whole output must match");
  cmd_->add_option("--grammar", grammar_path_, "GBNF grammar file (llama.cpp's format; start rule `root`)");
  cmd_->add_option("--choice", choices_, "An allowed output (repeat the flag for more)");
  cmd_->add_flag("--disable-any-whitespace", disable_any_whitespace_, "JSON without whitespace between tokens");
  cmd_->add_flag("--json", json_, "One JSON object per instance, with per-token mask times");
  cmd_->add_option("instances", instances_, "Instance files (their whole text)")->required();
}

int GrammarCheckCommand::run() {
  using namespace structured_output;
  ConstraintSpec spec;
  int given = !json_schema_path_.empty() + !regex_.empty() + !grammar_path_.empty() + !choices_.empty();
  if (given != 1) return fail(InvalidArgument("give exactly one of --json-schema, --regex, --grammar, --choice"));
  spec.json.whitespace.compact = disable_any_whitespace_;
  if (!json_schema_path_.empty() || !grammar_path_.empty()) {
    auto text = read_text_file(json_schema_path_.empty() ? grammar_path_ : json_schema_path_, size_t{64} << 20);
    if (!text.ok()) return fail(text.status());
    spec.text = *text;
    spec.kind = json_schema_path_.empty() ? ConstraintSpec::Kind::kGrammar : ConstraintSpec::Kind::kJsonSchema;
  } else if (!regex_.empty()) {
    spec.kind = ConstraintSpec::Kind::kRegex;
    spec.text = regex_;
  } else {
    spec.kind = ConstraintSpec::Kind::kChoice;
    spec.choices = choices_;
  }
  if (disable_any_whitespace_ && spec.kind != ConstraintSpec::Kind::kJsonSchema)
    return fail(InvalidArgument("--disable-any-whitespace applies to --json-schema only"));
  auto tokenizer = load_tokenizer_from_path(tokenizer_path_);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  auto grammar = compile_constraint(spec);
  if (!grammar.ok()) {
    std::fprintf(stderr, "error: %s\n", grammar.status().message().c_str());
    return 2;
  }
  auto vocab = TokenVocab::from_tokenizer(**tokenizer);
  TokenMasker masker(vocab);
  for (const std::string& path : instances_) {
    auto text = read_text_file(path, size_t{64} << 20);
    if (!text.ok()) return fail(text.status());
    std::vector<int32_t> ids = (*tokenizer)->encode(*text, EncodeOptions{});
    InstanceCheck r = check_instance(*grammar, *vocab, ids, json_ ? &masker : nullptr);
    if (json_) {
      nlohmann::json j = {{"instance", path}, {"result", r.accepted ? "accept" : "reject"},
                          {"num_tokens", ids.size()}, {"mask_us", r.mask_us}};
      if (!r.accepted) j["rejected_at_token"] = r.rejected_at;
      std::printf("%s\n", j.dump().c_str());
    } else if (r.accepted) {
      std::printf("accept %s\n", path.c_str());
    } else if (r.rejected_at < static_cast<int64_t>(ids.size())) {
      std::printf("reject %s (token %lld of %zu: %s)\n", path.c_str(), static_cast<long long>(r.rejected_at), ids.size(),
                  nlohmann::json(vocab->bytes(ids[r.rejected_at]))
                      .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
                      .c_str());
    } else {
      std::printf("reject %s (the text is a prefix: the grammar cannot stop there)\n", path.c_str());
    }
  }
  return 0;
}

}  // namespace llmserve::cli
