// `llmserve tokenize` end to end: the binary's ids equal the reference ids; errors are one line
// "error: ..." with exit code 1.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../cli/cli_runner.h"

namespace llmserve {
namespace {

using testing::run_llmserve;

std::string shared(const std::string& rel) { return std::string(LLMSERVE_SHARED_DIR) + "/" + rel; }

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = testing::temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<int32_t> ids_of(const testing::CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out;
  if (!j.is_object() || !j.contains("ids")) return {};
  return j["ids"].get<std::vector<int32_t>>();
}

TEST(TokenizeCli, GgufVocabularies) {
  const std::string text = write_text("hello.txt", "Hello world");
  EXPECT_EQ(ids_of(run_llmserve("tokenize --tokenizer " +
                                shared("testdata/tokenizer/ggml-vocab-gpt-2.gguf") +
                                " --text-file " + text + " --json")),
            (std::vector<int32_t>{15496, 995}));
  const auto spm = ids_of(run_llmserve(
      "tokenize --tokenizer " + shared("testdata/tokenizer/ggml-vocab-llama-spm.gguf") +
      " --text-file " + text + " --add-special --json"));
  ASSERT_FALSE(spm.empty());
  EXPECT_EQ(spm.front(), 1);  // BOS
}

TEST(TokenizeCli, HuggingFaceDirectoryAndFile) {
  const std::string text = write_text("chat.txt", "<|im_start|>user\nHello world<|im_end|>");
  const std::string dir = shared("testdata/tokenizer/hf-qwen3");
  const auto parsed = ids_of(run_llmserve("tokenize --tokenizer " + dir + " --text-file " + text +
                                          " --parse-special --json"));
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.front(), 151644);
  EXPECT_EQ(parsed.back(), 151645);
  const auto raw = ids_of(run_llmserve("tokenize --tokenizer " + dir + "/tokenizer.json" +
                                       " --text-file " + text + " --json"));
  EXPECT_GT(raw.size(), parsed.size());
  EXPECT_EQ(std::count(raw.begin(), raw.end(), 151644), 0);
  // Plain output: space-separated ids.
  const std::string hello = write_text("hello2.txt", "Hello world");
  const auto plain = run_llmserve("tokenize --tokenizer " + shared("testdata/tokenizer/hf-llama3") +
                                  " --text-file " + hello);
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "9906 1917\n");
}

TEST(TokenizeCli, Llama2cTokenizerBinCountsItsOwnTokens) {
  // tokenizer.bin does not store its size; the records that fill the file give it (512 here),
  // so --vocab-size is optional and the ids are those of the model's own GGUF vocabulary.
  const std::string text = write_text("lily.txt", "Lily and Ben went to the park.");
  const std::string bin = shared("models/stories260K/tok512.bin");
  const auto counted = ids_of(run_llmserve("tokenize --tokenizer " + bin + " --text-file " +
                                           text + " --add-special --json"));
  ASSERT_FALSE(counted.empty());
  EXPECT_EQ(counted, ids_of(run_llmserve("tokenize --tokenizer " + bin + " --vocab-size 512 "
                                         "--text-file " + text + " --add-special --json")));
  EXPECT_EQ(counted, ids_of(run_llmserve("tokenize --tokenizer " +
                                         shared("models/stories260K/stories260K.gguf") +
                                         " --text-file " + text + " --add-special --json")));
  // A file that is not one names the flag that would make it readable.
  const std::string junk = write_text("junk.bin", "not a tokenizer at all");
  const auto r = run_llmserve("tokenize --tokenizer " + junk + " --text-file " + text);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: " + junk + ": not a llama2.c tokenizer.bin: token record 0 does not "
                   "fit the file; if it is a tokenizer.bin with trailing bytes, give its token "
                   "count with --vocab-size\n");
}

TEST(TokenizeCli, ErrorsAreOneLine) {
  const std::string text = write_text("t.txt", "x");
  const std::string bad = write_text("tokenizer.json", "{\"model\": 3}");
  struct Case {
    std::string args;
    std::string want;
  } cases[] = {
      {"tokenize --text-file " + text, "--tokenizer"},
      {"tokenize --tokenizer " + bad, "--text-file"},
      {"tokenize --tokenizer /nonexistent/tok --text-file " + text, "/nonexistent/tok"},
      {"tokenize --tokenizer " + bad + " --text-file /nonexistent.txt", "/nonexistent.txt"},
      {"tokenize --tokenizer " + bad + " --text-file " + text, "'model'"},
  };
  for (const Case& c : cases) {
    const auto r = run_llmserve(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

}  // namespace
}  // namespace llmserve
