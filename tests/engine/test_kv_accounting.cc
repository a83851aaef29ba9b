// Model-level KV accounting: the engine sizes its block pool from the model's per-token KV
// bytes (ModelConfig::kv_bytes_per_token_per_layer), so in the same --kv-cache-memory an MQA
// model holds n_heads/n_kv_heads times the blocks of its MHA twin and admits proportionally
// more sequences, and MLA holds (kv_lora_rank + qk_rope_head_dim) values per token per layer.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/llm_engine.h"

namespace llmserve {
namespace {

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

std::unique_ptr<LLMEngine> make_engine(const std::string& model, int64_t kv_bytes) {
  EngineConfig c;
  c.model_path = synth(model + "/model.gguf");
  c.num_threads = 1;
  c.cache.block_size = 16;
  c.cache.kv_cache_memory_bytes = kv_bytes;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_num_batched_tokens = 4096;
  c.scheduler.max_model_len = 64;
  c.scheduler.check_invariants = true;
  auto e = LLMEngine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

/// Queues 32 requests of 60 prompt tokens (4 blocks each; 4 more tokens fit in the last
/// block) and returns how many run in the first step.
int32_t admitted_in_first_step(LLMEngine& engine) {
  std::ifstream in(synth("sequences.json"));
  const auto ids = nlohmann::json::parse(in)["long"].get<std::vector<int32_t>>();
  for (int64_t r = 0; r < 32; ++r) {
    EngineRequest req;
    req.prompt_token_ids.assign(ids.begin(), ids.begin() + 60);
    req.params.temperature = 0;
    req.params.max_tokens = 2;
    EXPECT_TRUE(engine.add_request(r, std::move(req)).ok());
  }
  engine.step();
  return engine.stats().num_running;
}

TEST(KvAccounting, BlocksFollowTheAttentionType) {
  // f32 KV (the weights' dtype), 2 layers, block 16. Bytes per token per layer:
  // MHA 2*8*16*4 = 1024, GQA 2*2*16*4 = 256, MQA 2*1*16*4 = 128, MLA (32+8)*4 = 160.
  // A block = 16 tokens * 2 layers * that: 32768 / 8192 / 4096 / 5120 bytes.
  const int64_t kv_bytes = 16 * 32768;  // 16 MHA blocks
  const struct {
    const char* model;
    int32_t blocks;
  } cases[] = {{"llama-mha", 16}, {"llama-gqa", 64}, {"llama-mqa", 128},
               {"deepseek2-mla", 102}};  // 524288 / 5120 = 102.4
  for (const auto& c : cases) {
    SCOPED_TRACE(c.model);
    auto e = make_engine(c.model, kv_bytes);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->stats().num_total_blocks, c.blocks);
  }
}

TEST(KvAccounting, MqaAndMlaAdmitMoreSequencesInTheSameMemory) {
  const int64_t kv_bytes = 16 * 32768;  // 16 MHA blocks = 4 sequences of 4 blocks
  auto mha = make_engine("llama-mha", kv_bytes);
  auto mqa = make_engine("llama-mqa", kv_bytes);
  auto mla = make_engine("deepseek2-mla", kv_bytes);
  ASSERT_TRUE(mha && mqa && mla);
  const int32_t n_mha = admitted_in_first_step(*mha);
  const int32_t n_mqa = admitted_in_first_step(*mqa);
  const int32_t n_mla = admitted_in_first_step(*mla);
  EXPECT_EQ(n_mha, 4);   // 16 blocks / 4
  EXPECT_EQ(n_mqa, 32);  // 128 blocks / 4 = 32: all of them
  EXPECT_EQ(n_mla, 25);  // 102 blocks / 4
  // Everything still finishes and every block comes back.
  for (LLMEngine* e : {mha.get(), mqa.get(), mla.get()}) {
    while (e->has_unfinished_requests()) e->step();
    EXPECT_EQ(e->stats().num_free_blocks, e->stats().num_total_blocks);
  }
}

}  // namespace
}  // namespace llmserve
