// llmserve: command-line entry point. Each subcommand is a thin main in its own file.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"llmserve: an LLM inference server (OpenAI-compatible API, paged KV cache, "
               "continuous batching)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "llmserve 0.1.0");
  llmserve::cli::ServeCommand serve(app);
  llmserve::cli::GenerateCommand generate(app);
  llmserve::cli::LogitsCommand logits(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; every parse error (bad or missing flag value) exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (serve.parsed()) return serve.run();
  if (generate.parsed()) return generate.run();
  if (logits.parsed()) return logits.run();
  return 1;
}
