// The CLI as a user runs it: generate/logits against outside references, and bad input
// (missing, truncated, corrupt model files; bad flags) giving one-line errors and exit 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "weights/npy.h"
#include "../engine/reference_cases.h"

namespace llmserve {
namespace {

using testing::run_llmserve;
using testing::shared_path;

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string bin_model_args() {
  return quote(testing::stories_bin()) + " --tokenizer " + quote(testing::stories_tokenizer());
}

TEST(Cli, HelpListsSubcommandsAndFlags) {
  auto r = run_llmserve("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* s : {"serve", "generate", "logits"}) EXPECT_NE(r.out.find(s), std::string::npos);
  r = run_llmserve("serve --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* f : {"--max-num-seqs", "--max-model-len", "--max-num-batched-tokens",
                        "--block-size", "--kv-cache-memory", "--num-kv-blocks", "--threads",
                        "--port", "--host"})
    EXPECT_NE(r.out.find(f), std::string::npos) << f;
}

TEST(Cli, GenerateJsonMatchesRunC) {
  const auto cases = testing::load_reference_cases();
  for (const std::string& model : {bin_model_args(), quote(testing::stories_gguf()) + " --max-model-len 512"}) {
    const auto& rc = cases[2];
    auto r = run_llmserve("generate " + model + " --prompt " + quote(rc.prompt) +
                          " --max-tokens 40 --json --threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_token_ids"].get<std::vector<int32_t>>(), rc.prompt_ids);
    const std::vector<int32_t> want(rc.generated_ids.begin(), rc.generated_ids.begin() + 40);
    EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), want);
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_EQ(rc.text.rfind(rc.prompt + j["text"].get<std::string>(), 0), 0u);
  }
}

TEST(Cli, LogitsMatchNumpyReference) {
  const std::string dir = shared_path("testdata/models/synthetic/");
  std::ifstream in(dir + "sequences.json");
  const auto ids = nlohmann::json::parse(in)["short"].get<std::vector<int32_t>>();
  std::string csv;
  for (size_t i = 0; i < ids.size(); ++i) csv += (i ? "," : "") + std::to_string(ids[i]);
  for (const char* m : {"llama-mha", "llama-gqa", "llama-mqa"}) {
    const std::string out = testing::temp_dir() + "/" + m + ".npy";
    auto r = run_llmserve("logits " + quote(dir + m + "/model.gguf") + " --token-ids " + csv +
                          " --out " + quote(out) + " --max-num-batched-tokens 7");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto got = read_npy(out);
    auto ref = read_npy(dir + m + "/numpy_logits_short.npy");
    ASSERT_TRUE(got.ok() && ref.ok());
    ASSERT_EQ(got->shape, ref->shape);
    double max_diff = 0;
    for (size_t i = 0; i < got->data.size(); ++i)
      max_diff = std::max(max_diff, double(std::fabs(got->data[i] - ref->data[i])));
    EXPECT_LE(max_diff, 1e-3) << m;
  }
}

class CliBadModel : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = testing::temp_dir() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  /// Exit code 1 and exactly one "error: ..." line (after any log lines) naming `names`.
  static void expect_one_line_error(const testing::CommandResult& r, const std::string& names) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const size_t pos = r.err.rfind("error: ");
    ASSERT_NE(pos, std::string::npos) << r.err;
    EXPECT_TRUE(pos == 0 || r.err[pos - 1] == '\n') << r.err;
    const std::string line = r.err.substr(pos);
    EXPECT_NE(line.find(names), std::string::npos) << r.err;
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << r.err;
    EXPECT_EQ(line.back(), '\n');
  }
};

TEST_F(CliBadModel, MissingFile) {
  auto r = run_llmserve("generate /nonexistent/model.gguf --prompt hi");
  expect_one_line_error(r, "/nonexistent/model.gguf");
}

TEST_F(CliBadModel, TruncatedGguf) {
  const std::string full = testing::slurp(testing::stories_gguf());
  for (size_t len : {size_t(3), size_t(20), size_t(1000), full.size() / 2, full.size() - 1}) {
    const std::string p = write("trunc" + std::to_string(len) + ".gguf", full.substr(0, len));
    auto r = run_llmserve("generate " + quote(p) + " --prompt hi");
    expect_one_line_error(r, p);
  }
}

TEST_F(CliBadModel, TruncatedBinAndGarbage) {
  const std::string full = testing::slurp(testing::stories_bin());
  const std::string p = write("trunc.bin", full.substr(0, full.size() - 100));
  expect_one_line_error(run_llmserve("generate " + quote(p) + " --tokenizer " +
                                     quote(testing::stories_tokenizer()) + " --prompt hi"), p);
  const std::string g = write("garbage.bin", std::string(4096, '\x7f'));
  expect_one_line_error(run_llmserve("generate " + quote(g) + " --prompt hi"), g);
}

TEST_F(CliBadModel, NeitherGgufNorLlama2cIsNotAModelFileShownByItsFirstBytes) {
  const std::string g = write("garbage2.bin", std::string(4096, '\x7f'));
  auto r = run_llmserve("generate " + quote(g) + " --prompt hi");
  expect_one_line_error(r, g + ": not a model file: not GGUF (it starts with 7f 7f 7f 7f 7f 7f "
                               "7f 7f 7f 7f 7f 7f 7f 7f 7f 7f \"................\"; GGUF files "
                               "start with \"GGUF\") nor a llama2.c checkpoint (bad llama2.c "
                               "header: dim = 2139062143 is outside [1, 65536]");
  const std::string text = write("notes.txt", "hello world, not a model\n");
  r = run_llmserve("inspect " + quote(text));
  EXPECT_EQ(r.err, "error: " + text + ": not a model file: not GGUF (it starts with 68 65 6c 6c "
                   "6f 20 77 6f 72 6c 64 2c 20 6e 6f 74 \"hello world, not\"; GGUF files start "
                   "with \"GGUF\") nor a llama2.c checkpoint (truncated: llama2.c header needs "
                   "28 bytes, file size is 25)\n");
  const std::string empty = write("empty.gguf", "");
  r = run_llmserve("logits " + quote(empty) + " --token-ids 1 --out /tmp/x.npy");
  EXPECT_EQ(r.err, "error: " + empty + ": not a model file: the file is empty\n");
}

// A sliding window of 2 tokens: logits runs past it (sliding-window attention); the first two
// positions see their whole context either way, the third does not.
TEST_F(CliBadModel, LogitsRunsPastTheSlidingWindow) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::temp_dir()) / "mistral_window";
  fs::create_directories(dir);
  const fs::path src = shared_path("testdata/models/synthetic/llama-gqa/hf");
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ifstream in(src / "config.json");
  nlohmann::json c = nlohmann::json::parse(in);
  c["model_type"] = "mistral";
  c["architectures"] = {"MistralForCausalLM"};
  c["sliding_window"] = 2;
  std::ofstream(dir / "config.json") << c.dump();
  auto r = run_llmserve("logits " + quote(dir.string()) + " --token-ids 1,2,3 --out " +
                        quote((dir / "x.npy").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_llmserve("logits " + quote(src.string()) + " --token-ids 1,2,3 --out " + quote((dir / "full.npy").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto w = read_npy((dir / "x.npy").string());
  auto f = read_npy((dir / "full.npy").string());
  ASSERT_TRUE(w.ok() && f.ok());
  ASSERT_EQ(w->data.size(), f->data.size());
  const size_t vocab = w->data.size() / 3;
  double early = 0, last = 0;
  for (size_t i = 0; i < 2 * vocab; ++i) early = std::max(early, std::fabs(double(w->data[i]) - f->data[i]));
  for (size_t i = 2 * vocab; i < 3 * vocab; ++i) last = std::max(last, std::fabs(double(w->data[i]) - f->data[i]));
  EXPECT_EQ(early, 0.0);
  EXPECT_GT(last, 1e-4);
}

TEST_F(CliBadModel, BinWithoutTokenizerAndCorruptTokenizer) {
  expect_one_line_error(run_llmserve("generate " + quote(testing::stories_bin()) + " --prompt hi"),
                        "--tokenizer");
  const std::string tok = testing::slurp(testing::stories_tokenizer());
  const std::string t = write("tok_trunc.bin", tok.substr(0, tok.size() / 3));
  expect_one_line_error(run_llmserve("generate " + quote(testing::stories_bin()) +
                                     " --tokenizer " + quote(t) + " --prompt hi"), t);
}

TEST_F(CliBadModel, BadFlagValues) {
  auto r = run_llmserve("generate " + bin_model_args() + " --prompt hi --kv-cache-memory 12XB");
  expect_one_line_error(r, "--kv-cache-memory");
  r = run_llmserve("generate " + bin_model_args() + " --prompt hi --max-tokens 0");
  expect_one_line_error(r, "--max-tokens: must be >= 1, got 0");
  r = run_llmserve("generate " + bin_model_args() + " --prompt hi --max-tokens 600");
  expect_one_line_error(r, "512");
  r = run_llmserve("logits " + quote(testing::stories_bin()) + " --token-ids 1,2,x --out /tmp/x.npy");
  expect_one_line_error(r, "'x'");
  // logits runs token ids through the model: a tokenizer would have no effect.
  r = run_llmserve("logits " + bin_model_args() + " --token-ids 1,2 --out /tmp/x.npy");
  expect_one_line_error(r, "--tokenizer has no effect on 'llmserve logits'");
  // ... nor would committing a KV pool that is exactly the prompt's blocks.
  r = run_llmserve("logits " + quote(testing::stories_bin()) +
                   " --token-ids 1,2 --out /tmp/x.npy --no-kv-cache-prefault");
  expect_one_line_error(r, "--kv-cache-prefault / --no-kv-cache-prefault has no effect on 'llmserve logits'");
  r = run_llmserve("generate " + bin_model_args() + " --prompt hi --block-size 0");
  expect_one_line_error(r, "--block-size");
}

TEST_F(CliBadModel, DirectoriesAndResourceLimitsAreErrorsNotCrashes) {
  const std::string dir = testing::temp_dir();
  expect_one_line_error(run_llmserve("generate " + quote(dir) + " --prompt hi"), "no config.json");
  expect_one_line_error(run_llmserve("generate " + quote(testing::stories_bin()) +
                                     " --tokenizer " + quote(dir) + " --prompt hi"), dir);
  const std::string gguf = quote(testing::stories_gguf());
  expect_one_line_error(run_llmserve("generate " + gguf + " --prompt hi --kv-cache-memory 10000GiB"),
                        "memory");
  expect_one_line_error(run_llmserve("generate " + gguf + " --prompt hi --num-kv-blocks 2147483647"),
                        "--num-kv-blocks");
  expect_one_line_error(run_llmserve("generate " + gguf + " --prompt hi --threads 100000"),
                        "--threads");
  expect_one_line_error(run_llmserve("serve " + gguf + " --port 99999"), "--port");
  expect_one_line_error(run_llmserve("serve " + gguf + " --http-threads 100000000"),
                        "--http-threads");
  expect_one_line_error(run_llmserve("generate " + gguf + " --prompt hi --kv-cache-memory 1.2.3"),
                        "1.2.3");
  std::string ids = "1";
  for (int i = 0; i < 200; ++i) ids += ",400";
  expect_one_line_error(run_llmserve("logits " + gguf + " --token-ids " + ids + " --out /tmp/x.npy"),
                        "max_model_len 128");
}

TEST(Cli, ParseErrorsExitOne) {
  const std::string gguf = "'" + testing::stories_gguf() + "'";
  EXPECT_EQ(run_llmserve("generate " + gguf + " --prompt hi --log-level loud").exit_code, 1);
  EXPECT_EQ(run_llmserve("serve " + gguf + " --port abc").exit_code, 1);
  EXPECT_EQ(run_llmserve("generate " + gguf).exit_code, 1);  // --prompt missing
  EXPECT_EQ(run_llmserve("frobnicate").exit_code, 1);
}

}  // namespace
}  // namespace llmserve
