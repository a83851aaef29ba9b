// llmserve quantize: the file it writes (metadata copied as llama-quantize does, per-tensor
// types, one stdout line per tensor), Hugging Face input (the same tensors as from llama.cpp's
// own conversion of that directory; a SentencePiece tokenizer.json converted to the same
// vocabulary), and every refusal as one error line with exit status 1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

namespace fs = std::filesystem;
using testing::run_llmserve;

std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }
const std::string kLlamaQ = shared("testdata/models/quantized/llama-q/");
const std::string kSynthetic = shared("testdata/models/synthetic/");

/// This binary's output files, removed at exit (the path is leaked on purpose: the exit
/// handler reads it after static destructors ran).
const std::string* g_out_dir = nullptr;

const std::string& out_dir() {
  if (g_out_dir == nullptr) {
    auto p = fs::path(testing::temp_dir()) / "quantize";
    fs::create_directories(p);
    g_out_dir = new std::string(p.string());
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::path(*g_out_dir).parent_path(), ec);  // temp_dir(): this pid's files
    });
  }
  return *g_out_dir;
}

/// Deep equality of metadata values (type, value, array elements).
bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.value.index() != b.value.index()) return false;
  if (const auto* i = std::get_if<int64_t>(&a.value)) return *i == std::get<int64_t>(b.value);
  if (const auto* d = std::get_if<double>(&a.value)) return *d == std::get<double>(b.value);
  if (const auto* f = std::get_if<bool>(&a.value)) return *f == std::get<bool>(b.value);
  if (const auto* t = std::get_if<std::string>(&a.value)) return *t == std::get<std::string>(b.value);
  const auto& x = std::get<GgufValue::Array>(a.value);
  const auto& y = std::get<GgufValue::Array>(b.value);
  if (x.elem_type != y.elem_type || x.items.size() != y.items.size()) return false;
  for (size_t i = 0; i < x.items.size(); ++i)
    if (!same_value(x.items[i], y.items[i])) return false;
  return true;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

TEST(QuantizeCli, GgufInputMetadataTypesAndStdout) {
  const std::string out = out_dir() + "/q4km.gguf";
  const auto r = run_llmserve("quantize " + kLlamaQ + "model-F32.gguf " + out + " --type Q4_K_M");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto src = GgufFile::open(kLlamaQ + "model-F32.gguf");
  auto got = GgufFile::open(out);
  auto ref = GgufFile::open(kLlamaQ + "model-Q4_K_M.gguf");  // llama-quantize's
  ASSERT_TRUE(src.ok() && got.ok() && ref.ok());
  // Every key of the input, plus file type and quantization version as llama-quantize sets.
  EXPECT_EQ(got->metadata().size(), ref->metadata().size());
  for (const auto& [key, v] : ref->metadata()) {
    const GgufValue* mine = got->find_value(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_TRUE(same_value(*mine, v)) << key;
  }
  EXPECT_EQ(*got->get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(*got->get_int("general.quantization_version"), 2);
  // Tensor names, order, shapes as the input; types as llama-quantize chose; stdout lines.
  const std::vector<std::string> printed = lines(r.out);
  ASSERT_EQ(printed.size(), src->tensors().size());
  for (size_t i = 0; i < src->tensors().size(); ++i) {
    const TensorView& s = src->tensors()[i];
    const TensorView& g = got->tensors()[i];
    EXPECT_EQ(g.name, s.name);
    EXPECT_EQ(g.shape, s.shape);
    EXPECT_EQ(g.dtype, ref->find_tensor(s.name)->dtype) << s.name;
    EXPECT_EQ(printed[i], s.name + " " + std::string(dtype_ggml_name(g.dtype)));
    if (s.shape.size() == 1) {  // kept: the same bytes
      ASSERT_EQ(g.nbytes, s.nbytes);
      EXPECT_EQ(std::memcmp(g.data, s.data, s.nbytes), 0) << s.name;
    }
  }
  EXPECT_NE(r.err.find("Q4_K_M, 16 of 21 tensors quantized"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

TEST(QuantizeCli, PureAndAliases) {
  const std::string out = out_dir() + "/q4k-pure.gguf";
  auto r = run_llmserve("quantize " + kLlamaQ + "model-F32.gguf " + out + " --type q4_k --pure");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g->get_int("general.file_type"), 15);  // Q4_K is llama-quantize's alias of Q4_K_M
  for (const TensorView& t : g->tensors())
    EXPECT_EQ(t.dtype, t.shape.size() == 1 ? DType::kF32 : DType::kQ4_K) << t.name;
}

// HF input: the tensors come out byte for byte as from the GGUF that llama.cpp's converter made
// of the same directory (Q/K rows permuted for llama, biases and q/k norms for qwen), with
// the converter's metadata; the tokenizer from --tokenizer.
TEST(QuantizeCli, HfInputGivesTheTensorsOfTheConvertedGguf) {
  for (const char* m : {"llama-gqa", "qwen2-gqa-bias", "qwen3-qknorm"}) {
    SCOPED_TRACE(m);
    const std::string dir = kSynthetic + m, a = out_dir() + "/hf-" + m + ".gguf",
                      b = out_dir() + "/gguf-" + m + ".gguf";
    auto r = run_llmserve("quantize " + dir + "/hf " + a + " --type Q5_K_M --tokenizer " + dir +
                          "/model.gguf");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_llmserve("quantize " + dir + "/model.gguf " + b + " --type Q5_K_M");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto ga = GgufFile::open(a), gb = GgufFile::open(b);
    ASSERT_TRUE(ga.ok() && gb.ok());
    ASSERT_EQ(ga->tensors().size(), gb->tensors().size());
    for (const TensorView& t : gb->tensors()) {
      const TensorView* u = ga->find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      EXPECT_EQ(u->dtype, t.dtype) << t.name;
      EXPECT_EQ(u->shape, t.shape) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << t.name;
    }
    for (const auto& [key, v] : gb->metadata()) {
      if (key == "general.name" || key.find("attention.key_length") != std::string::npos ||
          key.find("attention.value_length") != std::string::npos)
        continue;  // the converter writes key/value_length whenever config.json has head_dim
      const GgufValue* mine = ga->find_value(key);
      ASSERT_NE(mine, nullptr) << key;
      EXPECT_TRUE(same_value(*mine, v)) << key;
    }
  }
}

// make-model's HF copy carries a SentencePiece-style tokenizer.json: converted to a "llama"
// vocabulary that tokenizes like make-model's own GGUF vocabulary.
TEST(QuantizeCli, HfTokenizerJsonBecomesTheSameVocabulary) {
  const std::string gguf = out_dir() + "/b5.gguf", hf = out_dir() + "/b5hf",
                    out = out_dir() + "/b5-from-hf.gguf";
  auto r = run_llmserve("make-model --preset bench-5m --dtype bf16 --out " + gguf + " --hf-dir " + hf);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_llmserve("quantize " + hf + " " + out + " --type Q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto a = GgufFile::open(gguf), b = GgufFile::open(out);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*b->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*b->get_string_array("tokenizer.ggml.tokens"), *a->get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(*b->get_int_array("tokenizer.ggml.token_type"),
            *a->get_int_array("tokenizer.ggml.token_type"));
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                        "tokenizer.ggml.unknown_token_id"})
    EXPECT_EQ(*b->get_int(k), *a->get_int(k)) << k;
  EXPECT_TRUE(*b->get_bool("tokenizer.ggml.add_bos_token"));
  auto ta = load_tokenizer_from_gguf(*a), tb = load_tokenizer_from_gguf(*b);
  ASSERT_TRUE(ta.ok() && tb.ok());
  for (const char* text : {"Once upon a time, there was a little girl named Lily.",
                           "She loved to play outside! Xylophone 1234 qzx \xc3\xa9t\xc3\xa9"})
    EXPECT_EQ((*tb)->encode(text, true), (*ta)->encode(text, true)) << text;
  // 1-D tensors are F32, matrices Q8_0, 8.5 bits per weight.
  for (const TensorView& t : b->tensors())
    EXPECT_EQ(t.dtype, t.shape.size() == 1 ? DType::kF32 : DType::kQ8_0) << t.name;
}

TEST(QuantizeCli, ErrorsAreOneLineAndExitOne) {
  const std::string f32 = kLlamaQ + "model-F32.gguf", out = out_dir() + "/err.gguf";
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {f32 + " " + out + " --type Q3_K_M", "--type: unknown type 'Q3_K_M' (known: Q8_0"},
      {kLlamaQ + "model-Q4_K_M.gguf " + out + " --type Q8_0",
       "tensor output.weight is Q6_K: quantize reads f32, f16 and bf16 tensors"},
      {shared("models/stories260K/stories260K.gguf") + " " + out + " --type Q8_0",
       "tensor blk.0.ffn_down.weight: rows of 172 values are not whole 32-value blocks of Q8_0"},
      {f32 + " " + f32 + " --type Q8_0", "the output would overwrite the input"},
      {shared("models/stories260K/stories260K.bin") + " " + out + " --type Q8_0",
       "llama2.c checkpoints are not supported by quantize"},
      {f32 + " " + out + " --type Q8_0 --tokenizer " + f32, "--tokenizer: only for Hugging Face"},
      {kSynthetic + "llama-gqa/hf " + out + " --type Q8_0", "has no tokenizer.json; pass --tokenizer"},
      {f32 + " " + out_dir() + "/nope/x.gguf --type Q8_0", "cannot create file"},
      {out_dir() + "/missing.gguf " + out + " --type Q8_0", "no such model file"},
      // Only a regular file is replaced: a directory (or a FIFO, below) fails before any work.
      {f32 + " " + out_dir() + " --type Q8_0", "exists and is not a regular file"},
      {f32 + " " + out_dir() + "/fifo --type Q8_0", "exists and is not a regular file"},
      // The engine's --threads range (99999 used to abort in std::thread, leaving OUT.tmp).
      {f32 + " " + out + " --type Q8_0 --threads 99999", "--threads: must be in [0, 1024], got 99999"},
      {f32 + " " + out + " --type Q8_0 --threads -1", "--threads: must be in [0, 1024], got -1"},
  };
  fs::remove(out_dir() + "/fifo");
  ASSERT_EQ(mkfifo((out_dir() + "/fifo").c_str(), 0600), 0);
  for (const Case& c : cases) {
    const auto r = run_llmserve("quantize " + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.args;
    EXPECT_FALSE(fs::exists(out + ".tmp")) << c.args;
  }
  EXPECT_EQ(fs::status(out_dir() + "/fifo").type(), fs::file_type::fifo);
  const auto r = run_llmserve("quantize " + f32 + " " + out);  // --type is required
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--type"), std::string::npos) << r.err;
}

// Threads the system refuses (here: an address-space limit below 1024 thread stacks) are one
// error line, exit 1, and no OUT or OUT.tmp is left behind (was: std::system_error, abort).
TEST(QuantizeCli, ThreadsThatCannotStartFailCleanly) {
  const std::string in = shared("models/stories260K/stories260K.gguf"), out = out_dir() + "/t.gguf";
  const std::string limit = "ulimit -v 3000000 && ";
  auto r = testing::run_shell(limit + LLMSERVE_BIN + " quantize " + in + " " + out +
                              " --type Q4_K_M --threads 1");
  if (r.exit_code != 0) GTEST_SKIP() << "no room for one thread under the limit: " << r.err;
  fs::remove(out);
  r = testing::run_shell(limit + LLMSERVE_BIN + " quantize " + in + " " + out +
                         " --type Q4_K_M --threads 1024");
  if (r.exit_code == 0) GTEST_SKIP() << "1024 threads started under the limit";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("error: --threads 1024: cannot start the threads: ", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

// A quantize interrupted while it writes (SIGINT as Ctrl-C sends it, SIGTERM, SIGHUP, SIGPIPE) dies of
// the signal and leaves neither OUT nor OUT.tmp (was: a partial OUT.tmp of the model's size).
// The signal is sent once OUT.tmp exists; a run that finished first (rc 0) proves nothing and
// is skipped.
TEST(QuantizeCli, InterruptedLeavesNoTemporaryFile) {
  const std::string in = out_dir() + "/sig-in.gguf";
  auto r = testing::run_llmserve("make-model --preset bench-25m --dtype bf16 --out " + in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [name, signo] : std::vector<std::pair<std::string, int>>{
           {"INT", 2}, {"TERM", 15}, {"HUP", 1}}) {
    const std::string out = out_dir() + "/sig-" + name + ".gguf";
    // env --default-signal: a shell starts a background job with SIGINT ignored.
    r = testing::run_shell(std::string("(env --default-signal=INT ") + LLMSERVE_BIN + " quantize " + in + " " + out +
                           " --type Q4_K_M --threads 1 >/dev/null 2>&1 & pid=$!; while [ ! -e " +
                           out + ".tmp ] && kill -0 $pid 2>/dev/null; do sleep 0.01; done; kill -" +
                           name + " $pid; wait $pid; echo $?)");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const int rc = std::stoi(r.out);
    EXPECT_FALSE(fs::exists(out + ".tmp")) << name;
    if (rc == 0) {
      std::printf("SIG%s came after the quantize finished; not exercised\n", name.c_str());
      continue;
    }
    EXPECT_EQ(rc, 128 + signo) << name;
    EXPECT_FALSE(fs::exists(out)) << name;
  }
  // stdout piped to a reader that is gone (`| head` after its lines): SIGPIPE at the next
  // line (line-buffered here, so at the first tensor's) ends it the same way.
  const std::string out = out_dir() + "/sig-PIPE.gguf", rc_file = out_dir() + "/sig-PIPE.rc";
  r = testing::run_shell("(env --default-signal=PIPE stdbuf -oL " + std::string(LLMSERVE_BIN) +
                         " quantize " + in + " " + out + " --type Q4_K_M --threads 1 2>/dev/null; echo $? > " +
                         rc_file + ") | true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int rc = std::stoi(testing::slurp(rc_file));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  if (rc == 0) {
    std::printf("SIGPIPE: every line was written before the reader left; not exercised\n");
  } else {
    EXPECT_EQ(rc, 128 + 13);
    EXPECT_FALSE(fs::exists(out));
  }
}

// An OUT.tmp that is already there (the user's, or a run killed with SIGKILL) is neither
// overwritten nor removed: quantize and make-model stop with one line naming it.
TEST(QuantizeCli, ExistingTemporaryFileIsKept) {
  const std::string in = shared("models/stories260K/stories260K.gguf");
  const std::string out = out_dir() + "/kept.gguf";
  for (const std::string& cmd :
       {"quantize " + in + " " + out + " --type Q4_K_M", "make-model --preset bench-5m --out " + out}) {
    { std::ofstream(out + ".tmp") << "mine"; }
    const testing::CommandResult r = run_llmserve(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.err, "error: " + out + ".tmp already exists (an earlier run's temporary file?); "
                     "remove it or choose another output path\n") << cmd;
    std::ifstream f(out + ".tmp");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), {}), "mine") << cmd;
    EXPECT_FALSE(fs::exists(out)) << cmd;
    fs::remove(out + ".tmp");
  }
}

// An output path that cannot be renamed over is refused before any work (make-model used to
// write the whole model to OUT.tmp first).
TEST(QuantizeCli, BadOutputPathsFailBeforeAnyWork) {
  const std::string in = shared("models/stories260K/stories260K.gguf");
  const std::string dir = out_dir() + "/a-dir";
  fs::create_directories(dir);
  for (const auto& [cmd, line] : std::vector<std::pair<std::string, std::string>>{
           {"make-model --preset bench-250m --out " + dir,
            dir + ": exists and is not a regular file (make-model replaces only a regular file)"},
           {"make-model --preset bench-5m --out ''", "--out must not be empty"},
           {"quantize " + in + " '' --type Q4_K_M", "OUT must not be empty"}}) {
    const testing::CommandResult r = run_llmserve(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.err, "error: " + line + "\n") << cmd;
  }
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  EXPECT_FALSE(fs::exists(".tmp"));
}

// stdout is a pipe whose reader has gone: the per-tensor lines are written as they come, so
// SIGPIPE ends the run while it writes, and no OUT or OUT.tmp is left (it used to arrive at
// exit, after the rename: exit status 141 with a complete OUT).
TEST(QuantizeCli, ReaderGoneLeavesNoOutput) {
  const std::string out = out_dir() + "/pipe.gguf";
  const std::string status = out_dir() + "/pipe.status";
  // The reader (true) must be gone before quantize's first write: a second's head start, as
  // on a loaded 2-core machine quantizing this small model can beat `true` to its exit.
  auto r = testing::run_shell(std::string("(sleep 1; ") + LLMSERVE_BIN + " quantize " + kLlamaQ +
                              "model-F32.gguf " + out + " --type Q8_0 2>/dev/null; echo $? > " +
                              status + ") | true; cat " + status);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::stoi(r.out), 128 + 13);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

// make-model writes OUT.tmp and renames it too: an interrupted one leaves neither.
TEST(QuantizeCli, InterruptedMakeModelLeavesNoTemporaryFile) {
  const std::string out = out_dir() + "/mm-sig.gguf";
  auto r = testing::run_shell(std::string("(env --default-signal=INT ") + LLMSERVE_BIN +
                              " make-model --preset bench-250m --dtype bf16 --out " + out +
                              " >/dev/null 2>&1 & pid=$!; while [ ! -e " + out +
                              ".tmp ] && kill -0 $pid 2>/dev/null; do sleep 0.01; done; kill -INT $pid; wait $pid; echo $?)");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int rc = std::stoi(r.out);
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  if (rc == 0) {
    std::printf("SIGINT came after make-model finished; not exercised\n");
    fs::remove(out);
    return;
  }
  EXPECT_EQ(rc, 128 + 2);
  EXPECT_FALSE(fs::exists(out));
}

// --quantization through the engine (generate): the start-up line, and a refusal naming the
// flag when a row length fits no type.
TEST(QuantizationFlag, GenerateQuantizesAtLoad) {
  const std::string model = shared("models/stories260K/stories260K.gguf");
  auto r = run_llmserve("generate " + model + " --quantization q4_k --prompt 'Once upon a time'"
                        " --max-tokens 8 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("q4_k: 37 weight matrices -> F16 x5, Q5_0 x32"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("Once upon a time"), std::string::npos) << r.out;
  r = run_llmserve("generate " + model + " --quantization q8_0 --prompt hi --max-tokens 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("error: --quantization q8_0: " + model +
                       ": tensor blk.0.ffn_down.weight: rows of 172 values"),
            std::string::npos) << r.err;
  r = run_llmserve("generate " + model + " --quantization awq --prompt hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--quantization"), std::string::npos) << r.err;
}

// DeepSeek-V2 (MLA) from GGUF: 3-D attn_k_b / attn_v_b quantized row by row, rows of 16 and
// 48 values falling back to F16 (Q8_0 would have no fallback for them: an error, as in
// llama-quantize), and the result loads in our engine.
TEST(QuantizeCli, DeepSeek2GgufQuantizesAndLoads) {
  const std::string in = kSynthetic + "deepseek2-mla/model.gguf", out = out_dir() + "/ds2.gguf";
  auto r = run_llmserve("quantize " + in + " " + out + " --type Q4_K_M");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("blk.0.attn_k_b.weight F16\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.0.attn_v_b.weight Q5_0\n"), std::string::npos) << r.out;
  r = run_llmserve("logits " + out + " --token-ids 1,2,3 --out " + out_dir() + "/ds2.npy");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_llmserve("quantize " + in + " " + out_dir() + "/ds2-q8.gguf --type Q8_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tensor blk.0.attn_k_b.weight: rows of 16 values"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace llmserve
