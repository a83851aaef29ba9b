// llmserve quantize IN OUT --type TYPE: llama-quantize's job with our quantizers. IN is a GGUF
// file with f32/f16/bf16 tensors or a Hugging Face directory (as ModelFile::open reads them);
// OUT a GGUF that llama.cpp loads. The per-tensor types follow llama-quantize's rules for the
// chosen file type (quant/quant_scheme.h; --pure: the type everywhere). From a GGUF every
// metadata key is copied (general.file_type and general.quantization_version set as
// llama-quantize sets them, split keys dropped) and tensors keep their names, order and, when
// not quantized, bytes. From an HF directory the metadata is what convert_hf_to_gguf.py writes
// (cli/gguf_export.h), 1-D tensors become F32 and llama Q/K rows are permuted to llama.cpp's
// order. Streams tensor by tensor, in chunks of rows: memory stays bounded whatever the model's
// size. One line per tensor on stdout ("name TYPE"), a summary on stderr.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/gguf_export.h"
#include "cli/human_int.h"
#include "cli/remove_on_signal.h"
#include "common/thread_pool.h"
#include "models/quantize_model.h"
#include "quant/quant_scheme.h"
#include "weights/gguf_writer.h"

namespace llmserve::cli {
namespace {

constexpr int64_t kChunkValues = int64_t{1} << 20;  // float32 values converted per piece

/// GGUF keys llama-quantize does not carry over (it rewrites them or drops split info); our
/// writer always aligns to 32, so a different general.alignment would be wrong.
bool dropped_key(const std::string& key) {
  return key == "general.file_type" || key == "general.quantization_version" ||
         key == "general.alignment" || key.rfind("split.", 0) == 0;
}

/// Writes tensor `p` (all its rows) in its planned type.
Status write_tensor(GgufWriter& w, const ModelFile& file, const TensorPlan& p, ThreadPool* pool,
                    std::vector<float>& scratch, std::vector<uint8_t>& buf) {
  const TensorView& t = *p.tensor;
  if (file.format() != ModelFile::Format::kHfDir && p.type == t.dtype)  // kept: the same bytes
    return w.write(t.data, t.nbytes);
  int32_t heads = 0;
  const bool permute = is_permuted_qk(file, p.gguf_name, &heads);
  // Rows of shape.back() values; a permuted 1-D bias is permuted as rows of one value (its
  // F32 bytes are the same either way).
  TensorView view = t;
  if (permute && t.shape.size() == 1) view.shape = {t.shape[0], 1};
  const int64_t cols = view.shape.back(), rows = view.numel() / cols;
  RowMap source;
  if (permute) source = [rows, heads](int64_t g) { return hf_row_of_gguf_row(g, rows, heads); };
  const int64_t chunk = std::max<int64_t>(1, kChunkValues / cols);
  for (int64_t r = 0; r < rows; r += chunk) {
    const int64_t n = std::min(chunk, rows - r);
    buf.resize(static_cast<size_t>(n * dtype_row_bytes(p.type, cols)));
    LLMS_RETURN_IF_ERROR(
        quantize_tensor_rows(view, p.type, r, n, source, scratch, buf.data(), pool));
    LLMS_RETURN_IF_ERROR(w.write(buf.data(), buf.size()));
  }
  return Status::Ok();
}

}  // namespace

QuantizeCommand::QuantizeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("quantize", "Quantize a model's weights into a GGUF file "
                                        "(llama-quantize's per-tensor rules, our quantizers)");
  cmd_->add_option("input", in_path_, "GGUF file (f32/f16/bf16 tensors) or Hugging Face directory")
      ->required();
  cmd_->add_option("output", out_path_, "Output GGUF file")->required();
  cmd_->add_option("--type", type_, "Quantization type: " + quant_scheme_names())->required();
  cmd_->add_flag("--pure", pure_, "Give every quantizable tensor the type itself (no Q6_K "
                                  "output or \"more bits\" layers), as llama-quantize --pure");
  cmd_->add_option("--tokenizer", tokenizer_,
                   "HF input: copy the tokenizer.* metadata of this GGUF file instead of "
                   "converting tokenizer.json");
  cmd_->add_option("--threads", threads_,
                   fmt::format("Threads, 0 to {} (0 = auto: the physical cores; default)",
                               kMaxThreads))
      ->transform(human_int(0, kMaxThreads));  // as the engine's --threads
}

int QuantizeCommand::run() {
  // One stdout line per tensor as it is written, also into a pipe (fully buffered there, the
  // lines came at exit, and so did a SIGPIPE from a reader that had gone: after the rename).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::optional<QuantScheme> scheme = find_quant_scheme(type_);
  if (!scheme)
    return fail(InvalidArgument("--type: unknown type '{}' (known: {})", type_,
                                quant_scheme_names()));
  scheme->pure = pure_;
  std::error_code ec;
  if (std::filesystem::equivalent(in_path_, out_path_, ec))
    return fail(InvalidArgument("{}: the output would overwrite the input", out_path_));
  if (Status st = check_output_path(out_path_, "quantize", "OUT"); !st.ok()) return fail(st);
  const auto t0 = std::chrono::steady_clock::now();
  auto opened = ModelFile::open(in_path_);
  if (!opened.ok()) return fail(opened.status());
  const ModelFile& file = **opened;
  if (file.format() == ModelFile::Format::kLlama2c)
    return fail(Unimplemented("{}: llama2.c checkpoints are not supported by quantize (a GGUF "
                              "file or a Hugging Face directory is)", in_path_));
  if (file.format() == ModelFile::Format::kGguf && !tokenizer_.empty())
    return fail(InvalidArgument("--tokenizer: only for Hugging Face input ({} is a GGUF file "
                                "and keeps its own tokenizer)", in_path_));
  for (const TensorView* t : file.tensors())
    if (t->dtype != DType::kF32 && t->dtype != DType::kF16 && t->dtype != DType::kBF16)
      return fail(Unimplemented("{}: tensor {} is {}: quantize reads f32, f16 and bf16 tensors "
                                "(requantizing is not supported)", in_path_, t->name,
                                dtype_ggml_name(t->dtype)));
  auto plan = plan_model_quantization(file, *scheme);
  if (!plan.ok()) return fail(plan.status());
  // A tied HF model's stored lm_head is ignored (as transformers does): llama.cpp then uses
  // token_embd, which is what a GGUF without output.weight means.
  std::vector<TensorPlan> tensors;
  for (TensorPlan& p : *plan) {
    if (file.format() == ModelFile::Format::kHfDir && file.config().tie_word_embeddings &&
        p.gguf_name == "output.weight")
      continue;
    if (file.format() == ModelFile::Format::kHfDir && p.tensor->shape.size() == 1)
      p.type = DType::kF32;  // convert_hf_to_gguf.py stores 1-D tensors in F32
    tensors.push_back(std::move(p));
  }

  GgufWriter w;
  if (file.format() == ModelFile::Format::kGguf) {
    for (const auto& [key, v] : file.gguf()->metadata())
      if (!dropped_key(key)) w.add_value(key, v);
  } else {
    if (Status st = add_hf_model_metadata(w, file); !st.ok()) return fail(st);
    if (Status st = add_hf_tokenizer_metadata(w, file, tokenizer_); !st.ok()) return fail(st);
  }
  w.add_uint32("general.quantization_version", 2);  // GGML_QNT_VERSION (ggml.h)
  w.add_uint32("general.file_type", scheme->file_type);
  for (const TensorPlan& p : tensors) w.add_tensor(p.gguf_name, p.tensor->shape, p.type);

  // Written under a temporary name and renamed, so a failure leaves no truncated model.
  const std::string tmp = out_path_ + ".tmp";
  auto cleanup_fail = [&](const Status& st) {
    std::remove(tmp.c_str());
    return fail(st);
  };
  std::unique_ptr<ThreadPool> pool;
  try {  // before the temporary file exists; threads may be refused (EAGAIN)
    pool = std::make_unique<ThreadPool>(threads_ > 0 ? threads_ : ThreadPool::physical_cores());
  } catch (const std::exception& e) {
    return fail(ResourceExhausted("--threads {}: cannot start the threads: {}", threads_,
                                  e.what()));
  }
  if (Status st = create_temp_file(tmp); !st.ok()) return fail(st);  // not ours: kept
  const RemoveOnSignal remove_tmp_on_signal(tmp);
  if (Status st = w.begin(tmp); !st.ok()) return cleanup_fail(st);
  std::vector<float> scratch;
  std::vector<uint8_t> buf;
  uint64_t bytes_in = 0, bytes_out = 0;
  int quantized = 0;
  try {  // an exception (e.g. std::bad_alloc) must not leave the temporary file either
    for (const TensorPlan& p : tensors) {
      if (Status st = write_tensor(w, file, p, pool.get(), scratch, buf); !st.ok()) {
        return cleanup_fail(Status(st.code(), fmt::format("{}: {}", in_path_, st.message())));
      }
      const int64_t cols = p.tensor->shape.back();
      bytes_in += p.tensor->nbytes;
      bytes_out +=
          static_cast<uint64_t>(p.tensor->numel() / cols * dtype_row_bytes(p.type, cols));
      quantized += is_quantized(p.type);
      std::printf("%s %s\n", p.gguf_name.c_str(), std::string(dtype_ggml_name(p.type)).c_str());
    }
    if (Status st = w.finish(); !st.ok()) return cleanup_fail(st);
  } catch (const std::exception& e) {
    return cleanup_fail(
        Status(StatusCode::kInternal, fmt::format("{}: quantize failed: {}", in_path_, e.what())));
  }
  if (std::rename(tmp.c_str(), out_path_.c_str()) != 0)
    return cleanup_fail(NotFound("{}: cannot rename {} into place: {}", out_path_, tmp,
                                 std::strerror(errno)));
  std::fflush(stdout);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t params = 0;
  for (const TensorPlan& p : tensors) params += p.tensor->numel();
  std::fprintf(stderr, "quantized %s -> %s: %s%s, %d of %zu tensors quantized, %.2f MiB -> "
               "%.2f MiB (%.2f bits per weight over all tensors, as llama-quantize's BPW; inspect's "
               "counts the weight matrices only), %.2f s\n", in_path_.c_str(), out_path_.c_str(),
               std::string(scheme->name).c_str(), pure_ ? " (pure)" : "", quantized,
               tensors.size(), bytes_in / 1048576.0, bytes_out / 1048576.0,
               8.0 * static_cast<double>(bytes_out) / static_cast<double>(params), secs);
  return 0;
}

}  // namespace llmserve::cli
