// GgufFile on hand-written and corrupted files: every corruption must give a non-ok Status
// whose one-line message names the file, never a crash or an out-of-bounds read.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <tuple>
#include <utility>

#include "test_util.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

using testing::GgufWriter;
using testing::IsErrorNaming;
using testing::patch;

std::vector<uint8_t> f16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = f32_to_f16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

std::vector<uint8_t> bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = f32_to_bf16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

/// A small valid file with every metadata type and F32/F16/BF16 tensors.
GgufWriter sample_writer() {
  GgufWriter w;
  w.kv_scalar<uint8_t>("u8", 0, 200).kv_scalar<int8_t>("i8", 1, -100);
  w.kv_scalar<uint16_t>("u16", 2, 60000).kv_scalar<int16_t>("i16", 3, -30000);
  w.kv_scalar<uint32_t>("u32", 4, 4000000000u).kv_scalar<int32_t>("i32", 5, -2000000000);
  w.kv_scalar<float>("f32", 6, 0.5f).kv_scalar<uint8_t>("bool", 7, 1);
  w.kv_string("general.architecture", "llama");
  w.kv_scalar<uint64_t>("u64", 10, uint64_t{1} << 62)
      .kv_scalar<int64_t>("i64", 11, -(int64_t{1} << 62));
  w.kv_scalar<double>("f64", 12, 0.25);
  w.kv_string_array("strings", {"a", "", "hello"});
  {
    testing::Bytes b;  // array of 2 arrays of int32: [[1, 2], [3]]
    b.put<uint32_t>(9).put<uint64_t>(2);
    b.put<uint32_t>(5).put<uint64_t>(2).put<int32_t>(1).put<int32_t>(2);
    b.put<uint32_t>(5).put<uint64_t>(1).put<int32_t>(3);
    w.kv("nested", 9, b.vec());
  }
  {
    testing::Bytes b;  // array of float32
    b.put<uint32_t>(6).put<uint64_t>(3).put<float>(1.5f).put<float>(-2.f).put<float>(3.f);
    w.kv("floats", 9, b.vec());
  }
  w.tensor_f32("a.weight", {3, 2}, {0, 1, 2, 3, 4, 5});
  w.tensor("b.weight", {4}, 1, f16_bytes({1, -2, 0.5f, 65504}));
  w.tensor("c.weight", {2, 2, 2}, 30, bf16_bytes({1, 2, 3, 4, 5, 6, 7, -8}));
  return w;
}

class GgufCorruptTest : public ::testing::Test {
 protected:
  std::string write(const std::vector<uint8_t>& bytes, const std::string& name = "t.gguf") {
    std::string path = dir_.file(name);
    testing::write_file(path, bytes);
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(GgufCorruptTest, SampleFileReadsBack) {
  GgufWriter::Layout lay;
  const std::string path = write(sample_writer().build(&lay));
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*g->get_int("u8"), 200);
  EXPECT_EQ(*g->get_int("i8"), -100);
  EXPECT_EQ(*g->get_int("u16"), 60000);
  EXPECT_EQ(*g->get_int("i16"), -30000);
  EXPECT_EQ(*g->get_int("u32"), 4000000000LL);
  EXPECT_EQ(*g->get_int("i32"), -2000000000);
  EXPECT_EQ(*g->get_float("f32"), 0.5);
  EXPECT_EQ(*g->get_bool("bool"), true);
  EXPECT_EQ(*g->get_int("u64"), int64_t{1} << 62);
  EXPECT_EQ(*g->get_int("i64"), -(int64_t{1} << 62));
  EXPECT_EQ(*g->get_float("f64"), 0.25);
  EXPECT_EQ(*g->get_string_array("strings"), (std::vector<std::string>{"a", "", "hello"}));
  EXPECT_EQ(*g->get_float_array("floats"), (std::vector<float>{1.5f, -2.f, 3.f}));
  const GgufValue* nested = g->find_value("nested");
  ASSERT_NE(nested, nullptr);
  const auto& outer = std::get<GgufValue::Array>(nested->value);
  ASSERT_EQ(outer.elem_type, GgufType::kArray);
  ASSERT_EQ(outer.items.size(), 2u);
  EXPECT_EQ(std::get<GgufValue::Array>(outer.items[1].value).items.size(), 1u);
  EXPECT_EQ(g->get_int("f32").status().code(), StatusCode::kInvalidArgument);

  ASSERT_EQ(g->tensors().size(), 3u);
  const TensorView& a = g->tensors()[0];
  EXPECT_EQ(a.name, "a.weight");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));  // ne {3, 2} reversed
  EXPECT_EQ(static_cast<const float*>(a.data)[5], 5.f);
  const TensorView* b = g->find_tensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(b->nbytes, 8u);
  EXPECT_EQ(f16_to_f32(static_cast<const uint16_t*>(b->data)[3]), 65504.f);
  const TensorView* c = g->find_tensor("c.weight");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(bf16_to_f32(static_cast<const uint16_t*>(c->data)[7]), -8.f);
}

TEST_F(GgufCorruptTest, Version2AndCustomAlignment) {
  GgufWriter w = sample_writer();
  w.version = 2;
  w.alignment = 64;
  w.kv_scalar<uint32_t>("general.alignment", 4, 64);
  const std::string path = write(w.build());
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->version(), 2u);
  for (const TensorView& t : g->tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u) << t.name;
  }
  EXPECT_EQ(static_cast<const float*>(g->tensors()[0].data)[4], 4.f);
}

TEST_F(GgufCorruptTest, NoTensors) {
  GgufWriter w;
  w.kv_string("general.architecture", "x");
  const std::string path = write(w.build());
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->tensors().empty());
}

TEST_F(GgufCorruptTest, EveryTruncationOfSampleFails) {
  const std::vector<uint8_t> full = sample_writer().build();
  const std::string path = dir_.file("trunc.gguf");
  for (size_t n = 0; n < full.size(); ++n) {
    testing::write_file(path, full.data(), n);
    auto g = GgufFile::open(path);
    ASSERT_TRUE(IsErrorNaming(g, path)) << "prefix " << n;
    ASSERT_EQ(g.status().code(), StatusCode::kDataLoss) << g.status().message();
  }
}

TEST_F(GgufCorruptTest, TruncationsOfStoriesFail) {
  const std::vector<uint8_t> full =
      testing::read_file(testing::shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_GT(full.size(), 1000000u);
  std::vector<size_t> lengths;
  // Metadata and tensor infos end at byte 14176 (where the data section starts).
  for (size_t n = 0; n < 16384; ++n) lengths.push_back(n);
  for (size_t n = 16384; n < full.size(); n += 9973) lengths.push_back(n);  // tensor data
  for (size_t n = full.size() - 64; n < full.size(); ++n) lengths.push_back(n);
  const std::string path = dir_.file("stories_trunc.gguf");
  for (size_t n : lengths) {
    testing::write_file(path, full.data(), n);
    auto g = GgufFile::open(path);
    ASSERT_TRUE(IsErrorNaming(g, path)) << "prefix " << n;
  }
  // The error for a prefix ending inside the tensor infos says so.
  testing::write_file(path, full.data(), full.size() - 1);
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "truncated"));
}

TEST_F(GgufCorruptTest, BadMagic) {
  std::vector<uint8_t> bytes = sample_writer().build();
  bytes[0] = 'X';
  const std::string path = write(bytes);
  auto g = GgufFile::open(path);
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(IsErrorNaming(g, path, "magic"));
}

TEST_F(GgufCorruptTest, UnsupportedVersions) {
  for (uint32_t version : {0u, 1u, 4u, 99u, 0x03000000u}) {
    std::vector<uint8_t> bytes = sample_writer().build();
    patch<uint32_t>(bytes, 4, version);
    const std::string path = write(bytes);
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << version;
    EXPECT_TRUE(IsErrorNaming(g, path, version == 0x03000000u ? "big-endian" : "version"));
  }
}

TEST_F(GgufCorruptTest, HugeCounts) {
  GgufWriter::Layout lay;
  const std::vector<uint8_t> good = sample_writer().build(&lay);
  for (uint64_t huge : {uint64_t{1} << 40, uint64_t{1} << 62, ~uint64_t{0}}) {
    std::vector<uint8_t> bytes = good;
    patch<uint64_t>(bytes, lay.tensor_count_pos, huge);
    std::string path = write(bytes);
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "tensor count"));
    bytes = good;
    patch<uint64_t>(bytes, lay.kv_count_pos, huge);
    path = write(bytes);
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "kv count"));
  }
}

TEST_F(GgufCorruptTest, HugeStringLength) {
  GgufWriter::Layout lay;
  std::vector<uint8_t> bytes = sample_writer().build(&lay);
  patch<uint64_t>(bytes, lay.first_kv_pos, uint64_t{1} << 62);  // first key's length
  const std::string path = write(bytes);
  auto g = GgufFile::open(path);
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(IsErrorNaming(g, path, "length"));
}

TEST_F(GgufCorruptTest, HugeArrayCount) {
  for (uint32_t elem_type : {0u, 8u, 9u}) {  // uint8, string, array elements
    GgufWriter w;
    testing::Bytes b;
    b.put<uint32_t>(elem_type).put<uint64_t>(uint64_t{1} << 61).put<uint64_t>(0);
    w.kv("arr", 9, b.vec());
    const std::string path = write(w.build());
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "arr")) << elem_type;
  }
}

// 2^24 + 1 one-byte elements fit in the file but exceed the total element budget (each
// element is a ~50-byte GgufValue in memory).
TEST_F(GgufCorruptTest, TooManyArrayElements) {
  const uint64_t n = (uint64_t{1} << 24) + 1;
  GgufWriter w;
  testing::Bytes b;
  b.put<uint32_t>(0).put<uint64_t>(n);
  b.vec().resize(b.size() + n, 0);
  w.kv("bytes", 9, b.vec());
  const std::string path = write(w.build());
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "limit"));
}

TEST_F(GgufCorruptTest, BadMetadataValues) {
  struct Case {
    const char* what;
    uint32_t type;
    std::vector<uint8_t> value;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"unknown type", 13, {0, 0, 0, 0}, "type 13"},
      {"bool 2", 7, {2}, "bool"},
      {"uint64 > INT64_MAX", 10, {0, 0, 0, 0, 0, 0, 0, 0x80}, "INT64_MAX"},
      {"array of unknown type", 9, {77, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, "element type"},
  };
  {  // arrays nested 100 deep
    testing::Bytes b;
    for (int i = 0; i < 100; ++i) b.put<uint32_t>(9).put<uint64_t>(1);
    cases.push_back({"deep nesting", 9, b.vec(), "nested"});
  }
  for (const Case& c : cases) {
    GgufWriter w;
    w.kv("k", c.type, c.value);
    const std::string path = write(w.build());
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << c.what;
    EXPECT_TRUE(IsErrorNaming(g, path, c.expect)) << c.what;
  }
}

TEST_F(GgufCorruptTest, DuplicateKey) {
  GgufWriter w;
  w.kv_string("k", "a").kv_string("k", "b");
  const std::string path = write(w.build());
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "duplicate metadata key 'k'"));
}

TEST_F(GgufCorruptTest, BadAlignment) {
  for (uint32_t align : {0u, 3u, 48u}) {
    GgufWriter w = sample_writer();
    w.kv_scalar<uint32_t>("general.alignment", 4, align);
    const std::string path = write(w.build());
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "general.alignment")) << align;
  }
  GgufWriter w = sample_writer();
  w.kv_string("general.alignment", "32");
  const std::string path = write(w.build());
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "general.alignment"));
}

TEST_F(GgufCorruptTest, TensorOffsetBeyondFile) {
  for (uint64_t off : {uint64_t{1} << 20, uint64_t{1} << 40, ~uint64_t{0} - 31}) {
    GgufWriter::Layout lay;
    std::vector<uint8_t> bytes = sample_writer().build(&lay);
    patch<uint64_t>(bytes, lay.offset_pos[1], off);
    const std::string path = write(bytes);
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
    EXPECT_TRUE(IsErrorNaming(g, path, "b.weight")) << off;
  }
}

TEST_F(GgufCorruptTest, MisalignedOffset) {
  GgufWriter::Layout lay;
  std::vector<uint8_t> bytes = sample_writer().build(&lay);
  patch<uint64_t>(bytes, lay.offset_pos[0], 4);
  const std::string path = write(bytes);
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "alignment"));
}

TEST_F(GgufCorruptTest, OverlappingTensors) {
  GgufWriter::Layout lay;
  std::vector<uint8_t> bytes = sample_writer().build(&lay);
  patch<uint64_t>(bytes, lay.offset_pos[1], 0);  // b.weight on top of a.weight
  const std::string path = write(bytes);
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "overlap"));
}

TEST_F(GgufCorruptTest, UnsupportedTensorType) {
  for (uint32_t type : {9u, 15u, 16u, 28u, 39u, 42u, 1000u}) {
    GgufWriter::Layout lay;
    std::vector<uint8_t> bytes = sample_writer().build(&lay);
    patch<uint32_t>(bytes, lay.type_pos[2], type);
    const std::string path = write(bytes);
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << type;
    EXPECT_TRUE(IsErrorNaming(g, path, "'c.weight'"));
    EXPECT_TRUE(IsErrorNaming(g, path, fmt::format("type {}", type)));
  }
  // The types a quantized tensor of the right size would still be refused as, by name.
  const std::pair<uint32_t, const char*> named[] = {
      {16, "IQ2_XXS"}, {19, "IQ1_S"}, {21, "IQ3_S"}, {34, "TQ1_0"}, {39, "MXFP4"},
      {15, "Q8_K"}, {41, "Q1_0"}, {42, "unknown"}};
  for (const auto& [type, name] : named) {
    GgufWriter w;
    w.tensor("blk.0.ffn_up.weight", {256, 2}, type, std::vector<uint8_t>(1024));
    const std::string path = write(w.build());
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << name;
    EXPECT_TRUE(IsErrorNaming(g, path, fmt::format("'blk.0.ffn_up.weight' has unsupported type {} ({})", type, name)));
  }
}

/// The 12 quantized types load with the byte size their blocks imply (ggml-common.h).
TEST_F(GgufCorruptTest, QuantizedTensorsRead) {
  const std::pair<uint32_t, size_t> types[] = {{2, 18},   {3, 20},   {6, 22},   {7, 24},
                                               {8, 34},   {10, 84},  {11, 110}, {12, 144},
                                               {13, 176}, {14, 210}, {20, 18},  {23, 136}};
  for (const auto& [type, block_bytes] : types) {
    const size_t block_elems = block_bytes == 84 || block_bytes >= 110 ? 256 : 32;
    GgufWriter w;
    // 3 rows of 2 blocks, then a float tensor after it (so the layout is checked too).
    w.tensor("q", {2 * block_elems, 3}, type, std::vector<uint8_t>(6 * block_bytes, 0x11));
    w.tensor_f32("after", {2}, {1, 2});
    const std::string path = write(w.build());
    auto g = GgufFile::open(path);
    ASSERT_TRUE(g.ok()) << g.status().message();
    const TensorView* t = g->find_tensor("q");
    EXPECT_EQ(dtype_ggml_id(t->dtype), type);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{3, static_cast<int64_t>(2 * block_elems)}));
    EXPECT_EQ(t->nbytes, 6 * block_bytes);
    EXPECT_EQ(static_cast<const float*>(g->find_tensor("after")->data)[1], 2.f);
  }
}

TEST_F(GgufCorruptTest, QuantizedRowLengthNotWholeBlocks) {
  const std::tuple<uint32_t, uint64_t, const char*> cases[] = {
      {12, 100, "Q4_K"}, {2, 48, "Q4_0"}, {14, 128, "Q6_K"}, {23, 32, "IQ4_XS"}};
  for (const auto& [type, row, name] : cases) {
    GgufWriter w;
    w.tensor("blk.0.attn_q.weight", {row, 4}, type, std::vector<uint8_t>(4096));
    const std::string path = write(w.build());
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << name;
    EXPECT_TRUE(IsErrorNaming(g, path, fmt::format("tensor 'blk.0.attn_q.weight' of shape [4, {}] "
                                                   "has a row length {} that {} cannot hold",
                                                   row, row, name)));
  }
  // A 1-D tensor's row is its length; a scalar is a row of 1.
  GgufWriter w;
  w.tensor("norm", {16}, 8, std::vector<uint8_t>(34));
  const std::string path = write(w.build());
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "row length 16 that Q8_0 cannot hold"));
}

TEST_F(GgufCorruptTest, QuantizedTensorTruncated) {
  GgufWriter w;
  w.tensor_f32("a", {2}, {1, 2});
  w.tensor("blk.0.ffn_down.weight", {256, 4}, 12, std::vector<uint8_t>(4 * 144));
  std::vector<uint8_t> bytes = w.build();
  bytes.resize(bytes.size() - 100);  // the last tensor's data is cut short
  const std::string path = write(bytes);
  auto g = GgufFile::open(path);
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(IsErrorNaming(g, path, "truncated: data of tensor 'blk.0.ffn_down.weight' (576 bytes"));
}

TEST_F(GgufCorruptTest, QuantizedSizeMismatch) {
  // Q8_0 data (2 rows x 34 bytes) declared as Q4_0 (2 x 18): the next tensor starts where the
  // Q8_0 bytes end, not where Q4_0's would.
  GgufWriter::Layout lay;
  GgufWriter w;
  w.tensor("blk.0.attn_k.weight", {32, 2}, 8, std::vector<uint8_t>(68, 0x22));
  w.tensor_f32("blk.0.attn_norm.weight", {64}, std::vector<float>(64, 1.f));
  std::vector<uint8_t> bytes = w.build(&lay);
  patch<uint32_t>(bytes, lay.type_pos[0], 2);
  const std::string path = write(bytes);
  auto g = GgufFile::open(path);
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(IsErrorNaming(g, path, "size mismatch: tensor 'blk.0.attn_k.weight' (Q4_0 of shape "
                                     "[2, 32]) has 36 bytes, but the next tensor "
                                     "'blk.0.attn_norm.weight' starts 96 bytes after it"));
  // More rows than the data holds (4 rows of Q8_0 = 136 bytes) run into the next tensor.
  patch<uint32_t>(bytes, lay.type_pos[0], 8);
  patch<uint64_t>(bytes, lay.ndims_pos[0] + 4 + 8, 4);  // ne[1] = 4
  const std::string path2 = write(bytes, "t2.gguf");
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path2), path2, "overlap"));
}

TEST_F(GgufCorruptTest, QuantizedHugeDimensionsDoNotOverflow) {
  for (uint32_t type : {2u, 12u, 14u, 23u}) {
    GgufWriter w;
    w.tensor("big", {uint64_t{1} << 62, uint64_t{1} << 40}, type, std::vector<uint8_t>(256));
    const std::string path = write(w.build());
    auto g = GgufFile::open(path);
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << type;
    EXPECT_TRUE(IsErrorNaming(g, path, "tensor 'big'")) << type;
  }
}

TEST_F(GgufCorruptTest, BadDimensions) {
  {  // a zero dimension
    GgufWriter w;
    w.tensor_f32("z", {0, 2}, {});
    const std::string path = write(w.build());
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "size 0"));
  }
  {  // more than 4 dimensions
    GgufWriter w;
    w.tensor_f32("five", {1, 1, 1, 1, 1}, {7});
    const std::string path = write(w.build());
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "dimensions"));
  }
  {  // dimensions whose product overflows 64 bits
    GgufWriter w;
    w.tensor_f32("big", {uint64_t{1} << 40, uint64_t{1} << 40}, {0});
    const std::string path = write(w.build());
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "big"));
  }
  {  // a dimension above INT64_MAX
    GgufWriter w;
    w.tensor_f32("neg", {~uint64_t{0}}, {0});
    const std::string path = write(w.build());
    EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "neg"));
  }
}

TEST_F(GgufCorruptTest, DuplicateTensorName) {
  GgufWriter w;
  w.tensor_f32("same", {1}, {1}).tensor_f32("same", {1}, {2});
  const std::string path = write(w.build());
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(path), path, "duplicate tensor name 'same'"));
}

TEST_F(GgufCorruptTest, MissingAndUnreadablePaths) {
  const std::string missing = dir_.file("does_not_exist.gguf");
  auto g = GgufFile::open(missing);
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(IsErrorNaming(g, missing));
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(dir_.path()), dir_.path()));  // a directory
  const std::string empty = write({}, "empty.gguf");
  EXPECT_TRUE(IsErrorNaming(GgufFile::open(empty), empty));
}

// Random byte corruption of the sample file: any outcome but a crash (run under ASan/valgrind
// to check for out-of-bounds reads). Results that do parse must be self-consistent.
TEST_F(GgufCorruptTest, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> good = sample_writer().build();
  const std::string path = dir_.file("fuzz.gguf");
  std::mt19937 rng(1234);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng() % 4 == 0 ? 0xff : rng());
    }
    testing::write_file(path, bytes);
    auto g = GgufFile::open(path);
    if (!g.ok()) {
      ++failures;
      ASSERT_TRUE(IsErrorNaming(g, path));
      continue;
    }
    for (const TensorView& t : g->tensors()) {
      const int64_t row = t.shape.empty() ? 1 : t.shape.back();
      ASSERT_EQ(t.nbytes, static_cast<size_t>(t.numel() / row * dtype_row_bytes(t.dtype, row)));
      ASSERT_LE(t.nbytes, bytes.size());
    }
  }
  EXPECT_GT(failures, 100);
}

}  // namespace
}  // namespace llmserve
