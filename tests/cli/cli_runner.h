// Runs the llmserve binary as a user would and captures exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace llmserve::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string temp_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("llmserve_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// Runs a shell command line (e.g. with an environment prefix) and captures its output.
inline CommandResult run_shell(const std::string& command) {
  const std::string dir = temp_dir();
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd = command + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// Runs `LLMSERVE_BIN <args>` through the shell (args are already shell-quoted).
inline CommandResult run_llmserve(const std::string& args) {
  return run_shell(std::string(LLMSERVE_BIN) + " " + args);
}

}  // namespace llmserve::testing
