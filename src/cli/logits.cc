// llmserve logits: float32 logits of every position of a token sequence, written as .npy
// [num_tokens, vocab_size]. Runs in chunks of --max-num-batched-tokens through the engine's
// runner and attention backend (paged KV cache).
#include <sstream>

#include "cli/commands.h"
#include "models/model_file.h"
#include "models/quantize_model.h"
#include "common/thread_pool.h"
#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve::cli {
namespace {

Expected<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      return InvalidArgument("--token-ids: '{}' is not a token id", item);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return InvalidArgument("--token-ids: no token ids given");
  // getline reads "1,2," as two items: a trailing comma is a missing id too.
  if (text.back() == ',') return InvalidArgument("--token-ids: '{}' ends with a comma", text);
  return ids;
}

}  // namespace

LogitsCommand::LogitsCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("logits", "Write the logits of every position as a .npy file");
  add_engine_flags(*cmd_, config_, flags_);
  // logits runs the model over given token ids: no tokenizer, scheduler or sampling.
  set_unused_flags(flags_,
                   {"--tokenizer", "--served-model-name", "--max-num-seqs", "--batching",
                    "--max-delay-ms", "--prefill-policy", "--scheduling-policy", "--seed",
                    "--kv-cache-memory", "--num-kv-blocks", "--generation-config",
                    "--enable-chunked-prefill", "--no-enable-chunked-prefill",
                    "--enable-prefix-caching", "--no-enable-prefix-caching",
                    "--kv-cache-prefault", "--no-kv-cache-prefault"},
                   "logits");
  cmd_->add_option("--token-ids", token_ids_, "Comma-separated token ids, e.g. 1,403,407")
      ->required();
  cmd_->add_option("--out", out_path_, "Output .npy path (float32 [num_tokens, vocab])")
      ->required();
}

int LogitsCommand::run() {
  if (Status st = finish_engine_flags(config_, flags_); !st.ok()) return fail(st);
  if (Status st = config_.validate(); !st.ok()) return fail(st);
  auto ids = parse_ids(token_ids_);
  if (!ids.ok()) return fail(ids.status());
  auto file = ModelFile::open(config_.model_path);
  if (!file.ok()) return fail(file.status());
  const int threads = config_.num_threads > 0 ? config_.num_threads : ThreadPool::physical_cores();
  if (!config_.quantization.empty()) {
    ThreadPool pool(threads);
    if (auto q = apply_quantization(**file, config_.quantization, &pool); !q.ok())
      return fail(q.status());
  }
  PromptLogitsOptions opt;
  opt.attention_backend = config_.attention_backend;
  opt.dtype = config_.dtype;
  opt.kv_cache_dtype = config_.cache.kv_cache_dtype;
  opt.chunk_size = config_.scheduler.max_num_batched_tokens;
  opt.block_size = config_.cache.block_size;
  opt.num_threads = threads;
  const int32_t max_len = config_.scheduler.max_model_len > 0
                              ? config_.scheduler.max_model_len
                              : (*file)->config().max_position_embeddings;
  if (static_cast<int64_t>(ids->size()) > max_len)
    return fail(InvalidArgument("--token-ids: {} tokens exceed max_model_len {} (set --max-model-len to override "
                                "the model's context length)", ids->size(), max_len));
  opt.max_model_len = max_len;  // LongRoPE: long factors when the context exceeds the original
  auto logits = compute_prompt_logits(**file, *ids, opt);
  if (!logits.ok()) return fail(logits.status());
  const int64_t n = static_cast<int64_t>(ids->size());
  const int64_t vocab = (*file)->config().vocab_size;
  if (Status st = write_npy(out_path_, {n, vocab}, logits->data(), logits->size()); !st.ok())
    return fail(st);
  return 0;
}

}  // namespace llmserve::cli
