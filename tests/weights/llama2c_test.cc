// Llama2cCheckpoint: stories260K.bin against its README and against stories260K.gguf (llama.cpp's
// conversion of the same weights), plus hand-built and corrupted checkpoints.
#include "weights/llama2c.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_util.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

using testing::IsErrorNaming;
using testing::shared_path;

const std::string kStoriesBin = shared_path("models/stories260K/stories260K.bin");
const std::string kStoriesGguf = shared_path("models/stories260K/stories260K.gguf");

TEST(Llama2cStories, HeaderMatchesReadme) {
  auto c = Llama2cCheckpoint::open(kStoriesBin);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const Llama2cHeader& h = c->header();
  EXPECT_EQ(h.dim, 64);
  EXPECT_EQ(h.hidden_dim, 172);
  EXPECT_EQ(h.n_layers, 5);
  EXPECT_EQ(h.n_heads, 8);
  EXPECT_EQ(h.n_kv_heads, 4);
  EXPECT_EQ(h.vocab_size, 512);
  EXPECT_EQ(h.seq_len, 512);  // README: trained context 512 (the GGUF says 128)
  EXPECT_TRUE(h.shared_classifier);
  EXPECT_EQ(c->path(), kStoriesBin);
}

TEST(Llama2cStories, TensorNamesAndShapes) {
  auto c = Llama2cCheckpoint::open(kStoriesBin);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->tensors().size(), 3u + 9u * 5u);
  auto shape = [&](const std::string& name) {
    const TensorView* t = c->find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->shape : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape("token_embd.weight"), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(shape("output.weight"), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(shape("output_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape("blk.3.attn_k.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape("blk.4.ffn_down.weight"), (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(shape("blk.0.ffn_gate.weight"), (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(c->find_tensor("blk.5.attn_q.weight"), nullptr);
  // Tied classifier: output.weight is the embedding table itself.
  EXPECT_EQ(c->find_tensor("output.weight")->data, c->find_tensor("token_embd.weight")->data);
  // The first float of the embedding follows the 28-byte header (raw file bytes).
  const std::vector<uint8_t> raw = testing::read_file(kStoriesBin);
  float first;
  std::memcpy(&first, raw.data() + 28, 4);
  EXPECT_EQ(static_cast<const float*>(c->find_tensor("token_embd.weight")->data)[0], first);
}

// llama.cpp's llama2.c converter wrote stories260K.gguf from the same weights: every tensor must
// hold bit-identical values under the same name and shape (no Q/K permutation: both formats use
// the adjacent-pair RoPE layout).
TEST(Llama2cStories, IdenticalToGguf) {
  auto c = Llama2cCheckpoint::open(kStoriesBin);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto g = GgufFile::open(kStoriesGguf);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(c->tensors().size(), g->tensors().size());
  for (const TensorView& t : c->tensors()) {
    const TensorView* u = g->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(u->shape, t.shape) << t.name;
    ASSERT_EQ(u->dtype, DType::kF32);
    ASSERT_EQ(u->nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << t.name << " differs";
  }
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                           "blk.4.ffn_down.weight", "output.weight"}) {
    const TensorView* a = c->find_tensor(name);
    const TensorView* b = g->find_tensor(name);
    ASSERT_TRUE(a && b) << name;
    const float* x = static_cast<const float*>(a->data);
    const float* y = static_cast<const float*>(b->data);
    for (int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(x[i], y[i]) << name << "[" << i << "]";
  }
}

// ---- hand-built checkpoints ----

constexpr int32_t kDim = 8, kHidden = 12, kLayers = 2, kHeads = 2, kKvHeads = 1, kVocab = 10,
                  kSeq = 4;
constexpr int32_t kHs = kDim / kHeads, kKvDim = kKvHeads * kHs;

/// Float count of each array in llama2.c file order (per the format in llama2c.h).
std::vector<std::pair<std::string, int64_t>> layout(bool tied) {
  std::vector<std::pair<std::string, int64_t>> l = {{"emb", kVocab * kDim},
                                                    {"rms_att", kLayers * kDim},
                                                    {"wq", kLayers * kDim * kDim},
                                                    {"wk", kLayers * kKvDim * kDim},
                                                    {"wv", kLayers * kKvDim * kDim},
                                                    {"wo", kLayers * kDim * kDim},
                                                    {"rms_ffn", kLayers * kDim},
                                                    {"w1", kLayers * kHidden * kDim},
                                                    {"w2", kLayers * kDim * kHidden},
                                                    {"w3", kLayers * kHidden * kDim},
                                                    {"rms_final", kDim},
                                                    {"freq_cis", kSeq * kHs}};
  if (!tied) l.push_back({"wcls", kVocab * kDim});
  return l;
}

/// Index (in floats) where array `name` starts.
int64_t start_of(const std::string& name, bool tied) {
  int64_t off = 0;
  for (const auto& [n, count] : layout(tied)) {
    if (n == name) return off;
    off += count;
  }
  return -1;
}

/// A checkpoint whose float i holds the value i.
std::vector<uint8_t> make_checkpoint(bool tied, std::vector<int32_t> header = {}) {
  if (header.empty())
    header = {kDim, kHidden, kLayers, kHeads, kKvHeads, tied ? kVocab : -kVocab, kSeq};
  int64_t total = 0;
  for (const auto& [n, count] : layout(tied)) total += count;
  testing::Bytes b;
  for (int32_t v : header) b.put<int32_t>(v);
  for (int64_t i = 0; i < total; ++i) b.put<float>(static_cast<float>(i));
  return b.vec();
}

float first_value(const Llama2cCheckpoint& c, const std::string& name) {
  const TensorView* t = c.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? static_cast<const float*>(t->data)[0] : -1.f;
}

class Llama2cFileTest : public ::testing::Test {
 protected:
  std::string write(const std::vector<uint8_t>& bytes) {
    const std::string path = dir_.file("model.bin");
    testing::write_file(path, bytes);
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(Llama2cFileTest, UntiedClassifierAndLayerViews) {
  auto c = Llama2cCheckpoint::open(write(make_checkpoint(/*tied=*/false)));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->header().shared_classifier);
  EXPECT_EQ(c->header().vocab_size, kVocab);
  EXPECT_EQ(first_value(*c, "token_embd.weight"), 0.f);
  EXPECT_EQ(first_value(*c, "output.weight"), start_of("wcls", false));
  EXPECT_EQ(first_value(*c, "output_norm.weight"), start_of("rms_final", false));
  EXPECT_EQ(first_value(*c, "blk.1.attn_norm.weight"), start_of("rms_att", false) + kDim);
  EXPECT_EQ(first_value(*c, "blk.1.attn_q.weight"), start_of("wq", false) + kDim * kDim);
  EXPECT_EQ(first_value(*c, "blk.1.attn_k.weight"), start_of("wk", false) + kKvDim * kDim);
  EXPECT_EQ(first_value(*c, "blk.0.attn_v.weight"), start_of("wv", false));
  EXPECT_EQ(first_value(*c, "blk.1.attn_output.weight"), start_of("wo", false) + kDim * kDim);
  EXPECT_EQ(first_value(*c, "blk.1.ffn_norm.weight"), start_of("rms_ffn", false) + kDim);
  EXPECT_EQ(first_value(*c, "blk.1.ffn_gate.weight"), start_of("w1", false) + kHidden * kDim);
  EXPECT_EQ(first_value(*c, "blk.1.ffn_down.weight"), start_of("w2", false) + kDim * kHidden);
  EXPECT_EQ(first_value(*c, "blk.1.ffn_up.weight"), start_of("w3", false) + kHidden * kDim);
  EXPECT_EQ(c->find_tensor("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{kKvDim, kDim}));
  EXPECT_EQ(c->find_tensor("blk.0.attn_output.weight")->shape, (std::vector<int64_t>{kDim, kDim}));
  EXPECT_EQ(c->find_tensor("blk.0.ffn_down.weight")->shape, (std::vector<int64_t>{kDim, kHidden}));
  EXPECT_EQ(c->find_tensor("blk.0.ffn_down.weight")->nbytes, size_t{kDim * kHidden * 4});
}

TEST_F(Llama2cFileTest, TiedClassifierAliasesEmbedding) {
  auto c = Llama2cCheckpoint::open(write(make_checkpoint(/*tied=*/true)));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->header().shared_classifier);
  EXPECT_EQ(c->find_tensor("output.weight")->data, c->find_tensor("token_embd.weight")->data);
}

TEST_F(Llama2cFileTest, EveryTruncationAndExtraBytesFail) {
  const std::vector<uint8_t> full = make_checkpoint(false);
  const std::string path = dir_.file("t.bin");
  for (size_t n = 0; n < full.size(); n += (n < 128 ? 1 : 13)) {  // every header prefix
    testing::write_file(path, full.data(), n);
    auto c = Llama2cCheckpoint::open(path);
    ASSERT_TRUE(IsErrorNaming(c, path)) << "prefix " << n;
    ASSERT_EQ(c.status().code(), StatusCode::kDataLoss);
  }
  for (size_t extra : {1, 4, 100}) {
    std::vector<uint8_t> bytes = full;
    bytes.resize(full.size() + extra);
    testing::write_file(path, bytes);
    EXPECT_TRUE(IsErrorNaming(Llama2cCheckpoint::open(path), path, "size"));
  }
  // A tied header on an untied-sized file is a size mismatch too.
  std::vector<uint8_t> bytes = full;
  testing::patch<int32_t>(bytes, 20, kVocab);
  testing::write_file(path, bytes);
  EXPECT_TRUE(IsErrorNaming(Llama2cCheckpoint::open(path), path, "size"));
}

TEST_F(Llama2cFileTest, TruncatedStoriesFails) {
  const std::vector<uint8_t> full = testing::read_file(kStoriesBin);
  const std::string path = dir_.file("stories.bin");
  for (size_t n : {size_t{0}, size_t{27}, size_t{28}, size_t{1000}, full.size() / 2,
                   full.size() - 4, full.size() - 1}) {
    testing::write_file(path, full.data(), n);
    EXPECT_TRUE(IsErrorNaming(Llama2cCheckpoint::open(path), path)) << n;
  }
}

TEST_F(Llama2cFileTest, BadHeaders) {
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  const std::vector<std::pair<std::vector<int32_t>, const char*>> cases = {
      {{0, kHidden, kLayers, kHeads, kKvHeads, kVocab, kSeq}, "dim"},
      {{-8, kHidden, kLayers, kHeads, kKvHeads, kVocab, kSeq}, "dim"},
      {{kDim, 0, kLayers, kHeads, kKvHeads, kVocab, kSeq}, "hidden_dim"},
      {{kDim, kHidden, -1, kHeads, kKvHeads, kVocab, kSeq}, "n_layers"},
      {{kDim, kHidden, kLayers, 0, kKvHeads, kVocab, kSeq}, "n_heads"},
      {{kDim, kHidden, kLayers, kHeads, 0, kVocab, kSeq}, "n_kv_heads"},
      {{kDim, kHidden, kLayers, kHeads, kKvHeads, 0, kSeq}, "vocab"},
      {{kDim, kHidden, kLayers, kHeads, kKvHeads, kMin, kSeq}, "vocab"},
      {{kDim, kHidden, kLayers, kHeads, kKvHeads, kVocab, 0}, "seq_len"},
      {{kDim, kHidden, kLayers, 3, 1, kVocab, kSeq}, "multiple of n_heads"},
      {{kDim, kHidden, kLayers, 4, 3, kVocab, kSeq}, "n_kv_heads"},
      {{kDim, kHidden, kLayers, 8, 1, kVocab, kSeq}, "odd"},  // head size 1
      {{kMax, kMax, kMax, kMax, kMax, kMax, kMax}, "dim"},
      {{kDim, kHidden, kMax, kHeads, kKvHeads, kVocab, kSeq}, "n_layers"},
      {{kDim, kHidden, kLayers, kHeads, kKvHeads, kMax, kSeq}, "vocab"},
  };
  for (const auto& [header, expect] : cases) {
    const std::string path = write(make_checkpoint(true, header));
    auto c = Llama2cCheckpoint::open(path);
    EXPECT_EQ(c.status().code(), StatusCode::kDataLoss) << expect;
    EXPECT_TRUE(IsErrorNaming(c, path, expect));
  }
}

TEST_F(Llama2cFileTest, MissingFile) {
  const std::string path = dir_.file("none.bin");
  auto c = Llama2cCheckpoint::open(path);
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(IsErrorNaming(c, path));
}

}  // namespace
}  // namespace llmserve
