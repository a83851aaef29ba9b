// `llmserve dequantize` as a user runs it: the twelve quantized types of
// ../shared/testdata/quant_vectors come out bit for bit equal to gguf-py's dequantization,
// float tensors of a model file come out as stored, shapes follow the rule (1-D [n], else
// [rows, row length]), and bad input is a one-line error.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "weights/gguf.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

using testing::run_llmserve;

std::string quote(const std::string& s) { return "'" + s + "'"; }
std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }

class Dequantize : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = std::filesystem::temp_directory_path() / ("llmserve_dq_" + std::to_string(getpid()));
    std::filesystem::remove_all(out_);
  }
  void TearDown() override { std::filesystem::remove_all(out_); }
  std::filesystem::path out_;
};

void expect_bits_equal(const NpyArray& got, const NpyArray& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  ASSERT_EQ(got.data.size(), want.data.size()) << what;
  size_t mismatches = 0;
  for (size_t i = 0; i < got.data.size(); ++i)
    mismatches += std::bit_cast<uint32_t>(got.data[i]) != std::bit_cast<uint32_t>(want.data[i]);
  EXPECT_EQ(mismatches, 0u) << what;
}

TEST_F(Dequantize, EveryTypeBitForBitEqualToGgufPy) {
  auto r = run_llmserve("dequantize " + quote(shared("testdata/quant_vectors/vectors.gguf")) +
                        " --out-dir " + quote(out_.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const char* types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
                         "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};
  for (const char* t : types) {
    auto got = read_npy((out_ / (std::string(t) + ".npy")).string());
    ASSERT_TRUE(got.ok()) << got.status().message();
    auto want = read_npy(shared("testdata/quant_vectors/") + t + ".npy");
    ASSERT_TRUE(want.ok()) << want.status().message();
    expect_bits_equal(*got, *want, t);
    // One stdout line per tensor: name, type, shape.
    const std::string line = std::string(t) + " " + t + " [16, " +
                             std::to_string(got->shape[1]) + "]\n";
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  }
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 12);
}

TEST_F(Dequantize, OneTensorOfAQuantizedModel) {
  const std::string model = shared("testdata/models/quantized/llama-q/model-Q4_K_M.gguf");
  auto r = run_llmserve("dequantize " + quote(model) + " --out-dir " + quote(out_.string()) +
                        " --tensor blk.1.attn_v.weight");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "blk.1.attn_v.weight Q6_K [64, 256]\n");  // manifest.json: Q6_K in Q4_K_M
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out_), {}), 1);
  auto got = read_npy((out_ / "blk.1.attn_v.weight.npy").string());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->shape, (std::vector<int64_t>{64, 256}));
  // The F32 file holds the unquantized weights: Q6_K is within a small fraction of them.
  auto f32 = run_llmserve(
      "dequantize " + quote(shared("testdata/models/quantized/llama-q/model-F32.gguf")) +
      " --out-dir " + quote((out_ / "f32").string()) + " --tensor blk.1.attn_v.weight");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  auto orig = read_npy((out_ / "f32" / "blk.1.attn_v.weight.npy").string());
  ASSERT_TRUE(orig.ok());
  double err = 0, mag = 0;
  for (size_t i = 0; i < got->data.size(); ++i) {
    err = std::max(err, double(std::fabs(got->data[i] - orig->data[i])));
    mag = std::max(mag, double(std::fabs(orig->data[i])));
  }
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 0.05 * mag);
}

TEST_F(Dequantize, RepeatedTensorFlagWritesEach) {
  auto r = run_llmserve("dequantize " + quote(shared("testdata/quant_vectors/vectors.gguf")) +
                        " --out-dir " + quote(out_.string()) +
                        " --tensor Q4_K --tensor Q8_0 --tensor Q4_K");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
  EXPECT_TRUE(std::filesystem::exists(out_ / "Q4_K.npy"));
  EXPECT_TRUE(std::filesystem::exists(out_ / "Q8_0.npy"));
}

TEST_F(Dequantize, FloatTensorsAndShapes) {
  const std::string model = shared("testdata/models/synthetic/deepseek2-mla/model.gguf");
  auto r = run_llmserve("dequantize " + quote(model) + " --out-dir " + quote(out_.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto g = GgufFile::open(model);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n')), g->tensors().size());
  // 3-D attn_k_b [H 4, L 32, nope 16] -> [128, 16]; 2-D [rows, cols]; 1-D [n]; values as stored.
  const std::pair<const char*, std::vector<int64_t>> cases[] = {
      {"blk.0.attn_k_b.weight", {128, 16}},
      {"token_embd.weight", {512, 128}},
      {"output_norm.weight", {128}}};
  for (const auto& [name, shape] : cases) {
    auto got = read_npy((out_ / (std::string(name) + ".npy")).string());
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->shape, shape) << name;
    const TensorView* t = g->find_tensor(name);
    ASSERT_EQ(got->data.size(), static_cast<size_t>(t->numel()));
    EXPECT_EQ(std::memcmp(got->data.data(), t->data, t->nbytes), 0) << name;
    EXPECT_NE(r.out.find(std::string(name) + " F32 ["), std::string::npos) << r.out;
  }
}

/// Exit code 1 and exactly one "error: ..." line on stderr containing `text`.
void expect_one_line_error(const testing::CommandResult& r, const std::string& text) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
}

TEST_F(Dequantize, Errors) {
  const std::string vectors = shared("testdata/quant_vectors/vectors.gguf");
  expect_one_line_error(run_llmserve("dequantize " + quote(vectors) + " --out-dir " +
                                     quote(out_.string()) + " --tensor Q7_K"),
                        "no tensor 'Q7_K' (the file has 12 tensors: IQ4_NL, IQ4_XS, Q2_K, Q3_K, "
                        "Q4_0, ...)");
  expect_one_line_error(run_llmserve("dequantize " + quote(shared("testdata/quant_vectors/README.md")) +
                                     " --out-dir " + quote(out_.string())),
                        "bad magic");
  expect_one_line_error(run_llmserve("dequantize /no/such.gguf --out-dir " + quote(out_.string())),
                        "/no/such.gguf");
  expect_one_line_error(run_llmserve("dequantize " + quote(vectors)), "--out-dir");
  expect_one_line_error(run_llmserve("dequantize " + quote(vectors) + " --out-dir " +
                                     quote(out_.string()) + " --tensor ''"),
                        "--tensor: the tensor name must not be empty");
  // FILE or --file, as MODEL or --model: both given and different is an error (was: --file
  // silently won); neither given names both.
  const std::string out = " --out-dir " + quote(out_.string());
  expect_one_line_error(run_llmserve("dequantize " + quote(vectors) + " --file other.gguf" + out),
                        "error: FILE '" + vectors + "' and --file 'other.gguf' differ; give the "
                        "file once");
  expect_one_line_error(run_llmserve("dequantize" + out), "error: no file given (FILE or --file)");
  EXPECT_FALSE(std::filesystem::exists(out_));
  auto r = run_llmserve("dequantize --file " + quote(vectors) + out + " --tensor Q8_0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_llmserve("dequantize " + quote(vectors) + " --file " + quote(vectors) + out +
                   " --tensor Q8_0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The help marks neither as REQUIRED (one of the two is).
  r = run_llmserve("dequantize --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* line : {"  file TEXT ", "  --file TEXT "}) {
    const size_t at = r.out.find(line);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(at, r.out.find('\n', at) - at).find("REQUIRED"), std::string::npos)
        << r.out;
  }
  std::filesystem::remove_all(out_);
  // A truncated copy of the vectors: the last tensor's data is cut short.
  std::filesystem::create_directories(out_);
  const std::string cut = (out_ / "cut.gguf").string();
  std::string bytes = testing::slurp(vectors);
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 1000));
  expect_one_line_error(run_llmserve("dequantize " + quote(cut) + " --out-dir " +
                                     quote((out_ / "x").string())),
                        "truncated");
}

}  // namespace
}  // namespace llmserve
