// GgufWriter: what it writes reads back through GgufFile (every metadata type, tensor infos,
// alignment, data written in arbitrary pieces), and misuse gives errors instead of bad files.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "test_util.h"
#include "weights/gguf.h"
#include "weights/gguf_writer.h"

namespace llmserve {
namespace {

using testing::TempDir;

TEST(GgufWriter, RoundTripsMetadataAndTensors) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  GgufWriter w;
  w.add_uint8("t.u8", 200);
  w.add_int8("t.i8", -100);
  w.add_uint16("t.u16", 60000);
  w.add_int16("t.i16", -30000);
  w.add_uint32("t.u32", 4000000000u);
  w.add_int32("t.i32", -2000000000);
  w.add_uint64("t.u64", 1ULL << 40);
  w.add_int64("t.i64", -(1LL << 40));
  w.add_float32("t.f32", 1.5f);
  w.add_float64("t.f64", 0.1);
  w.add_bool("t.bool", true);
  w.add_string("t.str", "h\xc3\xa9llo");
  w.add_string_array("t.strs", {"a", "", "\xe2\x96\x81the"});
  w.add_float32_array("t.f32s", {0.0f, -1.0f, 2.5f});
  w.add_int32_array("t.i32s", {1, -2, 3});
  GgufValue v;
  v.type = GgufType::kUint16;
  v.value = int64_t{7};
  w.add_value("t.value", v);
  // Odd sizes so that padding matters: 3x5 f32 (60 bytes), 7 f16 (14 bytes), 2x3 bf16.
  w.add_tensor("a", {3, 5}, GgmlType::kF32);
  w.add_tensor("b", {7}, GgmlType::kF16);
  w.add_tensor("c", {2, 3}, GgmlType::kBF16);
  EXPECT_EQ(w.data_bytes(), 64u + 32u + 12u + 20u);
  ASSERT_TRUE(w.begin(path).ok());
  std::vector<float> a(15);
  std::iota(a.begin(), a.end(), 0.0f);
  ASSERT_TRUE(w.write(a.data(), 8).ok());  // in pieces, including across nothing
  ASSERT_TRUE(w.write(a.data() + 2, 52).ok());
  std::vector<uint16_t> bc(7 + 6);
  for (int i = 0; i < 7; ++i) bc[i] = f32_to_f16(static_cast<float>(i) / 2);
  for (int i = 0; i < 6; ++i) bc[7 + i] = f32_to_bf16(static_cast<float>(-i));
  ASSERT_TRUE(w.write(bc.data(), bc.size() * 2).ok());  // spans two tensors
  ASSERT_TRUE(w.finish().ok());

  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(*g->get_int("t.u8"), 200);
  EXPECT_EQ(*g->get_int("t.i8"), -100);
  EXPECT_EQ(*g->get_int("t.u16"), 60000);
  EXPECT_EQ(*g->get_int("t.i16"), -30000);
  EXPECT_EQ(*g->get_int("t.u32"), 4000000000LL);
  EXPECT_EQ(*g->get_int("t.i32"), -2000000000);
  EXPECT_EQ(*g->get_int("t.u64"), 1LL << 40);
  EXPECT_EQ(*g->get_int("t.i64"), -(1LL << 40));
  EXPECT_EQ(*g->get_float("t.f32"), 1.5);
  EXPECT_EQ(*g->get_float("t.f64"), 0.1);
  EXPECT_TRUE(*g->get_bool("t.bool"));
  EXPECT_EQ(*g->get_string("t.str"), "h\xc3\xa9llo");
  EXPECT_EQ(*g->get_string_array("t.strs"),
            (std::vector<std::string>{"a", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(*g->get_float_array("t.f32s"), (std::vector<float>{0.0f, -1.0f, 2.5f}));
  EXPECT_EQ(*g->get_int_array("t.i32s"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(g->find_value("t.u8")->type, GgufType::kUint8);
  EXPECT_EQ(g->find_value("t.value")->type, GgufType::kUint16);
  EXPECT_EQ(*g->get_int("t.value"), 7);

  ASSERT_EQ(g->tensors().size(), 3u);
  const TensorView* ta = g->find_tensor("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(ta->dtype, DType::kF32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ta->data) % 32, 0u);
  std::vector<float> want_a(15);
  std::memcpy(want_a.data(), a.data(), 8);
  std::memcpy(want_a.data() + 2, a.data() + 2, 52);
  EXPECT_EQ(std::memcmp(ta->data, want_a.data(), 60), 0);
  const TensorView* tb = g->find_tensor("b");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->dtype, DType::kF16);
  EXPECT_EQ(tb->shape, (std::vector<int64_t>{7}));
  EXPECT_EQ(f16_to_f32(static_cast<const uint16_t*>(tb->data)[5]), 2.5f);
  const TensorView* tc = g->find_tensor("c");
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->dtype, DType::kBF16);
  EXPECT_EQ(tc->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(bf16_to_f32(static_cast<const uint16_t*>(tc->data)[4]), -4.0f);
}

TEST(GgufWriter, NoTensorsIsAValidFile) {
  TempDir dir;
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  ASSERT_TRUE(w.begin(dir.file("e.gguf")).ok());
  ASSERT_TRUE(w.finish().ok());
  auto g = GgufFile::open(dir.file("e.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->tensors().empty());
}

// Quantized tensors: the bytes of llama-quantize's blocks (../shared/testdata/quant_vectors)
// written again read back as the same type, shape and bytes.
TEST(GgufWriter, RoundTripsQuantizedTensors) {
  TempDir dir;
  auto src = GgufFile::open(testing::shared_path("testdata/quant_vectors/vectors.gguf"));
  ASSERT_TRUE(src.ok()) << src.status().message();
  const std::string path = dir.file("q.gguf");
  GgufWriter w;
  for (const TensorView& t : src->tensors()) w.add_tensor(t.name, t.shape, t.dtype);
  w.add_tensor("norm", {3}, DType::kF32);
  ASSERT_TRUE(w.begin(path).ok());
  for (const TensorView& t : src->tensors()) ASSERT_TRUE(w.write(t.data, t.nbytes).ok());
  const float norm[3] = {1, 2, 3};
  ASSERT_TRUE(w.write(norm, sizeof norm).ok());
  ASSERT_TRUE(w.finish().ok());
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->tensors().size(), src->tensors().size() + 1);
  for (const TensorView& t : src->tensors()) {
    const TensorView* r = g->find_tensor(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(r->dtype, t.dtype);
    EXPECT_EQ(r->shape, t.shape);
    ASSERT_EQ(r->nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(r->data, t.data, t.nbytes), 0) << t.name;
  }
  EXPECT_EQ(static_cast<const float*>(g->find_tensor("norm")->data)[2], 3.f);
}

TEST(GgufWriter, Errors) {
  TempDir dir;
  {
    GgufWriter w;
    w.add_uint32("k", 1);
    w.add_uint32("k", 2);
    const Status st = w.begin(dir.file("dup.gguf"));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("duplicate metadata key k"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {2}, GgmlType::kF32);
    w.add_tensor("t", {2}, GgmlType::kF32);
    EXPECT_EQ(w.begin(dir.file("dupt.gguf")).code(), StatusCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {2, 0}, GgmlType::kF32);
    EXPECT_EQ(w.begin(dir.file("zero.gguf")).code(), StatusCode::kInvalidArgument);
  }
  {  // a row length the type cannot hold, an unknown type id
    GgufWriter w;
    w.add_tensor("q", {2, 100}, DType::kQ4_K);
    const Status st = w.begin(dir.file("row.gguf"));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("row length 100 that Q4_K cannot hold"), std::string::npos)
        << st.message();
    GgufWriter w2;
    w2.add_tensor("q", {2, 256}, static_cast<GgmlType>(16));
    const Status st2 = w2.begin(dir.file("type.gguf"));
    EXPECT_NE(st2.message().find("unknown ggml type 16"), std::string::npos) << st2.message();
  }
  {
    GgufWriter w;
    const Status st = w.begin(dir.path() + "/no/such/dir/x.gguf");
    EXPECT_EQ(st.code(), StatusCode::kNotFound);
    EXPECT_NE(st.message().find("no/such/dir/x.gguf"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {2}, GgmlType::kF32);
    ASSERT_TRUE(w.begin(dir.file("short.gguf")).ok());
    const float x[3] = {1, 2, 3};
    ASSERT_TRUE(w.write(x, 4).ok());
    const Status st = w.finish();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("4 of 8 bytes"), std::string::npos) << st.message();
  }
  {
    GgufWriter w;
    w.add_tensor("t", {2}, GgmlType::kF32);
    ASSERT_TRUE(w.begin(dir.file("long.gguf")).ok());
    const float x[3] = {1, 2, 3};
    EXPECT_EQ(w.write(x, 12).code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace llmserve
