// llmserve dequantize FILE.gguf --out-dir DIR [--tensor NAME]: every tensor of any GGUF file
// (a model or not; float tensors too) as float32 NumPy .npy files named <tensor name>.npy,
// through the reference dequantizer (quant/dequantize_ref.h, bit for bit gguf-py). Shapes:
// a 1-D tensor [n]; otherwise [rows, row length] with rows = the product of the outer
// dimensions (2-D: ne[1] x ne[0]). One line per tensor on stdout: name, type, shape. Written
// row by row: a tensor never exists whole as floats in memory.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "quant/dequantize_ref.h"
#include "weights/gguf.h"
#include "weights/npy.h"

namespace llmserve::cli {
namespace {

/// `<name>.npy` with every byte outside [A-Za-z0-9._-] replaced by '_' (tensor names come from
/// the file: no '/' or "..", so nothing is written outside --out-dir).
std::string file_name_for(const std::string& tensor) {
  std::string s;
  for (char c : tensor) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    s += ok ? c : '_';
  }
  if (s.empty() || s.find_first_not_of('.') == std::string::npos) s = "_" + s;
  return s + ".npy";
}

/// The .npy shape of a tensor: [n] for 1-D (and [1] for a scalar), else [rows, row length].
std::vector<int64_t> npy_shape(const TensorView& t) {
  if (t.shape.size() <= 1) return {t.numel()};
  return {t.numel() / t.shape.back(), t.shape.back()};
}

Status write_tensor(const TensorView& t, const std::string& path) {
  const std::vector<int64_t> shape = npy_shape(t);
  LLMS_ASSIGN_OR_RETURN(NpyWriter out, NpyWriter::create(path, shape));
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  const int64_t rows = t.numel() / cols, row_bytes = dtype_row_bytes(t.dtype, cols);
  // Rows in batches of about 1M values (one row at least).
  const int64_t batch = std::max<int64_t>(1, (int64_t{1} << 20) / cols);
  std::vector<float> buf(static_cast<size_t>(std::min(rows, batch) * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t n = std::min(batch, rows - r0);
    for (int64_t r = 0; r < n; ++r)
      dequantize_row_ref(t.dtype, static_cast<const uint8_t*>(t.data) + (r0 + r) * row_bytes,
                         buf.data() + r * cols, cols);
    LLMS_RETURN_IF_ERROR(out.write(buf.data(), static_cast<size_t>(n * cols)));
  }
  return out.finish();
}

}  // namespace

DequantizeCommand::DequantizeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand(
      "dequantize", "Write the tensors of a GGUF file as float32 .npy files (quantized types "
                    "dequantized as gguf-py does)");
  // FILE or --file, as MODEL or --model: either one (both only when equal).
  cmd_->add_option("file", path_, "GGUF file, any: a model or not (or --file)");
  cmd_->add_option("--file", file_flag_, "GGUF file (or the positional FILE)");
  cmd_->add_option("--out-dir", out_dir_, "Directory for <tensor name>.npy (created if absent)")
      ->required();
  cmd_->add_option("--tensor", tensors_, "Only this tensor (repeat the flag for several)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

int DequantizeCommand::run() {
  if (!path_.empty() && !file_flag_.empty() && path_ != file_flag_)
    return fail(InvalidArgument("FILE '{}' and --file '{}' differ; give the file once", path_,
                                file_flag_));
  if (path_.empty()) path_ = file_flag_;
  if (path_.empty()) return fail(InvalidArgument("no file given (FILE or --file)"));
  auto g = GgufFile::open(path_);
  if (!g.ok()) return fail(g.status());
  std::vector<const TensorView*> todo;
  for (const std::string& name : tensors_) {
    if (name.empty()) return fail(InvalidArgument("--tensor: the tensor name must not be empty"));
    const TensorView* t = g->find_tensor(name);
    if (t == nullptr) {
      std::vector<std::string> some;
      for (const TensorView& x : g->tensors()) {
        if (some.size() == 5) break;
        some.push_back(x.name);
      }
      const size_t n = g->tensors().size();
      return fail(NotFound("{}: no tensor '{}' (the file has {} tensor{}{}{}{})", path_, name,
                           n, n == 1 ? "" : "s", n > 0 ? ": " : "", fmt::join(some, ", "),
                           n > some.size() ? ", ..." : ""));
    }
    if (std::find(todo.begin(), todo.end(), t) == todo.end()) todo.push_back(t);
  }
  if (tensors_.empty())
    for (const TensorView& t : g->tensors()) todo.push_back(&t);
  // Distinct names can map to one file name only through the replaced bytes: refuse that.
  std::map<std::string, std::string> files;
  for (const TensorView* t : todo) {
    const auto [it, fresh] = files.emplace(file_name_for(t->name), t->name);
    if (!fresh)
      return fail(InvalidArgument("{}: tensors '{}' and '{}' would both be written as {}", path_,
                                  it->second, t->name, it->first));
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir_, ec);
  if (ec) return fail(NotFound("{}: cannot create directory: {}", out_dir_, ec.message()));
  for (const TensorView* t : todo) {
    const std::string out = (std::filesystem::path(out_dir_) / file_name_for(t->name)).string();
    if (Status st = write_tensor(*t, out); !st.ok()) return fail(st);
    std::printf("%s %s [%s]\n", t->name.c_str(), std::string(dtype_ggml_name(t->dtype)).c_str(),
                fmt::format("{}", fmt::join(npy_shape(*t), ", ")).c_str());
  }
  return 0;
}

}  // namespace llmserve::cli
