// Quantized GGUF models end to end.
//
// (1) ../shared/testdata/models/quantized/llama-q: one model in F32 and as llama-quantize wrote
//     it in Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K and IQ4_NL (types mixed per tensor). Our logits
//     must be at least as close to the float64 NumPy forward over the stored weights
//     (numpy_logits_*) as llama.cpp's own logits are (llamacpp_logits_*): max |diff| no larger,
//     argmax agreement no lower; F32 within 1e-3. Both attention backends, whole and chunked
//     prefill.
// (2) Synthetic models (../shared/testdata/models/synthetic) rewritten with every 2-D tensor
//     whose rows are whole 32-element blocks in Q8_0 (others F32, as llama-quantize falls back),
//     against the same model in F32 holding the dequantized values: the same numbers through
//     the quantized paths (row views of 3-D tensors, concat of mixed types, quantized
//     embedding lookup, tied lm_head, quantized norms, DeepSeek-V2's unsplit attn_kv_b).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "quant/dequantize_ref.h"
#include "runner/prompt_logits.h"
#include "weights/gguf.h"
#include "weights/gguf_writer.h"
#include "weights/npy.h"

namespace llmserve {
namespace {

std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }
std::string quantized(const std::string& rel) {
  return shared("testdata/models/quantized/" + rel);
}

std::vector<int32_t> sequence(const std::string& file, const std::string& which) {
  std::ifstream in(file);
  return nlohmann::json::parse(in)[which].get<std::vector<int32_t>>();
}

using testing::Compare;
using testing::compare;

std::vector<float> npy(const std::string& path) {
  auto a = read_npy(path);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? a->data : std::vector<float>{};
}

Expected<std::vector<float>> logits_of(const std::string& path, const std::vector<int32_t>& ids,
                                       const std::string& backend, int32_t chunk) {
  LLMS_ASSIGN_OR_RETURN(auto file, ModelFile::open(path));
  PromptLogitsOptions opt;
  opt.attention_backend = backend;
  opt.chunk_size = chunk;
  opt.num_threads = 2;
  return compute_prompt_logits(*file, ids, opt);
}

// ---- (1) llama-q against NumPy, next to llama.cpp -------------------------------------------

struct Case {
  std::string type;  // F32, Q8_0, ...
  std::string backend;
};

class LlamaQ : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaQ, AtLeastAsCloseToNumpyAsLlamaCpp) {
  const Case& c = GetParam();
  const std::string file = quantized("llama-q/model-" + c.type + ".gguf");
  auto mf = ModelFile::open(file);
  ASSERT_TRUE(mf.ok()) << mf.status().message();
  EXPECT_EQ((*mf)->config().default_kv_dtype(), DType::kF32);
  const int64_t vocab = (*mf)->config().vocab_size;
  for (const char* seq : {"short", "long"}) {
    const auto ids = sequence(quantized("sequences.json"), seq);
    const auto ref = npy(quantized("llama-q/numpy_logits_" + c.type + "_" + seq + ".npy"));
    const auto cpp = npy(quantized("llama-q/llamacpp_logits_" + c.type + "_" + seq + ".npy"));
    ASSERT_EQ(ref.size(), ids.size() * vocab);
    const Compare theirs = compare(cpp, ref, vocab);
    for (int32_t chunk : {2048, 13}) {
      auto got = logits_of(file, ids, c.backend, chunk);
      ASSERT_TRUE(got.ok()) << got.status().message();
      const Compare ours = compare(*got, ref, vocab);
      std::printf("%-7s %-5s %-5s chunk %4d: max |diff| vs NumPy %.2e (llama.cpp %.3f), argmax "
                  "agreement %.1f%% (llama.cpp %.1f%%)\n",
                  c.type.c_str(), seq, c.backend.c_str(), chunk, ours.max_diff, theirs.max_diff,
                  100 * ours.argmax_agree(), 100 * theirs.argmax_agree());
      EXPECT_LE(ours.max_diff, theirs.max_diff) << c.type << " " << seq;
      EXPECT_GE(ours.argmax_agree(), theirs.argmax_agree()) << c.type << " " << seq;
      if (c.type == "F32") {  // float GEMM: float32 accumulation error only
        EXPECT_LE(ours.max_diff, 1e-3) << c.type << " " << seq;
        EXPECT_EQ(ours.argmax_mismatches, 0) << c.type << " " << seq;
      } else {
        // The quantized GEMM's 12- to 16-bit activations (kernels/quant/qgemm.h) against
        // llama.cpp's 8-bit ones: measured 14-160x closer; a 10x margin is the contract.
        EXPECT_LE(ours.max_diff, theirs.max_diff / 10) << c.type << " " << seq;
      }
    }
  }
}

std::vector<Case> llama_q_cases() {
  std::vector<Case> out;
  for (const char* b : {"flash", "naive"})
    for (const char* t : {"F32", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL"})
      out.push_back({t, b});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaQ, ::testing::ValuesIn(llama_q_cases()),
                         [](const auto& info) { return info.param.type + "_" + info.param.backend; });

// The manifest's per-tensor types are what the reader sees (the mixes are real).
TEST(LlamaQManifest, TensorTypesAsListed) {
  std::ifstream in(quantized("llama-q/manifest.json"));
  const auto manifest = nlohmann::json::parse(in);
  for (const auto& [name, entry] : manifest["files"].items()) {
    auto g = GgufFile::open(quantized("llama-q/" + name));
    ASSERT_TRUE(g.ok()) << g.status().message();
    for (const auto& [tensor, type] : entry["per_tensor"].items()) {
      const TensorView* t = g->find_tensor(tensor);
      ASSERT_NE(t, nullptr) << name << " " << tensor;
      EXPECT_EQ(dtype_ggml_name(t->dtype), type.get<std::string>()) << name << " " << tensor;
    }
  }
}

// A NaN or infinite block scale is a one-line load error naming the tensor (it would make
// every logit NaN): llama-q's Q4_K_M with one Q4_K block's d, one Q6_K block's d and one dmin
// set to NaN / +inf in turn.
TEST(LlamaQ, NonFiniteScaleIsALoadErrorNamingTheTensor) {
  const std::string src = quantized("llama-q/model-Q4_K_M.gguf");
  std::ifstream in(src, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  auto g = GgufFile::open(src);
  ASSERT_TRUE(g.ok()) << g.status().message();
  struct Poison {
    const char* tensor;
    int64_t block, field_offset;
    uint16_t half;
    const char* want;
  };
  const Poison cases[] = {{"blk.1.attn_q.weight", 5, 0, 0x7E00, "block 5 has a non-finite scale (d = nan)"},
                          {"output.weight", 3, 208, 0x7C00, "block 3 has a non-finite scale (d = inf)"},
                          {"blk.0.ffn_gate.weight", 0, 2, 0xFC00, "block 0 has a non-finite scale (dmin = -inf)"}};
  const auto dir = std::filesystem::temp_directory_path() / ("llmserve_nan_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const Poison& c : cases) {
    const TensorView* t = g->find_tensor(c.tensor);
    ASSERT_NE(t, nullptr) << c.tensor;
    // The tensor's offset in the file: its first bytes, found in the file.
    const auto* first = static_cast<const uint8_t*>(t->data);
    const auto at = std::search(bytes.begin(), bytes.end(), first, first + 64);
    ASSERT_NE(at, bytes.end()) << c.tensor;
    std::vector<uint8_t> bad = bytes;
    const size_t off = static_cast<size_t>(at - bytes.begin()) +
                       c.block * dtype_block_bytes(t->dtype) + c.field_offset;
    std::memcpy(bad.data() + off, &c.half, 2);
    const std::string path = dir / "bad.gguf";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bad.data()),
                                                static_cast<std::streamsize>(bad.size()));
    auto got = logits_of(path, {1, 2, 3}, "flash", 2048);
    ASSERT_FALSE(got.ok()) << c.tensor;
    const std::string msg = got.status().message();
    EXPECT_NE(msg.find(std::string("tensor ") + c.tensor), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  std::filesystem::remove_all(dir);
}

// ---- (2) synthetic models in Q8_0 vs F32 holding the same values ----------------------------

/// ggml's quantize_row_q8_0_ref (ggml-quants.c): d = max|x| / 127, q = round(x / d), d in f16.
std::vector<uint8_t> quantize_q8_0(const float* x, int64_t n) {
  std::vector<uint8_t> out;
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    const uint16_t dh = f32_to_f16(d);
    out.push_back(dh & 0xff);
    out.push_back(dh >> 8);
    for (int i = 0; i < 32; ++i)
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[b * 32 + i] * id))));
  }
  return out;
}

using testing::OutTensor;
using testing::tensors_of;

/// Writes `tensors` with `src`'s metadata: tensors for which `pick` says so (and whose rows are
/// whole 32-element blocks) as Q8_0, or (dequantized = true) as F32 holding the values Q8_0
/// would give; the rest F32 unchanged. Returns how many tensors were quantized.
int write_q8_0(const GgufFile& src, const std::vector<OutTensor>& tensors, const std::string& dst,
               bool dequantized, bool (*pick)(const OutTensor&)) {
  GgufWriter w;
  for (const auto& [key, v] : src.metadata()) w.add_value(key, v);
  std::vector<std::vector<uint8_t>> blobs;
  int count = 0;
  for (const OutTensor& t : tensors) {
    const int64_t row = t.shape.back();
    std::vector<uint8_t> blob;
    if (pick(t) && row % 32 == 0) {
      ++count;
      blob = quantize_q8_0(t.data.data(), static_cast<int64_t>(t.data.size()));
      if (dequantized) {
        std::vector<float> back(t.data.size());
        dequantize_row_ref(DType::kQ8_0, blob.data(), back.data(), static_cast<int64_t>(back.size()));
        blob.assign(reinterpret_cast<const uint8_t*>(back.data()),
                    reinterpret_cast<const uint8_t*>(back.data() + back.size()));
        w.add_tensor(t.name, t.shape, DType::kF32);
      } else {
        w.add_tensor(t.name, t.shape, DType::kQ8_0);
      }
    } else {
      blob.assign(reinterpret_cast<const uint8_t*>(t.data.data()),
                  reinterpret_cast<const uint8_t*>(t.data.data() + t.data.size()));
      w.add_tensor(t.name, t.shape, DType::kF32);
    }
    blobs.push_back(std::move(blob));
  }
  EXPECT_TRUE(w.begin(dst).ok());
  for (const auto& b : blobs) EXPECT_TRUE(w.write(b.data(), b.size()).ok());
  EXPECT_TRUE(w.finish().ok());
  return count;
}

bool matrices(const OutTensor& t) { return t.shape.size() >= 2; }
bool everything(const OutTensor&) { return true; }

class SyntheticQ8 : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("llmserve_quant_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Logits of the Q8_0 file and of the F32 file with the same values, for both backends and
  /// chunkings; they must agree within the quantized GEMM's 15-bit activation codes for Q8_0
  /// (kernels/quant/qgemm.h; measured 1.1e-3 .. 3.1e-3 on logit ranges of ~30).
  void expect_same(const GgufFile& src, const std::vector<OutTensor>& tensors,
                   bool (*pick)(const OutTensor&), int min_quantized, const std::string& what) {
    const std::string q = dir_ / (what + "-q8.gguf"), f = dir_ / (what + "-f32.gguf");
    EXPECT_GE(write_q8_0(src, tensors, q, false, pick), min_quantized) << what;
    write_q8_0(src, tensors, f, true, pick);
    const auto ids = sequence(shared("testdata/models/synthetic/sequences.json"), "long");
    for (const char* backend : {"flash", "naive"}) {
      for (int32_t chunk : {2048, 7}) {
        auto got = logits_of(q, ids, backend, chunk);
        ASSERT_TRUE(got.ok()) << got.status().message();
        auto want = logits_of(f, ids, backend, chunk);
        ASSERT_TRUE(want.ok()) << want.status().message();
        const Compare c = compare(*got, *want, 512);
        std::printf("%s Q8_0 vs F32 of the same values, %s chunk %d: max |diff| %.2e\n",
                    what.c_str(), backend, chunk, c.max_diff);
        EXPECT_LE(c.max_diff, 5e-3) << what;
        EXPECT_EQ(c.argmax_mismatches, 0) << what;
      }
    }
  }
  std::filesystem::path dir_;
};

TEST_F(SyntheticQ8, LlamaGqaWithQuantizedMatricesAndNorms) {
  auto g = GgufFile::open(shared("testdata/models/synthetic/llama-gqa/model.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const auto t = tensors_of(*g);
  expect_same(*g, t, matrices, 8, "llama-gqa");
  // Norm vectors in a quantized type too (llama-quantize never writes them; dequantized at load).
  expect_same(*g, t, everything, 12, "llama-gqa-norms");
}

TEST_F(SyntheticQ8, Qwen2TiedEmbeddingIsAlsoTheQuantizedLmHead) {
  auto g = GgufFile::open(shared("testdata/models/synthetic/qwen2-gqa-bias/model.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->find_tensor("output.weight"), nullptr);  // tied
  expect_same(*g, tensors_of(*g), matrices, 8, "qwen2-tied");
}

TEST_F(SyntheticQ8, Deepseek2MlaSplitAndUnsplitKvB) {
  auto g = GgufFile::open(shared("testdata/models/synthetic/deepseek2-mla/model.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto t = tensors_of(*g);
  // attn_q_b (rows of q_lora 48) and attn_k_b (rows of nope 16) stay F32: mixed types.
  expect_same(*g, t, matrices, 6, "deepseek2");
  // The unsplit attn_kv_b [H * (nope + v_head), L] (see test_deepseek2.cc), quantized.
  const auto out = testing::with_unsplit_kv_b(std::move(t), 4, 32, 16, 16);
  expect_same(*g, out, matrices, 6, "deepseek2-unsplit");
}

}  // namespace
}  // namespace llmserve
