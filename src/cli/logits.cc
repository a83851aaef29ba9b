// llmserve logits: float32 logits of every position of a token sequence, written as .npy
// [num_tokens, vocab_size]. The prompt is processed in chunks of --max-num-batched-tokens
// through the same runner/attention path the engine uses (paged KV cache).
#include <sstream>

#include "cli/commands.h"
#include "models/model_file.h"
#include "runner/model_runner.h"
#include "weights/npy.h"

namespace llmserve::cli {
namespace {

Expected<std::vector<int32_t>> parse_ids(const std::string& text, int32_t vocab) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long v;
    try {
      v = std::stol(item, &used);
    } catch (...) {
      return InvalidArgument("--token-ids: '{}' is not an integer", item);
    }
    if (used != item.size()) return InvalidArgument("--token-ids: '{}' is not an integer", item);
    if (v < 0 || v >= vocab)
      return InvalidArgument("--token-ids: {} is outside the vocabulary [0, {})", v, vocab);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return InvalidArgument("--token-ids: no token ids given");
  return ids;
}

}  // namespace

LogitsCommand::LogitsCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("logits", "Write the logits of every position as a .npy file");
  add_engine_flags(*cmd_, config_, flags_);
  cmd_->add_option("--token-ids", token_ids_, "Comma-separated token ids, e.g. 1,403,407")
      ->required();
  cmd_->add_option("--out", out_path_, "Output .npy path (float32 [num_tokens, vocab])")
      ->required();
}

int LogitsCommand::run() {
  if (Status st = finish_engine_flags(config_, flags_); !st.ok()) return fail(st);
  if (Status st = config_.validate(); !st.ok()) return fail(st);
  auto file = ModelFile::open(config_.model_path);
  if (!file.ok()) return fail(file.status());
  const ModelConfig& mc = (*file)->config();
  auto ids = parse_ids(token_ids_, mc.vocab_size);
  if (!ids.ok()) return fail(ids.status());
  const int32_t n = static_cast<int32_t>(ids->size());
  auto model = create_model(**file);
  if (!model.ok()) return fail(model.status());
  auto attention = make_attention_backend(config_.attention_backend);
  if (!attention.ok()) return fail(attention.status());

  const int32_t bs = config_.cache.block_size;
  const int32_t num_blocks = (n + bs - 1) / bs;
  ThreadPool pool(config_.num_threads > 0 ? config_.num_threads : ThreadPool::physical_cores());
  ModelRunner runner(std::move(*model), std::move(*attention), num_blocks, bs, &pool);
  std::vector<int32_t> block_table(num_blocks);
  for (int32_t b = 0; b < num_blocks; ++b) block_table[b] = b;

  std::vector<float> all(size_t(n) * mc.vocab_size);
  const int32_t chunk = config_.scheduler.max_num_batched_tokens;
  for (int32_t start = 0; start < n; start += chunk) {
    SchedulerOutput out;
    ScheduledSequence s;
    s.token_ids = ids->data();
    s.num_computed_tokens = start;
    s.num_scheduled_tokens = std::min(chunk, n - start);
    s.block_table = block_table.data();
    s.num_blocks = num_blocks;
    s.logits_mode = LogitsMode::kAll;
    out.seqs.push_back(s);
    out.total_num_scheduled_tokens = s.num_scheduled_tokens;
    const StepLogits& logits = runner.execute(out);
    std::copy_n(logits.row(0), size_t(s.num_scheduled_tokens) * mc.vocab_size,
                &all[size_t(start) * mc.vocab_size]);
  }
  if (Status st = write_npy(out_path_, {n, mc.vocab_size}, all.data(), all.size()); !st.ok())
    return fail(st);
  return 0;
}

}  // namespace llmserve::cli
