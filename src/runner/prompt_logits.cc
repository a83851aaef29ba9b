#include "runner/prompt_logits.h"

#include <algorithm>

#include "runner/model_runner.h"

namespace llmserve {

Expected<std::vector<float>> compute_prompt_logits(const ModelFile& file,
                                                   const std::vector<int32_t>& ids,
                                                   const PromptLogitsOptions& opt) {
  const ModelConfig& mc = file.config();
  if (ids.empty()) return InvalidArgument("no token ids given");
  for (int32_t id : ids)
    if (id < 0 || id >= mc.vocab_size)
      return InvalidArgument("token id {} is outside the vocabulary [0, {})", id, mc.vocab_size);
  if (opt.chunk_size < 1 || opt.block_size < 1)
    return InvalidArgument("chunk size ({}) and block size ({}) must be >= 1", opt.chunk_size,
                           opt.block_size);
  ThreadPool pool(std::max(1, opt.num_threads));
  const ModelLoadOptions load{opt.dtype, opt.max_model_len, &pool};
  LLMS_ASSIGN_OR_RETURN(auto model, create_model(file, load));
  LLMS_ASSIGN_OR_RETURN(auto attention, make_attention_backend(opt.attention_backend));

  const int32_t n = static_cast<int32_t>(ids.size());
  const int32_t num_blocks = (n + opt.block_size - 1) / opt.block_size;
  const DType kv_dtype = opt.kv_cache_dtype.value_or(model_dtype(mc, load));
  LLMS_ASSIGN_OR_RETURN(auto runner, ModelRunner::create(std::move(model), std::move(attention),
                                                         num_blocks, opt.block_size, kv_dtype,
                                                         &pool));
  // Hand out the blocks in reverse so that the block table is not the identity map.
  std::vector<int32_t> block_table(num_blocks);
  for (int32_t b = 0; b < num_blocks; ++b) block_table[b] = num_blocks - 1 - b;

  std::vector<float> all(size_t(n) * mc.vocab_size);
  for (int32_t start = 0; start < n; start += opt.chunk_size) {
    SchedulerOutput out;
    ScheduledSequence s;
    s.token_ids = ids.data();
    s.num_computed_tokens = start;
    s.num_scheduled_tokens = std::min(opt.chunk_size, n - start);
    s.block_table = block_table.data();
    s.num_blocks = num_blocks;
    s.logits_mode = LogitsMode::kAll;
    out.seqs.push_back(s);
    out.total_num_scheduled_tokens = s.num_scheduled_tokens;
    const StepLogits& logits = runner->execute(out);
    std::copy_n(logits.row(0), size_t(s.num_scheduled_tokens) * mc.vocab_size,
                &all[size_t(start) * mc.vocab_size]);
  }
  return all;
}

}  // namespace llmserve
