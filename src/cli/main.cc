// llmserve: command-line entry point. Each subcommand is a thin main in its own file.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/parse_errors.h"

int main(int argc, char** argv) {
  CLI::App app{"llmserve: an LLM inference server (OpenAI-compatible API, paged KV cache, "
               "continuous batching)"};
  llmserve::cli::apply_argparse_conventions(app);  // before any option is added
  app.require_subcommand(1);
  app.set_version_flag("--version", "llmserve 0.1.0");
  llmserve::cli::ServeCommand serve(app);
  llmserve::cli::GenerateCommand generate(app);
  llmserve::cli::LogitsCommand logits(app);
  llmserve::cli::MakeModelCommand make_model(app);
  llmserve::cli::QuantizeCommand quantize(app);
  llmserve::cli::InspectCommand inspect(app);
  llmserve::cli::DequantizeCommand dequantize(app);
  llmserve::cli::TokenizeCommand tokenize(app);
  llmserve::cli::RenderChatCommand render_chat(app);
  llmserve::cli::GrammarCheckCommand grammar_check(app);
  std::string command_line = "llmserve";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  llmserve::cli::BenchCommand bench(app, command_line);
  llmserve::cli::check_number_syntax(app);
  std::vector<std::string> args = llmserve::cli::expand_short_aliases(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  try {
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; every parse error (unknown flag, bad or missing value) is
    // one "error: ..." line naming the flag and exit 1, like every other command-line error.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s\n", llmserve::cli::describe_parse_error(app, e).c_str());
    return 1;
  }
  if (serve.parsed()) return serve.run();
  if (generate.parsed()) return generate.run();
  if (logits.parsed()) return logits.run();
  if (bench.parsed()) return bench.run();
  if (make_model.parsed()) return make_model.run();
  if (quantize.parsed()) return quantize.run();
  if (inspect.parsed()) return inspect.run();
  if (dequantize.parsed()) return dequantize.run();
  if (tokenize.parsed()) return tokenize.run();
  if (render_chat.parsed()) return render_chat.run();
  if (grammar_check.parsed()) return grammar_check.run();
  return 1;
}
