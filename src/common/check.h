// LLMS_CHECK: programmer-bug assertions, always on, printing the values involved.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace llmserve::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond,
                                      const std::string& msg) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s %s\n", file, line, cond, msg.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace llmserve::detail

/// LLMS_CHECK(cond) or LLMS_CHECK(cond, "fmt {}", args...): aborts with a message if false.
#define LLMS_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) [[unlikely]]                                                        \
      ::llmserve::detail::check_failed(__FILE__, __LINE__, #cond,                    \
                                       ::fmt::format("" __VA_ARGS__));              \
  } while (0)
