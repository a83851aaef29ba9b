// DeepSeek-V2 (MLA) on the synthetic deepseek2-mla model (../shared/testdata/models/synthetic:
// dim 128, 4 heads, q_lora 48, kv_lora 32, qk_nope 16, qk_rope 8, v_head 16, 2 layers):
// logits against the independent float64 NumPy forward pass (naive, unabsorbed MLA), through
// the runner and both attention backends, whole and chunked prefill, several block sizes;
// 16-bit latent caches; the latent cache layout (one row of kv_lora + qk_rope values per token
// and layer, nothing else written); the unsplit attn_kv_b (HF kv_b_proj) layout; and one-line
// errors for a misshapen tensor, a missing tensor and MoE layers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "gguf_rewrite.h"
#include "model_test_util.h"
#include "runner/model_runner.h"
#include "runner/prompt_logits.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}
const std::string kModel = "deepseek2-mla/model.gguf";

std::vector<int32_t> sequence(const std::string& which) {
  std::ifstream in(synth("sequences.json"));
  return nlohmann::json::parse(in)[which].get<std::vector<int32_t>>();
}

using testing::Compare;
using testing::compare;

std::vector<float> reference(const std::string& seq) {
  auto ref = read_npy(synth("deepseek2-mla/numpy_logits_" + seq + ".npy"));
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  return ref.ok() ? ref->data : std::vector<float>{};
}

Expected<std::vector<float>> logits_of(const std::string& path, const std::vector<int32_t>& ids,
                                       int32_t chunk, int32_t block_size,
                                       const std::string& backend, DType kv_dtype) {
  LLMS_ASSIGN_OR_RETURN(auto file, ModelFile::open(path));
  PromptLogitsOptions opt;
  opt.chunk_size = chunk;
  opt.block_size = block_size;
  opt.attention_backend = backend;
  opt.kv_cache_dtype = kv_dtype;
  opt.num_threads = 2;
  return compute_prompt_logits(*file, ids, opt);
}

// ---- (1) float32 latent cache: logits vs NumPy --------------------------------------------

struct Case {
  std::string sequence;  // short / long
  int32_t chunk;         // tokens per forward pass (2048: whole prompt; 1: decode steps)
  int32_t block_size;
  std::string backend;
};

class Deepseek2Logits : public ::testing::TestWithParam<Case> {};

TEST_P(Deepseek2Logits, MatchNumpyReference) {
  const Case& c = GetParam();
  const auto ids = sequence(c.sequence);
  auto got = logits_of(synth(kModel), ids, c.chunk, c.block_size, c.backend, DType::kF32);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const Compare r = compare(*got, reference(c.sequence), 512);
  std::printf("%s chunk %d block %d %s: max |diff| %.3e\n", c.sequence.c_str(), c.chunk,
              c.block_size, c.backend.c_str(), r.max_diff);
  EXPECT_EQ(r.argmax_mismatches, 0);
  EXPECT_LE(r.max_diff, 1e-3);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* b : {"flash", "naive"}) {
    for (const char* s : {"short", "long"})
      for (int32_t chunk : {2048, 7})
        for (int32_t block : {1, 16}) out.push_back({s, chunk, block, b});
    out.push_back({"short", 1, 16, b});   // every token a decode step
    out.push_back({"long", 37, 128, b});  // several chunks inside one block
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Synthetic, Deepseek2Logits, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.sequence + "_c" + std::to_string(info.param.chunk) +
                                  "_b" + std::to_string(info.param.block_size) + "_" +
                                  info.param.backend;
                         });

// ---- (2) 16-bit latent cache ----------------------------------------------------------------

class Deepseek2HalfKv : public ::testing::TestWithParam<DType> {};

TEST_P(Deepseek2HalfKv, StaysNearReference) {
  const DType kv = GetParam();
  const auto ids = sequence("long");
  const auto ref = reference("long");
  std::vector<float> flash_logits;
  for (const char* backend : {"flash", "naive"}) {
    auto got = logits_of(synth(kModel), ids, 7, 16, backend, kv);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Compare r = compare(*got, ref, 512);
    std::printf("%s KV cache, %s: max |diff| %.3e, argmax differs at %d of %zu positions\n",
                std::string(dtype_name(kv)).c_str(), backend, r.max_diff, r.argmax_mismatches,
                ids.size());
    // Only the cached latent row is rounded (c_kv and k_rope to 8 significant bits for bf16,
    // 11 for f16; weights stay f32). Logits here span -15.7..16.4. Measured (flash and naive
    // alike, chunk 7, block 16): bf16 2.7e-2 (~0.17% of the range, i.e. about one bf16 ulp),
    // f16 3.2e-3 (8x smaller: 3 more mantissa bits), no argmax flips; the limits leave ~4x
    // headroom. Argmax: the smallest top-1/top-2 margin of the reference is 1.7e-3, below the
    // bf16 error, so a few flips are allowed.
    EXPECT_LE(r.max_diff, kv == DType::kBF16 ? 0.1 : 0.013);
    EXPECT_LE(r.argmax_mismatches, static_cast<int32_t>(ids.size() / 20));  // <= 5%
    if (flash_logits.empty()) {
      flash_logits = *got;
    } else {
      // The two backends read the same rounded cache: they agree much more closely.
      EXPECT_LE(compare(*got, flash_logits, 512).max_diff, 1e-3);
    }
  }
  // The cache really holds 16-bit values: the logits differ from the f32-cache run.
  auto f32 = logits_of(synth(kModel), ids, 7, 16, "flash", DType::kF32);
  ASSERT_TRUE(f32.ok());
  EXPECT_GT(compare(flash_logits, *f32, 512).max_diff, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Deepseek2HalfKv, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param));
                         });

// ---- (3) the latent cache layout -------------------------------------------------------------

TEST(Deepseek2Cache, OneLatentRowPerTokenAndLayer) {
  auto file = ModelFile::open(synth(kModel));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const ModelConfig& c = (*file)->config();
  EXPECT_EQ(c.architecture, "deepseek2");
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.attention_type(), "MLA");
  const KvCacheSpec spec = c.kv_cache_spec();
  EXPECT_EQ(spec.num_heads, 1);
  EXPECT_EQ(spec.head_size, 32 + 8);
  EXPECT_TRUE(spec.v_shares_k);
  EXPECT_EQ(c.kv_bytes_per_token_per_layer(DType::kF32), (32 + 8) * 4);
  EXPECT_EQ(c.kv_bytes_per_token_per_layer(DType::kBF16), (32 + 8) * 2);
  EXPECT_EQ(ModelRunner::kv_bytes_per_block(c, 16, DType::kF32) /
                (int64_t{16} * c.n_layers),
            (32 + 8) * 4);
  // Without the latent, every head would cache nope + rope key and v_head value values.
  EXPECT_EQ(c.mha_kv_bytes_per_token_per_layer(DType::kF32), 4 * (16 + 8 + 16) * 4);
}

/// Runs the model directly over caches we own (filled with NaN) and checks that exactly the
/// scheduled tokens' rows (kv_lora + qk_rope floats at slot * 40) are written, with finite
/// values, and nothing else: not the other slots of the blocks used, not other blocks.
TEST(Deepseek2Cache, WritesOnlyTheScheduledLatentRows) {
  auto file = ModelFile::open(synth(kModel));
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto model = create_model(**file);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  const int64_t row = c.kv_lora_rank + c.qk_rope_head_dim;
  ASSERT_EQ(row, 40);
  const int32_t block_size = 16, num_blocks = 5;
  const std::vector<int32_t> block_table = {3, 1};  // 24 tokens: slots 48..63, 16..23
  const auto ids = sequence("short");
  ASSERT_EQ(ids.size(), 24u);
  const int32_t n = 24;

  std::vector<std::vector<float>> caches(
      c.n_layers, std::vector<float>(size_t(num_blocks) * block_size * row,
                                     std::numeric_limits<float>::quiet_NaN()));
  std::vector<KVCacheLayer> layers;
  for (auto& t : caches) layers.push_back({t.data(), t.data(), DType::kF32});
  auto attention = make_attention_backend("flash");
  ASSERT_TRUE(attention.ok());
  ThreadPool pool(2);

  // Two steps (a 10-token chunk, then 14 more) with logits for every token.
  std::vector<float> logits(size_t(n) * c.vocab_size);
  std::vector<int64_t> slots;
  for (int32_t start : {0, 10}) {
    const int32_t end = start == 0 ? 10 : n;
    std::vector<int32_t> tok(ids.begin() + start, ids.begin() + end), pos, logits_idx;
    std::vector<int64_t> slot_mapping;
    for (int32_t p = start; p < end; ++p) {
      pos.push_back(p);
      slot_mapping.push_back(int64_t{block_table[p / block_size]} * block_size +
                             p % block_size);
      logits_idx.push_back(p - start);
    }
    slots.insert(slots.end(), slot_mapping.begin(), slot_mapping.end());
    const int32_t qsl[2] = {0, end - start}, seq_len = end;
    ForwardBatch b;
    b.num_tokens = end - start;
    b.token_ids = tok.data();
    b.positions = pos.data();
    b.logits_indices = logits_idx.data();
    b.num_logits = end - start;
    b.attn.num_seqs = 1;
    b.attn.num_tokens = end - start;
    b.attn.query_start_loc = qsl;
    b.attn.seq_lens = &seq_len;
    b.attn.block_tables = block_table.data();
    b.attn.max_blocks_per_seq = 2;
    b.attn.slot_mapping = slot_mapping.data();
    b.attn.block_size = block_size;
    (*model)->forward(b, layers.data(), **attention, &pool,
                      &logits[size_t(start) * c.vocab_size]);
  }
  const Compare r = compare(logits, reference("short"), c.vocab_size);
  EXPECT_LE(r.max_diff, 1e-3);
  EXPECT_EQ(r.argmax_mismatches, 0);

  std::vector<bool> written(size_t(num_blocks) * block_size, false);
  for (int64_t s : slots) written[s] = true;
  for (int32_t l = 0; l < c.n_layers; ++l)
    for (size_t s = 0; s < written.size(); ++s)
      for (int64_t d = 0; d < row; ++d) {
        const float v = caches[l][s * row + d];
        if (written[s]) {
          ASSERT_TRUE(std::isfinite(v)) << "layer " << l << " slot " << s << " value " << d;
        } else {
          ASSERT_TRUE(std::isnan(v)) << "layer " << l << " slot " << s << " value " << d
                                     << " was written";
        }
      }
  // The c_kv part of a row is RMS-normalised (attn_kv_a_norm), so it is not all zeros and a
  // row differs from its neighbour's.
  EXPECT_NE(std::memcmp(&caches[0][48 * row], &caches[0][49 * row], row * sizeof(float)), 0);
}

/// Two sequences batched in every step through the runner (prefill chunks mixed with a
/// decode step, interleaved block tables): each sequence's logits still match its reference.
TEST(Deepseek2Cache, TwoSequencesPerStepThroughTheRunner) {
  auto file = ModelFile::open(synth(kModel));
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const char* backend : {"flash", "naive"}) {
    auto model = create_model(**file);
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto attention = make_attention_backend(backend);
    ASSERT_TRUE(attention.ok());
    ThreadPool pool(2);
    const int32_t block_size = 16;
    auto runner = ModelRunner::create(std::move(*model), std::move(*attention), 16,
                                      block_size, DType::kF32, &pool);
    ASSERT_TRUE(runner.ok()) << runner.status().message();
    const std::vector<int32_t> ids[2] = {sequence("short"), sequence("long")};
    const std::vector<float> refs[2] = {reference("short"), reference("long")};
    // Blocks interleaved between the two sequences: short gets 14, 12; long 15, 13, 11, ...
    const std::vector<int32_t> tables[2] = {{14, 12}, {15, 13, 11, 10, 9, 8, 7, 6, 5, 4}};
    // Token ends per step: short 20 -> 21 (a decode) -> 24; long 40 -> 60 -> 160.
    const int32_t ends[3][2] = {{20, 40}, {21, 60}, {24, 160}};
    std::vector<float> got[2] = {std::vector<float>(refs[0].size()),
                                 std::vector<float>(refs[1].size())};
    int32_t done[2] = {0, 0};
    for (const auto& end : ends) {
      SchedulerOutput out;
      for (int s = 0; s < 2; ++s) {
        ScheduledSequence q;
        q.request_id = s;
        q.token_ids = ids[s].data();
        q.num_computed_tokens = done[s];
        q.num_scheduled_tokens = end[s] - done[s];
        q.block_table = tables[s].data();
        q.num_blocks = static_cast<int32_t>(tables[s].size());
        q.logits_mode = LogitsMode::kAll;
        out.seqs.push_back(q);
        out.total_num_scheduled_tokens += q.num_scheduled_tokens;
      }
      const StepLogits& l = (*runner)->execute(out);
      for (int s = 0; s < 2; ++s) {
        std::copy_n(l.row(l.logits_row_start[s]), size_t(end[s] - done[s]) * 512,
                    &got[s][size_t(done[s]) * 512]);
        done[s] = end[s];
      }
    }
    for (int s = 0; s < 2; ++s) {
      const Compare r = compare(got[s], refs[s], 512);
      EXPECT_LE(r.max_diff, 1e-3) << backend << " sequence " << s;
      EXPECT_EQ(r.argmax_mismatches, 0) << backend << " sequence " << s;
    }
  }
}

// ---- GGUF surgery for the layout and error cases ---------------------------------------------

using testing::OutTensor;
using testing::tensors_of;

using testing::write_gguf;

class Deepseek2Gguf : public ::testing::Test {
 protected:
  void SetUp() override {
    auto g = GgufFile::open(synth(kModel));
    ASSERT_TRUE(g.ok()) << g.status().message();
    src_.emplace(std::move(*g));
    dir_ = std::filesystem::temp_directory_path() /
           ("llmserve_deepseek2_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::vector<OutTensor>& t, const std::string& name) {
    const std::string path = dir_ / name;
    write_gguf(*src_, t, path);
    return path;
  }
  /// create_model's error for the file (empty when it loads).
  std::string model_error(const std::string& path) {
    auto file = ModelFile::open(path);
    if (!file.ok()) return file.status().message();
    auto model = create_model(**file);
    return model.ok() ? "" : model.status().message();
  }
  std::optional<GgufFile> src_;
  std::filesystem::path dir_;
};

// The unsplit attn_kv_b [H * (nope + v_head), kv_lora] (HF kv_b_proj, older GGUFs): per head h
// rows [h*(nope+v), +nope) are W_UK_h = attn_k_b[h]^T and the next v_head rows attn_v_b[h].
TEST_F(Deepseek2Gguf, UnsplitKvBGivesTheSameLogits) {
  const auto out = testing::with_unsplit_kv_b(tensors_of(*src_), 4, 32, 16, 16);
  ASSERT_EQ(out.size(), src_->tensors().size() - 2);  // two layers' k_b + v_b -> one kv_b each
  const std::string path = write(out, "unsplit.gguf");
  const auto ids = sequence("long");
  for (const char* backend : {"flash", "naive"}) {
    auto got = logits_of(path, ids, 37, 16, backend, DType::kF32);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Compare r = compare(*got, reference("long"), 512);
    std::printf("unsplit attn_kv_b, %s: max |diff| %.3e\n", backend, r.max_diff);
    EXPECT_LE(r.max_diff, 1e-3);
    EXPECT_EQ(r.argmax_mismatches, 0);
  }
}

// ---- (4) errors -----------------------------------------------------------------------------

TEST_F(Deepseek2Gguf, MisshapenTensorIsNamed) {
  auto t = tensors_of(*src_);
  for (OutTensor& x : t)
    if (x.name == "blk.1.attn_k_b.weight") x.shape = {4, 16, 32};  // [H, nope, L]: transposed
  const std::string path = write(t, "bad_shape.gguf");
  const std::string err = model_error(path);
  std::printf("error: %s\n", err.c_str());
  EXPECT_NE(err.find("blk.1.attn_k_b.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("[4, 16, 32]"), std::string::npos) << err;
  EXPECT_NE(err.find("[4, 32, 16]"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(Deepseek2Gguf, MissingTensorIsNamed) {
  auto t = tensors_of(*src_);
  std::erase_if(t, [](const OutTensor& x) { return x.name == "blk.0.attn_kv_a_norm.weight"; });
  const std::string err = model_error(write(t, "missing.gguf"));
  std::printf("error: %s\n", err.c_str());
  EXPECT_NE(err.find("blk.0.attn_kv_a_norm.weight"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

// Expert tensors in a layer the metadata makes dense (no expert_count here) are an error naming
// the tensor, not silently unused. (MoE layers themselves: tests/models/test_deepseek_moe.cc.)
TEST_F(Deepseek2Gguf, ExpertTensorsInADenseLayerAreRejected) {
  auto t = tensors_of(*src_);
  t.push_back({"blk.1.ffn_gate_inp.weight", {8, 128}, std::vector<float>(8 * 128, 0.0f)});
  const std::string err = model_error(write(t, "moe.gguf"));
  std::printf("error: %s\n", err.c_str());
  EXPECT_NE(err.find("blk.1.ffn_gate_inp.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("dense layer"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

}  // namespace
}  // namespace llmserve
