// The subcommands. Each registers its flags on construction and runs after parsing;
// run() returns the process exit code (0 ok, 1 error with a one-line message on stderr).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/engine_flags.h"
#include "config/engine_config.h"

namespace llmserve::cli {

/// Prints "error: <message>" to stderr and returns 1.
int fail(const Status& status);

class ServeCommand {
 public:
  explicit ServeCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  EngineConfig config_;
  EngineFlagValues flags_;
  std::string host_ = "127.0.0.1";
  int port_ = 8000;
  int http_threads_ = 64;
};

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  EngineConfig config_;
  EngineFlagValues flags_;
  std::string prompt_;
  int max_tokens_ = 64;
  float temperature_ = 0.0f;
  float top_p_ = 1.0f;
  int top_k_ = -1;
  int64_t seed_ = -1;
  bool json_ = false;
  bool ignore_eos_ = false;
};

class LogitsCommand {
 public:
  explicit LogitsCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  EngineConfig config_;
  EngineFlagValues flags_;
  std::string token_ids_;
  std::string out_path_;
};

}  // namespace llmserve::cli
