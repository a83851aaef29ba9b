// ModelRunner's KV cache commit at start-up (prefault_kv_cache, CacheConfig::kv_cache_prefault):
// the bytes it writes (clamped to the pool; MLA's one latent tensor counted once) and that it
// changes no logit: the same prompt through a prefaulted and a lazily committed runner gives
// the same bits (synthetic GQA llama and MLA deepseek2, ../shared/testdata/models/synthetic).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "kernels/attention.h"
#include "models/model.h"
#include "runner/model_runner.h"
#include "models/model_file.h"

namespace llmserve {
namespace {

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

constexpr int32_t kBlocks = 10, kBlockSize = 16;

std::unique_ptr<ModelRunner> make_runner(const ModelFile& file, ThreadPool* pool) {
  auto model = create_model(file);
  EXPECT_TRUE(model.ok()) << model.status().message();
  auto attention = make_attention_backend("flash");
  EXPECT_TRUE(attention.ok());
  auto runner = ModelRunner::create(std::move(*model), std::move(*attention), kBlocks, kBlockSize,
                                    DType::kF32, pool);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return std::move(*runner);
}

/// Logits of every position of `ids` in one prefill step, blocks handed out in reverse.
std::vector<float> prompt_logits(ModelRunner& runner, const std::vector<int32_t>& ids) {
  std::vector<int32_t> table(kBlocks);
  for (int32_t b = 0; b < kBlocks; ++b) table[b] = kBlocks - 1 - b;
  SchedulerOutput out;
  ScheduledSequence s;
  s.token_ids = ids.data();
  s.num_scheduled_tokens = static_cast<int32_t>(ids.size());
  s.block_table = table.data();
  s.num_blocks = kBlocks;
  s.logits_mode = LogitsMode::kAll;
  out.seqs.push_back(s);
  out.total_num_scheduled_tokens = s.num_scheduled_tokens;
  const StepLogits& l = runner.execute(out);
  const float* first = l.row(l.logits_row_start[0]);
  return {first, first + ids.size() * size_t(l.vocab_size)};
}

class KvPrefault : public ::testing::TestWithParam<std::string> {};

TEST_P(KvPrefault, WritesTheRequestedBlocksAndChangesNoLogit) {
  auto file = ModelFile::open(synth(GetParam() + "/model.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::ifstream in(synth("sequences.json"));
  const auto ids = nlohmann::json::parse(in)["short"].get<std::vector<int32_t>>();
  ASSERT_LE(ids.size(), size_t{kBlocks * kBlockSize});
  ThreadPool pool(2);
  auto lazy = make_runner(**file, &pool);
  auto committed = make_runner(**file, &pool);
  const int64_t block_bytes =
      ModelRunner::kv_bytes_per_block((*file)->config(), kBlockSize, DType::kF32);
  EXPECT_EQ(committed->prefault_kv_cache(4), 4 * block_bytes);
  EXPECT_EQ(committed->prefault_kv_cache(1000), kBlocks * block_bytes);  // clamped to the pool
  EXPECT_EQ(committed->prefault_kv_cache(0), 0);
  EXPECT_EQ(prompt_logits(*committed, ids), prompt_logits(*lazy, ids));
}

INSTANTIATE_TEST_SUITE_P(Synthetic, KvPrefault, ::testing::Values("llama-gqa", "deepseek2-mla"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace llmserve
