// The CLI's parsing helpers on their own: vLLM's human-readable integers, the dtype spellings,
// MODEL vs --model, the -tp/-pp aliases and the edit distance behind "did you mean".
#include <gtest/gtest.h>

#include "cli/engine_flags.h"
#include "cli/human_int.h"
#include "cli/parse_errors.h"
#include "common/edit_distance.h"

namespace llmserve::cli {
namespace {

TEST(HumanInt, DecimalLowercaseBinaryUppercaseAsVllm) {
  const std::pair<const char*, int64_t> ok[] = {
      {"0", 0},           {"4096", 4096},           {"-3", -3},
      {"1k", 1000},       {"4k", 4000},             {"25.6k", 25600},
      {"1.5m", 1500000},  {"2g", 2000000000},       {"1t", 1000000000000},
      {"1K", 1024},       {"8K", 8192},             {"2M", 2097152},
      {"1G", 1073741824}, {"1T", 1099511627776},    {"0.5k", 500},
      {"+4", 4},          {"+4k", 4000}};  // a plus as argparse's int() and CLI11 take it
  for (const auto& [text, want] : ok) {
    auto v = parse_human_int(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status().message();
    EXPECT_EQ(*v, want) << text;
  }
}

TEST(HumanInt, RefusalsSayWhy) {
  EXPECT_EQ(parse_human_int("1.5K").status().message(),
            "'1.5K': decimals are not allowed with binary suffixes like K (did you mean 1.5k?)");
  EXPECT_EQ(parse_human_int("1.5555k").status().message(), "'1.5555k' is not a whole number");
  for (const char* bad : {"", "k", "abc", "4kk", "4 k", "1.5", "4x", "-4k", "1e3", "+", "++4", "+-4"})
    EXPECT_EQ(parse_human_int(bad).status().message(),
              fmt::format("'{}' is not an integer (e.g. 4096, 4k = 4000, 4K = 4096)", bad))
        << bad;
  EXPECT_EQ(parse_human_int("99999999999999999999").status().message(),
            "'99999999999999999999' is out of range");
}

TEST(HumanInt, ValidatorRewritesAndBounds) {
  CLI::Validator v = human_int(1);
  std::string s = "4k";
  EXPECT_EQ(v(s), "");
  EXPECT_EQ(s, "4000");
  s = "0";
  EXPECT_EQ(v(s), "must be >= 1, got 0");
  s = "3G";
  EXPECT_EQ(v(s), "must be <= 2147483647, got 3G (= 3221225472)");
  // A bound of its own on both sides (--threads) reads as a range.
  CLI::Validator threads = human_int(0, 1024);
  for (const char* bad : {"-1", "1025", "99999"}) {
    s = bad;
    EXPECT_EQ(threads(s), fmt::format("must be in [0, 1024], got {}", bad));
  }
  s = "4k";  // a suffix: the message names the value it stands for
  EXPECT_EQ(threads(s), "must be in [0, 1024], got 4k (= 4000)");
  s = "1K";
  EXPECT_EQ(threads(s), "");
  EXPECT_EQ(s, "1024");
}

TEST(ByteSizes, BinaryUnitsUpToTiB) {
  const std::pair<const char*, int64_t> ok[] = {
      {"123", 123},        {"64KiB", 65536},        {"512mib", int64_t{512} << 20},
      {"2G", int64_t{2} << 30}, {"1.5GB", int64_t{3} << 29}, {"1TiB", int64_t{1} << 40},
      {"2t", int64_t{2} << 40}, {"0.5TB", int64_t{1} << 39}};
  for (const auto& [text, want] : ok) {
    auto v = parse_bytes(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status().message();
    EXPECT_EQ(*v, want) << text;
  }
  EXPECT_EQ(parse_bytes("3PiB").status().message(),
            "--kv-cache-memory: unknown unit 'PiB' in '3PiB' (units: B, KiB, MiB, GiB, TiB; "
            "K/KB, M/MB, G/GB, T/TB the same, binary)");
  EXPECT_EQ(parse_bytes("9000000TiB").status().message(),
            "--kv-cache-memory: '9000000TiB' is out of range (1 byte to 9e18 bytes)");
}

TEST(DtypeFlag, VllmAndShortSpellings) {
  const std::pair<const char*, std::optional<DType>> ok[] = {
      {"auto", std::nullopt},     {"float32", DType::kF32},   {"float", DType::kF32},
      {"f32", DType::kF32},       {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
      {"float16", DType::kF16},   {"half", DType::kF16},      {"f16", DType::kF16}};
  for (const auto& [text, want] : ok) {
    auto d = parse_dtype("--dtype", text);
    ASSERT_TRUE(d.ok()) << text;
    EXPECT_EQ(*d, want) << text;
  }
  EXPECT_EQ(parse_dtype("--dtype", "fp8").status().message(),
            "--dtype: 'fp8' is not one of auto, float32 (float, f32), bfloat16 (bf16), float16 "
            "(half, f16)");
  EXPECT_EQ(parse_dtype("--dtype", "auto", /*allow_auto=*/false).status().message(),
            "--dtype: 'auto' is not one of float32 (float, f32), bfloat16 (bf16), float16 "
            "(half, f16)");
}

TEST(ModelPath, PositionalOrFlagButNotTwoDifferent) {
  EXPECT_EQ(*resolve_model_path("a.gguf", "", true), "a.gguf");
  EXPECT_EQ(*resolve_model_path("", "a.gguf", true), "a.gguf");
  EXPECT_EQ(*resolve_model_path("a.gguf", "a.gguf", true), "a.gguf");
  EXPECT_EQ(*resolve_model_path("", "", false), "");
  EXPECT_EQ(resolve_model_path("a.gguf", "b.gguf", true).status().message(),
            "MODEL 'a.gguf' and --model 'b.gguf' differ; give the model once");
  EXPECT_EQ(resolve_model_path("", "", true).status().message(),
            "no model given (MODEL or --model)");
}

TEST(ShortAliases, TpAndPpBecomeLongFlags) {
  const char* argv[] = {"llmserve", "serve", "m", "-tp", "1", "-pp=1", "-tpx", "--", "-tp"};
  const auto out = expand_short_aliases(9, const_cast<char**>(argv));
  const std::vector<std::string> want = {"llmserve", "serve", "m", "--tensor-parallel-size", "1",
                                         "--pipeline-parallel-size=1", "-tpx", "--", "-tp"};
  EXPECT_EQ(out, want);
}

TEST(EditDistance, Levenshtein) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("--prot", "--port"), 2u);
  EXPECT_EQ(edit_distance("--promt", "--prompt"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
}

/// describe_parse_error on a small app: the same code path main.cc runs.
std::string parse_error_of(std::vector<std::string> args) {
  CLI::App app{"t"};
  apply_argparse_conventions(app);
  app.require_subcommand(1);
  CLI::App* serve = app.add_subcommand("serve", "s");
  int port = 0;
  std::string model;
  serve->add_option("model", model);
  serve->add_option("--port", port);
  serve->add_option("--max-model-len", port)->transform(human_int(1));
  std::vector<char*> argv{const_cast<char*>("llmserve")};
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return describe_parse_error(app, e);
  }
  return fmt::format("ok port={}", port);
}

TEST(ParseErrors, OneLineNamingFlagAndCommand) {
  EXPECT_EQ(parse_error_of({"serve", "m", "--port", "1", "--port", "2"}), "ok port=2");
  EXPECT_EQ(parse_error_of({"serve", "m", "--prot", "1"}),
            "unknown flag --prot for 'llmserve serve'; did you mean --port? (see 'llmserve "
            "serve --help')");
  EXPECT_EQ(parse_error_of({"serve", "--zzzzzz=3"}),
            "unknown flag --zzzzzz for 'llmserve serve' (see 'llmserve serve --help')");
  EXPECT_EQ(parse_error_of({"serv"}),
            "unknown command 'serv'; did you mean serve? (see 'llmserve --help')");
  EXPECT_EQ(parse_error_of({}), "no command given (one of: serve) (see 'llmserve --help')");
  EXPECT_EQ(parse_error_of({"serve", "m", "extra"}),
            "unexpected argument 'extra' for 'llmserve serve' (see 'llmserve serve --help')");
  EXPECT_EQ(parse_error_of({"serve", "m", "--port", "abc"}),
            "--port: 'abc' is not an integer (see 'llmserve serve --help')");
  EXPECT_EQ(parse_error_of({"serve", "m", "--port"}),
            "--port needs a value (see 'llmserve serve --help')");
  EXPECT_EQ(parse_error_of({"serve", "m", "--max-model-len", "0"}),
            "--max-model-len: must be >= 1, got 0 (see 'llmserve serve --help')");
  EXPECT_EQ(parse_error_of({"serve", "m", "--max-model-len", "2K"}), "ok port=2048");
}

}  // namespace
}  // namespace llmserve::cli
