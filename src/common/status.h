// Status / Expected<T>: how bad input at a boundary (a corrupt file, a malformed request) is
// reported. Programmer bugs use LLMS_CHECK (check.h) instead; expected shortages (no free KV
// block) are plain return values handled by the caller.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace llmserve {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // bad user input (request field, CLI flag)
  kNotFound,          // missing file, tensor, metadata key
  kDataLoss,          // corrupt or truncated file
  kUnimplemented,     // valid input we do not support (dtype, architecture)
  kResourceExhausted, // does not fit (prompt longer than max_model_len, KV pool too small)
  kInternal,
  kUnavailable,       // busy right now (request queue full, shutting down): retry later
};

/// A success or an error code with a one-line human-readable message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status DataLoss(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status Unimplemented(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kUnimplemented, fmt::format(f, std::forward<Args>(args)...)};
}
template <typename... Args>
Status ResourceExhausted(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kResourceExhausted, fmt::format(f, std::forward<Args>(args)...)};
}

template <typename... Args>
Status Unavailable(fmt::format_string<Args...> f, Args&&... args) {
  return {StatusCode::kUnavailable, fmt::format(f, std::forward<Args>(args)...)};
}

/// A value of type T or an error Status (a small stand-in for C++23 std::expected).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {      // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Expected constructed from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace llmserve

/// Propagates an error Status from an expression returning Status.
#define LLMS_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::llmserve::Status _st = (expr);        \
    if (!_st.ok()) return _st;              \
  } while (0)

#define LLMS_CONCAT_INNER(a, b) a##b
#define LLMS_CONCAT(a, b) LLMS_CONCAT_INNER(a, b)
/// `LLMS_ASSIGN_OR_RETURN(auto x, f());` declares x from an Expected or returns its Status.
#define LLMS_ASSIGN_OR_RETURN(lhs, expr) \
  LLMS_ASSIGN_OR_RETURN_IMPL(LLMS_CONCAT(_exp_, __LINE__), lhs, expr)
#define LLMS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
