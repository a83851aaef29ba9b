// safetensors: the synthetic HF checkpoints in ../shared agree with the GGUF conversions of the
// same models (written by other tools), and malformed files/indexes give clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "weights/gguf.h"
#include "weights/safetensors.h"

namespace llmserve {
namespace {

namespace fs = std::filesystem;

std::string synth(const std::string& rel) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + rel;
}

std::vector<float> as_f32(const TensorView& t) {
  std::vector<float> out(t.numel());
  const auto* h = static_cast<const uint16_t*>(t.data);
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[i] = t.dtype == DType::kF32  ? static_cast<const float*>(t.data)[i]
             : t.dtype == DType::kF16 ? f16_to_f32(h[i])
                                      : bf16_to_f32(h[i]);
  }
  return out;
}

class SyntheticHf : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticHf, TensorsEqualTheGgufConversion) {
  auto hf = SafetensorsModel::open_dir(synth(GetParam() + "/hf"));
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  auto gguf = GgufFile::open(synth(GetParam() + "/model.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  EXPECT_EQ(hf->num_shards(), 1u);
  EXPECT_GT(hf->tensors().size(), 5u);
  // Tensors that llama.cpp's converter copies without permuting rows.
  const std::pair<const char*, const char*> same[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"},
      {"model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight"},
      {"model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight"},
  };
  for (const auto& [hf_name, gguf_name] : same) {
    const TensorView* a = hf->find_tensor(hf_name);
    const TensorView* b = gguf->find_tensor(gguf_name);
    ASSERT_NE(a, nullptr) << hf_name;
    ASSERT_NE(b, nullptr) << gguf_name;
    EXPECT_EQ(a->shape, b->shape) << hf_name;
    EXPECT_EQ(as_f32(*a), as_f32(*b)) << hf_name;
  }
  EXPECT_EQ(hf->find_tensor("no.such.tensor"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Models, SyntheticHf,
                         ::testing::Values("llama-mha", "llama-gqa", "llama-mqa",
                                           "qwen2-gqa-bias", "qwen3-qknorm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// Writes a safetensors file from a header (as given) and a data section.
void write_raw(const fs::path& path, const std::string& header, const std::string& data,
               uint64_t declared_len = 0) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = declared_len ? declared_len : header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() /
                  ("llmserve_st_" + std::to_string(getpid()) + "_" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// A valid two-tensor file: a = [2, 2] f32 {1, 2, 3, 4}, b = [3] bf16 {1, -2, 0.5}.
void write_valid(const fs::path& path, const char* a = "a", const char* b = "b") {
  nlohmann::json h;
  h[a] = {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}};
  h[b] = {{"dtype", "BF16"}, {"shape", {3}}, {"data_offsets", {16, 22}}};
  h["__metadata__"] = {{"format", "pt"}};
  std::string data(22, '\0');
  const float av[4] = {1, 2, 3, 4};
  std::memcpy(data.data(), av, 16);
  const uint16_t bv[3] = {f32_to_bf16(1), f32_to_bf16(-2), f32_to_bf16(0.5f)};
  std::memcpy(data.data() + 16, bv, 6);
  write_raw(path, h.dump(), data);
}

TEST(Safetensors, ReadsValuesShapesAndMetadata) {
  TempDir d;
  write_valid(d.path / "x.safetensors");
  auto f = SafetensorsFile::open((d.path / "x.safetensors").string());
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorView* a = f->find_tensor("a");
  const TensorView* b = f->find_tensor("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(as_f32(*a), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(as_f32(*b), (std::vector<float>{1, -2, 0.5f}));
  EXPECT_EQ(f->metadata().at("format"), "pt");
}

Status open_status(const fs::path& p) {
  auto f = SafetensorsFile::open(p.string());
  return f.ok() ? Status::Ok() : f.status();
}

TEST(Safetensors, MalformedFilesAreRejectedWithTheReason) {
  TempDir d;
  const fs::path p = d.path / "bad.safetensors";
  auto expect_error = [&](StatusCode code, const std::string& needle) {
    const Status s = open_status(p);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(p.string()), std::string::npos) << s.message();
  };
  write_raw(p, "{}", "", 1000);
  expect_error(StatusCode::kDataLoss, "header length 1000");
  write_raw(p, "{not json", "");
  expect_error(StatusCode::kDataLoss, "not a JSON object");
  write_raw(p, R"({"t": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})",
            std::string(8, '\0'));
  expect_error(StatusCode::kUnimplemented, "I64");
  write_raw(p, R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
            std::string(8, '\0'));
  expect_error(StatusCode::kDataLoss, "outside the data section");
  write_raw(p, R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})",
            std::string(16, '\0'));
  expect_error(StatusCode::kDataLoss, "need 12");
  write_raw(p,
            R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "u": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            std::string(12, '\0'));
  expect_error(StatusCode::kDataLoss, "overlap");
  write_raw(p, R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
            std::string(4, '\0'));
  expect_error(StatusCode::kDataLoss, "invalid shape");
  write_raw(p, R"({"t": {"dtype": "F32"}})", "");
  expect_error(StatusCode::kDataLoss, "data_offsets");
  std::ofstream(p, std::ios::binary | std::ios::trunc) << "abc";
  expect_error(StatusCode::kDataLoss, "too short");
}

TEST(SafetensorsModel, ShardedIndexJoinsShardsAndChecksTheMap) {
  TempDir d;
  write_valid(d.path / "model-00001-of-00002.safetensors", "w1", "n1");
  write_valid(d.path / "model-00002-of-00002.safetensors", "w2", "n2");
  nlohmann::json index;
  index["weight_map"] = {{"w1", "model-00001-of-00002.safetensors"},
                         {"n1", "model-00001-of-00002.safetensors"},
                         {"w2", "model-00002-of-00002.safetensors"},
                         {"n2", "model-00002-of-00002.safetensors"}};
  std::ofstream(d.path / "model.safetensors.index.json") << index.dump();
  auto m = SafetensorsModel::open_dir(d.path.string());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->num_shards(), 2u);
  EXPECT_EQ(m->tensors().size(), 4u);
  ASSERT_NE(m->find_tensor("w2"), nullptr);
  EXPECT_EQ(as_f32(*m->find_tensor("w2")), (std::vector<float>{1, 2, 3, 4}));

  index["weight_map"]["missing"] = "model-00002-of-00002.safetensors";
  std::ofstream(d.path / "model.safetensors.index.json", std::ios::trunc) << index.dump();
  auto bad = SafetensorsModel::open_dir(d.path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'missing'"), std::string::npos) << bad.status().message();

  index["weight_map"].erase("missing");
  index["weight_map"]["w1"] = "../elsewhere.safetensors";
  std::ofstream(d.path / "model.safetensors.index.json", std::ios::trunc) << index.dump();
  bad = SafetensorsModel::open_dir(d.path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a file in the model directory"), std::string::npos);

  std::ofstream(d.path / "model.safetensors.index.json", std::ios::trunc) << "[1, 2]";
  bad = SafetensorsModel::open_dir(d.path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("weight_map"), std::string::npos);
}

TEST(SafetensorsModel, EmptyDirectoryIsNotFound) {
  TempDir d;
  auto m = SafetensorsModel::open_dir(d.path.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace llmserve
