// read_npy / write_npy against NumPy-written reference files and hand-made variants.
#include "weights/npy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace llmserve {
namespace {

using testing::IsErrorNaming;
using testing::shared_path;

std::string synth(const std::string& model, const std::string& file) {
  return shared_path("testdata/models/synthetic/" + model + "/" + file);
}

const char* const kModels[] = {"llama-mha",      "llama-gqa",    "llama-mqa",
                               "qwen2-gqa-bias", "qwen3-qknorm", "deepseek2-mla"};

TEST(NpyReference, ShapesOfReferenceLogits) {
  for (const char* model : kModels) {
    auto s = read_npy(synth(model, "numpy_logits_short.npy"));
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->shape, (std::vector<int64_t>{24, 512})) << model;  // 24 tokens, vocab 512
    EXPECT_EQ(s->data.size(), 24u * 512u);
    auto l = read_npy(synth(model, "llamacpp_logits_long.npy"));
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_EQ(l->shape, (std::vector<int64_t>{160, 512})) << model;  // 160 tokens
  }
}

size_t argmax(const float* row, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// The README's facts about the two independent references: max |diff| < 1.4e-2 and identical
// argmax at every position. Holding them checks that the data bytes were decoded correctly.
TEST(NpyReference, NumpyAndLlamaCppLogitsAgree) {
  for (const char* model : kModels) {
    for (const char* len : {"short", "long"}) {
      SCOPED_TRACE(std::string(model) + " " + len);
      auto a = read_npy(synth(model, std::string("numpy_logits_") + len + ".npy"));
      auto b = read_npy(synth(model, std::string("llamacpp_logits_") + len + ".npy"));
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(a->shape, b->shape);
      float max_diff = 0;
      for (size_t i = 0; i < a->data.size(); ++i) {
        ASSERT_TRUE(std::isfinite(a->data[i]));
        max_diff = std::max(max_diff, std::abs(a->data[i] - b->data[i]));
      }
      EXPECT_LT(max_diff, 1.4e-2f);
      const size_t vocab = a->shape[1];
      for (int64_t t = 0; t < a->shape[0]; ++t) {
        EXPECT_EQ(argmax(&a->data[t * vocab], vocab), argmax(&b->data[t * vocab], vocab)) << t;
      }
    }
  }
}

class NpyFileTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) { return dir_.file(name); }
  testing::TempDir dir_;
};

// Writing the reference array back must reproduce NumPy's file byte for byte.
TEST_F(NpyFileTest, WriteMatchesNumpyBytes) {
  const std::string ref = synth("llama-gqa", "numpy_logits_short.npy");
  auto a = read_npy(ref);
  ASSERT_TRUE(a.ok());
  const std::string out = path("copy.npy");
  ASSERT_TRUE(write_npy(out, a->shape, a->data.data(), a->data.size()).ok());
  EXPECT_EQ(testing::read_file(out), testing::read_file(ref));
}

TEST_F(NpyFileTest, RoundTripShapes) {
  const std::vector<std::vector<int64_t>> shapes = {{7}, {2, 3, 4}, {}, {0, 5}, {1, 1, 1, 1, 3}};
  for (const auto& shape : shapes) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i) * 0.5f - 3.f;
    const std::string p = path("rt.npy");
    ASSERT_TRUE(write_npy(p, shape, data.data(), n).ok());
    const std::vector<uint8_t> bytes = testing::read_file(p);
    EXPECT_EQ((bytes.size() - n * 4) % 64, 0u);  // data starts on a 64-byte boundary
    EXPECT_EQ(std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8), 0);
    auto r = read_npy(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->shape, shape);
    EXPECT_EQ(r->data, data);
  }
  // NumPy's spelling of a 1-d shape is "(7,)".
  ASSERT_TRUE(write_npy(path("one.npy"), {7}, std::vector<float>(7).data(), 7).ok());
  const std::vector<uint8_t> bytes = testing::read_file(path("one.npy"));
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }"),
            std::string::npos);
}

/// A .npy file with the given version, header text and data bytes.
std::vector<uint8_t> npy_bytes(const std::string& dict, size_t data_bytes, int major = 1) {
  testing::Bytes b;
  for (char c : std::string("\x93NUMPY")) b.put<char>(c);
  b.put<uint8_t>(static_cast<uint8_t>(major)).put<uint8_t>(0);
  const std::string header = dict + "\n";
  if (major == 1)
    b.put<uint16_t>(static_cast<uint16_t>(header.size()));
  else
    b.put<uint32_t>(static_cast<uint32_t>(header.size()));
  for (char c : header) b.put<char>(c);
  for (size_t i = 0; i < data_bytes; ++i) b.put<uint8_t>(0);
  return b.vec();
}

TEST_F(NpyFileTest, HeaderVariantsAccepted) {
  const std::vector<std::pair<std::string, int>> ok_headers = {
      {"{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}", 1},
      {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, )}", 1},
      {"{'descr':'<f4','fortran_order':False,'shape':(3,),}", 2},  // format version 2.0
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }", 3},
  };
  for (size_t i = 0; i < ok_headers.size(); ++i) {
    const std::string p = path("v.npy");
    testing::write_file(p, npy_bytes(ok_headers[i].first, 12, ok_headers[i].second));
    auto r = read_npy(p);
    ASSERT_TRUE(r.ok()) << ok_headers[i].first << ": " << r.status().message();
    EXPECT_EQ(r->shape, (std::vector<int64_t>{3}));
  }
}

TEST_F(NpyFileTest, Errors) {
  struct Case {
    std::vector<uint8_t> bytes;
    StatusCode code;
    const char* expect;
  };
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::vector<uint8_t> bad_magic = npy_bytes(good, 24);
  bad_magic[1] = 'X';
  const std::vector<Case> cases = {
      {bad_magic, StatusCode::kDataLoss, "magic"},
      {npy_bytes(good, 20), StatusCode::kDataLoss, "truncated"},
      {npy_bytes(good, 28), StatusCode::kDataLoss, "size"},
      {npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 48),
       StatusCode::kUnimplemented, "<f8"},
      {npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24),
       StatusCode::kUnimplemented, ">f4"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24),
       StatusCode::kUnimplemented, "Fortran"},
      {npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", 24), StatusCode::kDataLoss, "header"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24),
       StatusCode::kDataLoss, "header"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 24),
       StatusCode::kDataLoss, "header"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", 24),
       StatusCode::kDataLoss, "header"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                 "'shape': (99999999999, 99999999999, 99999999999), }",
                 24),
       StatusCode::kDataLoss, "truncated"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                 "'shape': (999999999999999999999, 1), }",
                 24),
       StatusCode::kDataLoss, "header"},
      {npy_bytes(good, 24, 9), StatusCode::kUnimplemented, "version"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = path(fmt::format("bad{}.npy", i));
    testing::write_file(p, cases[i].bytes);
    auto r = read_npy(p);
    EXPECT_EQ(r.status().code(), cases[i].code) << i << ": " << r.status().message();
    EXPECT_TRUE(IsErrorNaming(r, p, cases[i].expect)) << i;
  }
}

TEST_F(NpyFileTest, EveryTruncationFails) {
  const std::vector<uint8_t> full =
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  const std::string p = path("trunc.npy");
  for (size_t n = 0; n < full.size(); ++n) {
    testing::write_file(p, full.data(), n);
    ASSERT_TRUE(IsErrorNaming(read_npy(p), p)) << n;
  }
}

TEST_F(NpyFileTest, WriteErrors) {
  const float data[6] = {};
  const std::string p = path("w.npy");
  EXPECT_EQ(write_npy(p, {2, 2}, data, 6).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(write_npy(p, {-2, -3}, data, 6).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(write_npy(p, {int64_t{1} << 62, 8}, data, 6).code(), StatusCode::kInvalidArgument);
  const std::string bad = path("no_such_dir/x.npy");
  Status s = write_npy(bad, {6}, data, 6);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find(bad), std::string::npos);
  auto missing = read_npy(path("missing.npy"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// NpyWriter streams the same bytes write_npy writes at once, and refuses too many / too few.
TEST_F(NpyFileTest, StreamingWriterMatchesWriteNpy) {
  float data[12];
  for (int i = 0; i < 12; ++i) data[i] = 0.5f * i - 2;
  const std::string whole = path("whole.npy"), parts = path("parts.npy");
  ASSERT_TRUE(write_npy(whole, {3, 4}, data, 12).ok());
  {
    auto w = NpyWriter::create(parts, {3, 4});
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE(w->write(data, 5).ok());
    ASSERT_TRUE(w->write(data + 5, 0).ok());
    ASSERT_TRUE(w->write(data + 5, 7).ok());
    EXPECT_EQ(w->write(data, 1).code(), StatusCode::kInvalidArgument);  // past the shape
    ASSERT_TRUE(w->finish().ok());
  }
  EXPECT_EQ(testing::read_file(whole), testing::read_file(parts));
  auto w = NpyWriter::create(path("short.npy"), {3, 4});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write(data, 11).ok());
  const Status st = w->finish();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("11 of 12 values"), std::string::npos) << st.message();
  EXPECT_EQ(NpyWriter::create(path("neg.npy"), {-1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NpyWriter::create(path("nodir/x.npy"), {1}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace llmserve
