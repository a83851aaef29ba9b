// The engine flags as a vLLM user types them (README's flag table): --dtype, --kv-cache-dtype
// auto, --generation-config, -tp/-pp, --gpu-memory-utilization, --model, human-readable
// counts, repeated flags, --max-model-len 0, and the exact one-line errors for what is
// refused or misspelt. Each runs the real binary; errors come before any model work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "weights/npy.h"
#include "../engine/reference_cases.h"

namespace llmserve {
namespace {

using testing::run_llmserve;

std::string quote(const std::string& s) { return "'" + s + "'"; }
std::string gguf() { return quote(testing::stories_gguf()); }
std::string synth(const std::string& rel) {
  return testing::shared_path("testdata/models/synthetic/" + rel);
}

/// Exit status 1 and stderr exactly `line` + "\n" (nothing else printed).
void expect_error(const std::string& args, const std::string& line) {
  const testing::CommandResult r = run_llmserve(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
  EXPECT_EQ(r.err, "error: " + line + "\n") << args;
  EXPECT_EQ(r.out, "") << args;
}

/// `generate` on stories260K (GGUF): exit 0; returns stderr (the start-up log lines).
std::string generate_log(const std::string& flags) {
  const testing::CommandResult r =
      run_llmserve("generate " + gguf() + " --prompt hi --max-tokens 2 --threads 1 " + flags);
  EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.err;
  return r.err;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Flags, RefusedParallelismAndGpuMemory) {
  for (const char* cmd : {"serve", "generate", "bench"}) {
    const std::string base = std::string(cmd) + " " + gguf() +
                             (std::string(cmd) == "generate" ? " --prompt hi " : " ");
    expect_error(base + "--tensor-parallel-size 2",
                 "--tensor-parallel-size 2 is not supported: llmserve runs the model in one CPU "
                 "process (no tensor parallelism); use 1");
    expect_error(base + "-tp 4",
                 "--tensor-parallel-size 4 is not supported: llmserve runs the model in one CPU "
                 "process (no tensor parallelism); use 1");
    expect_error(base + "-pp=2",
                 "--pipeline-parallel-size 2 is not supported: llmserve runs the model in one "
                 "CPU process (no pipeline parallelism); use 1");
    expect_error(base + "--gpu-memory-utilization 0.9",
                 "--gpu-memory-utilization is not supported: llmserve is a CPU engine; size the "
                 "KV cache in bytes with --kv-cache-memory (e.g. --kv-cache-memory 4GiB)");
  }
  // 1 is what llmserve does: accepted.
  generate_log("-tp 1 --pipeline-parallel-size 1");
}

TEST(Flags, ModelPositionalOrFlag) {
  const std::string m = testing::stories_gguf();
  EXPECT_EQ(run_llmserve("generate --model " + quote(m) + " --prompt hi --max-tokens 1")
                .exit_code, 0);
  EXPECT_EQ(run_llmserve("generate " + quote(m) + " --model " + quote(m) +
                         " --prompt hi --max-tokens 1").exit_code, 0);
  expect_error("serve " + quote(m) + " --model /x.gguf",
               "MODEL '" + m + "' and --model '/x.gguf' differ; give the model once");
  expect_error("serve --port 0", "no model given (MODEL or --model)");
  EXPECT_EQ(run_llmserve("inspect --model " + quote(m) + " --json").exit_code, 0);
  expect_error("inspect " + quote(m) + " --model /x.gguf",
               "MODEL '" + m + "' and --model '/x.gguf' differ; give the model once");
}

TEST(Flags, HumanReadableCountsAndMaxModelLen) {
  // vLLM's rule: k = 1000, K = 1024, decimals only with lowercase suffixes.
  EXPECT_TRUE(has(generate_log("--max-model-len 1K"), "max_model_len 1024,"));
  EXPECT_TRUE(has(generate_log("--max-model-len 4k"), "max_model_len 4000,"));
  EXPECT_TRUE(has(generate_log("--max-model-len 25.6k --max-num-batched-tokens 8K"),
                  "max_model_len 25600,"));
  // One request: the scheduler's sequence limit would have no effect on generate.
  expect_error("generate " + gguf() + " --prompt hi --max-num-seqs 1k",
               "--max-num-seqs has no effect on 'llmserve generate'");
  auto r = run_llmserve("inspect " + gguf() + " --max-model-len 2K --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kv_cache"]["max_model_len"], 2048);
  r = run_llmserve("generate " + gguf() + " --prompt hi --max-tokens 1k --max-model-len 2k "
                   "--ignore-eos --json --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["num_output_tokens"], 1000);

  const std::string hint = " (see 'llmserve generate --help')";
  const std::string g = "generate " + gguf() + " --prompt hi ";
  expect_error(g + "--max-model-len 0", "--max-model-len: must be >= 1, got 0" + hint);
  expect_error(g + "--max-model-len -1", "--max-model-len: must be >= 1, got -1" + hint);
  expect_error(g + "--max-model-len 1.5K",
               "--max-model-len: '1.5K': decimals are not allowed with binary suffixes like K "
               "(did you mean 1.5k?)" + hint);
  expect_error(g + "--max-num-batched-tokens 1.0001k",
               "--max-num-batched-tokens: '1.0001k' is not a whole number" + hint);
  expect_error(g + "--max-num-seqs lots",
               "--max-num-seqs: 'lots' is not an integer (e.g. 4096, 4k = 4000, 4K = 4096)" +
                   hint);
  expect_error(g + "--max-model-len 4G",
               "--max-model-len: must be <= 2147483647, got 4G (= 4294967296)" + hint);
  expect_error(g + "--seed -1", "--seed: must be >= 0, got -1" + hint);
  // int64 flags: out of range is an error, never clamped to INT64_MAX (--request-seed and
  // serve's --max-request-body-bytes were); below -1 is no seed.
  expect_error(g + "--request-seed 99999999999999999999",
               "--request-seed: '99999999999999999999' is out of range" + hint);
  expect_error(g + "--request-seed -2", "--request-seed: must be >= -1, got -2" + hint);
  expect_error("serve " + gguf() + " --max-request-body-bytes 99999999999999999999",
               "--max-request-body-bytes: '99999999999999999999' is out of range (see "
               "'llmserve serve --help')");
  expect_error(g + "--top-k -5", "--top-k: must be >= -1, got -5 (see 'llmserve generate --help')");
  EXPECT_TRUE(has(generate_log("--request-seed -1"), "finish_reason"));
  EXPECT_TRUE(has(generate_log("--request-seed 9223372036854775807"), "finish_reason"));
  expect_error("inspect " + gguf() + " --max-model-len 0",
               "--max-model-len: must be >= 1, got 0 (see 'llmserve inspect --help')");
}

// --threads: 0 = auto (the physical cores, as the help says) everywhere; one range, [0, 1024],
// with one message in every subcommand that has the flag.
TEST(Flags, ThreadsZeroIsAutoAndTheRangeIsTheSameEverywhere) {
  EXPECT_TRUE(has(generate_log("--threads 0"), " threads, "));
  const std::string dir = testing::temp_dir();
  auto r = run_llmserve("logits " + gguf() + " --token-ids 1,2 --out " + quote(dir + "/t0.npy") +
                        " --threads 0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string model = gguf();
  for (const std::string& cmd :
       {"generate " + model + " --prompt hi", "logits " + model + " --token-ids 1 --out x.npy",
        "serve " + model, "bench " + model,
        "quantize " + model + " " + quote(dir + "/t.gguf") + " --type Q4_K_M"}) {
    const std::string name = cmd.substr(0, cmd.find(' '));
    const std::string hint = " (see 'llmserve " + name + " --help')";
    expect_error(cmd + " --threads 99999", "--threads: must be in [0, 1024], got 99999" + hint);
    expect_error(cmd + " --threads -1", "--threads: must be in [0, 1024], got -1" + hint);
    r = run_llmserve(name + " --help");
    EXPECT_TRUE(has(r.out, "0 = auto: the physical cores")) << name << "\n" << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.gguf.tmp"));
}

// logits (and generate, bench) refuse the engine flags they have no use for before any other
// check, so no hint sends the user to a flag the command refuses; their --help lists them
// apart; a bad value is still named as such (as serve names it).
TEST(Flags, UnusedFlagsAreRefusedFirstAndListedApart) {
  const std::string l = "logits " + gguf() + " --token-ids 1,2 --out x.npy ";
  const std::string hint = " (see 'llmserve logits --help')";
  expect_error(l + "--max-delay-ms 3", "--max-delay-ms has no effect on 'llmserve logits'");
  expect_error(l + "--prefill-policy mixed", "--prefill-policy has no effect on 'llmserve logits'");
  expect_error(l + "--seed 1 --prefill-policy mixed",
               "--prefill-policy has no effect on 'llmserve logits'");
  expect_error(l + "--max-delay-ms -1", "--max-delay-ms: must be in [0, 3600000], got -1" + hint);
  expect_error(l + "--max-delay-ms nan", "--max-delay-ms: must be in [0, 3600000], got nan" + hint);
  expect_error("serve " + gguf() + " --max-delay-ms -1",
               "--max-delay-ms: must be in [0, 3600000], got -1 (see 'llmserve serve --help')");
  expect_error("generate " + gguf() + " --prompt hi --max-delay-ms 5",
               "--max-delay-ms has no effect on 'llmserve generate'");
  // Before the engine's own refusals too.
  expect_error(l + "-tp 2 --num-kv-blocks 4", "--num-kv-blocks has no effect on 'llmserve logits'");
  auto r = run_llmserve("logits --help");
  ASSERT_EQ(r.exit_code, 0);
  const size_t apart = r.out.find("Refused by 'llmserve logits' (no effect there):");
  ASSERT_NE(apart, std::string::npos) << r.out;
  for (const char* f : {"--tokenizer", "--served-model-name", "--generation-config",
                        "--max-num-seqs", "--enable-chunked-prefill", "--batching",
                        "--max-delay-ms", "--prefill-policy", "--scheduling-policy",
                        "--enable-prefix-caching", "--kv-cache-prefault", "--kv-cache-memory",
                        "--num-kv-blocks", "--seed"})
    EXPECT_GT(r.out.find(std::string("  ") + f), apart) << f;
  for (const char* f : {"--dtype", "--max-model-len", "--threads", "--quantization", "--token-ids"})
    EXPECT_LT(r.out.find(std::string("  ") + f), apart) << f;
  r = run_llmserve("serve --help");
  EXPECT_FALSE(has(r.out, "Refused by")) << r.out;
}

TEST(Flags, RepeatedFlagTakesTheLastValue) {
  auto r = run_llmserve("generate " + gguf() + " --prompt hi --max-tokens 3 --max-tokens 5 "
                        "--ignore-eos --json --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["num_output_tokens"], 5);
  EXPECT_TRUE(has(generate_log("--max-model-len 64 --max-model-len 300"), "max_model_len 300,"));
  // Flags and their negations too (argparse: the last one wins).
  generate_log("--no-enable-chunked-prefill --enable-chunked-prefill --max-num-batched-tokens 4");
  EXPECT_FALSE(has(generate_log("--dtype bf16 --dtype auto"), "converted at load"));
}

TEST(Flags, DtypeConvertsAtLoadAndKvAutoFollows) {
  const std::string dir = testing::temp_dir();
  const std::string model = quote(synth("llama-gqa/model.gguf"));
  auto logits = [&](const std::string& name, const std::string& flags) {
    const std::string out = dir + "/" + name + ".npy";
    auto r = run_llmserve("logits " + model + " --token-ids 1,501,500,505,196,7 --out " +
                          quote(out) + " --threads 1 " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.err;
    auto npy = read_npy(out);
    EXPECT_TRUE(npy.ok());
    return std::make_pair(npy.ok() ? npy->data : std::vector<float>{}, r.err);
  };
  const auto [f32, f32_log] = logits("f32", "");
  const auto [bf16, bf16_log] = logits("bf16", "--dtype bf16");
  EXPECT_FALSE(has(f32_log, "converted"));
  EXPECT_TRUE(has(bf16_log, "[info] --dtype bf16: 16 weight tensors converted at load: 16 f32 "
                            "-> bf16 (1.84 -> 0.92 MiB); 0 kept as stored (already bf16 or not "
                            "a float type); norms and biases stay f32"))
      << bf16_log;
  EXPECT_NE(bf16, f32);
  EXPECT_EQ(logits("bfloat16", "--dtype bfloat16").first, bf16);  // vLLM's spelling
  EXPECT_EQ(logits("bf16kv", "--dtype bf16 --kv-cache-dtype bf16").first, bf16);  // auto = bf16
  EXPECT_NE(logits("bf16f32kv", "--dtype bf16 --kv-cache-dtype float32").first, bf16);
  EXPECT_EQ(logits("half", "--dtype half").first, logits("f16", "--dtype float16").first);
  EXPECT_EQ(logits("float", "--dtype float").first, f32);  // already f32: nothing changes
  auto r = run_llmserve("inspect " + model + " --dtype bf16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["weight_dtype"], "f32");
  EXPECT_EQ(j["dtype"], "bf16");
  EXPECT_EQ(j["kv_cache"]["dtype"], "bf16");
  // The older build's complaint was about `--dtype float16` itself; it is a flag now.
  EXPECT_TRUE(has(generate_log("--dtype float16"), "weights f16"));
  expect_error("serve " + gguf() + " --dtype fp8",
               "--dtype: 'fp8' is not one of auto, float32 (float, f32), bfloat16 (bf16), "
               "float16 (half, f16) (see 'llmserve serve --help')");
  expect_error("generate " + gguf() + " --prompt hi --kv-cache-dtype fp8_e4m3",
               "--kv-cache-dtype: 'fp8_e4m3' is not one of auto, float32 (float, f32), bfloat16 "
               "(bf16), float16 (half, f16) (see 'llmserve generate --help')");
}

TEST(Flags, GenerationConfigModes) {
  EXPECT_TRUE(has(generate_log(""),
                  "[info] generation config (auto): sampling defaults none; eos ids 2\n"));
  EXPECT_TRUE(has(generate_log("--generation-config vllm"),
                  "[info] generation config (vllm): sampling defaults none (--generation-config "
                  "vllm); eos ids 2\n"));
  const std::string dir = testing::temp_dir() + "/genconf";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/generation_config.json") << R"({"temperature": 0.5, "top_p": 0.9})";
  EXPECT_TRUE(has(generate_log("--generation-config " + quote(dir)),
                  "[info] generation config (" + dir + "/generation_config.json): sampling "
                  "defaults temperature=0.5, top_p=0.9; no eos ids\n"));
  expect_error("generate " + gguf() + " --prompt hi --generation-config /nonexistent",
               "--generation-config /nonexistent: not auto, vllm or a directory");
  const std::string empty = testing::temp_dir() + "/genconf_empty";
  std::filesystem::create_directories(empty);
  expect_error("generate " + gguf() + " --prompt hi --generation-config " + quote(empty),
               "--generation-config " + empty + ": the directory has no generation_config.json");
}

TEST(Flags, ParseErrorsAreOneLineWithAHint) {
  expect_error("serve " + gguf() + " --max-model-length 512",
               "unknown flag --max-model-length for 'llmserve serve'; did you mean "
               "--max-model-len? (see 'llmserve serve --help')");
  expect_error("generate " + gguf() + " --promt hi",
               "unknown flag --promt for 'llmserve generate'; did you mean --prompt? (see "
               "'llmserve generate --help')");
  expect_error("serve " + gguf() + " --frobnicate",
               "unknown flag --frobnicate for 'llmserve serve' (see 'llmserve serve --help')");
  expect_error("bench serve --url http://127.0.0.1:1 --max-num-seqs 4",
               "unknown flag --max-num-seqs for 'llmserve bench serve' (see 'llmserve bench "
               "serve --help')");
  expect_error("inspect " + gguf() + " --threads 2",
               "unknown flag --threads for 'llmserve inspect' (see 'llmserve inspect --help')");
  expect_error("genrate", "unknown command 'genrate'; did you mean generate? (see 'llmserve "
                          "--help')");
  expect_error("serve " + gguf() + " other.gguf",
               "unexpected argument 'other.gguf' for 'llmserve serve' (see 'llmserve serve "
               "--help')");
  expect_error("serve " + gguf() + " --port abc",
               "--port: 'abc' is not an integer (see 'llmserve serve --help')");
  expect_error("serve " + gguf() + " --port",
               "--port needs a value (see 'llmserve serve --help')");
  expect_error("generate " + gguf(), "--prompt is required (see 'llmserve generate --help')");
  expect_error("generate " + gguf() + " --prompt hi --log-level loud",
               "--log-level: loud not in {trace,debug,info,warn,error,critical,off} (see "
               "'llmserve generate --help')");
  // A flag's value: the boolean spellings (was "'bogus' is not a valid value ()").
  const std::string booleans = "is not a boolean (true/false, yes/no, on/off, 1/0)";
  expect_error("generate " + gguf() + " --prompt hi --kv-cache-prefault=bogus",
               "--kv-cache-prefault: 'bogus' " + booleans + " (see 'llmserve generate --help')");
  expect_error("serve " + gguf() + " --disable-ui=maybe",
               "--disable-ui: 'maybe' " + booleans + " (see 'llmserve serve --help')");
  EXPECT_TRUE(has(generate_log("--kv-cache-prefault=off --ignore-eos=yes"), "finish_reason"));
  // --kv-cache-memory: TiB accepted; an unknown unit lists the accepted ones.
  auto r = run_llmserve("inspect " + gguf() + " --kv-cache-memory 1TiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kv_cache"]["blocks"],
            (int64_t{1} << 40) / nlohmann::json::parse(r.out)["kv_cache"]["bytes_per_block"].get<int64_t>());
  expect_error("generate " + gguf() + " --prompt hi --kv-cache-memory 10PiB",
               "--kv-cache-memory: unknown unit 'PiB' in '10PiB' (units: B, KiB, MiB, GiB, TiB; "
               "K/KB, M/MB, G/GB, T/TB the same, binary)");
}

// An empty value of a number flag is an error naming it (CLI11 read it as 0: `--temperature ""`
// was greedy, `--top-k ""` all tokens), and a value a 32-bit float cannot hold is named as given
// (`--top-p 1e-50` was "got 0"). --top-k's range is checked on the integer, not after a wrap.
TEST(Flags, EmptyAndOutOfRangeNumbersAreNamed) {
  const std::string gen = "generate " + gguf() + " --prompt hi ";
  const std::string help = " (see 'llmserve generate --help')";
  expect_error(gen + "--temperature ''", "--temperature: needs a number, got an empty value" + help);
  expect_error(gen + "--top-p=", "--top-p needs a value" + help);
  expect_error(gen + "--top-p ''", "--top-p: needs a number, got an empty value" + help);
  expect_error("serve " + gguf() + " --port ''",
               "--port: needs a number, got an empty value (see 'llmserve serve --help')");
  expect_error("bench " + gguf() + " --temperature ''",
               "--temperature: needs a number, got an empty value (see 'llmserve bench --help')");
  expect_error(gen + "--top-k ''", "--top-k: '' is not an integer (e.g. 4096, 4k = 4000, 4K = "
                                   "4096)" + help);
  expect_error(gen + "--top-p 1e-50",
               "--top-p 1e-50 is out of a 32-bit float's range (1e-45 to 3.4028235e+38)");
  expect_error(gen + "--temperature 1e39",
               "--temperature 1e+39 is out of a 32-bit float's range (1e-45 to 3.4028235e+38)");
  expect_error(gen + "--top-k 2147483648", "--top-k: must be <= 2147483647, got 2147483648" + help);
  expect_error(gen + "--top-k -2", "--top-k: must be >= -1, got -2" + help);
  // strtod / strtol would read these as 16, 0.5 and 3 (a typo became another value).
  expect_error(gen + "--temperature 0x10", "--temperature: '0x10' is not a decimal number" + help);
  expect_error(gen + "--top-p 0x1p-1", "--top-p: '0x1p-1' is not a decimal number" + help);
  expect_error(gen + "--temperature ' 3'", "--temperature: ' 3' is not a decimal number" + help);
  expect_error("serve " + gguf() + " --port 0x4000",
               "--port: '0x4000' is not an integer (see 'llmserve serve --help')");
  // An empty budget read as "not given" (the 2 GiB default), even after another value.
  expect_error(gen + "--kv-cache-memory 1GiB --kv-cache-memory ''",
               "--kv-cache-memory: needs a size, got an empty value" + help);
  // A repeated plain-integer flag: each value is checked (CLI11 converted only the last one and
  // named the values joined, "'18123,1k'"); digits a flag's type cannot hold are out of range.
  const std::string serve_help = " (see 'llmserve serve --help')";
  expect_error("serve " + gguf() + " --port 18123 --port 1k",
               "--port: '1k' is not an integer" + serve_help);
  expect_error("serve " + gguf() + " --port abc --port 18127",
               "--port: 'abc' is not an integer" + serve_help);
  expect_error("serve " + gguf() + " --block-size 99999999999",
               "--block-size: '99999999999' is out of range" + serve_help);
  expect_error("logits " + gguf() + " --out unused.npy --token-ids 1,2,",
               "--token-ids: '1,2,' ends with a comma");
  // --seed reads the human-readable integers its help names.
  EXPECT_EQ(run_llmserve("generate " + gguf() + " --prompt hi --max-tokens 2 --threads 1 --seed 1k")
                .exit_code, 0);
}

TEST(Flags, BenchServeDeadUrlIsConnectionRefused) {
  expect_error("bench serve --url http://127.0.0.1:1 --num-prompts 1",
               "cannot connect to http://127.0.0.1:1: connection refused (is the server "
               "running?)");
}

}  // namespace


TEST(Flags, ValuesWithNoEffectAreRefused) {
  const std::string tok = quote(testing::stories_tokenizer());
  const std::string text = testing::temp_dir() + "/flags_text.txt";
  { std::ofstream(text) << "Once upon a time"; }
  // A tokenizer.bin of 512 tokens read as 100 or 511 would give wrong ids.
  for (const char* n : {"100", "511"})
    expect_error("tokenize --tokenizer " + tok + " --text-file " + quote(text) + " --vocab-size " + n,
                 std::string("--vocab-size ") + n + ": " + testing::stories_tokenizer() +
                     " holds 512 tokens (leave the flag out, or give that count)");
  EXPECT_EQ(run_llmserve("tokenize --tokenizer " + tok + " --text-file " + quote(text) +
                         " --vocab-size 512").exit_code, 0);
  expect_error("serve " + gguf() + " --chat-template ''",
               "--chat-template must not be empty (leave the flag out for the model's template)");
  expect_error("render-chat --chat-template '' --messages-file " + quote(text),
               "--chat-template must not be empty (leave the flag out for the --model's "
               "template, or the built-in one)");
  expect_error("bench " + gguf() + " --served-model-name x --num-prompts 1",
               "--served-model-name has no effect on 'llmserve bench'");
  expect_error("bench " + gguf() + " --scheduling-policy priority --num-prompts 1",
               "--scheduling-policy has no effect on 'llmserve bench'");
  expect_error("bench serve --url http://127.0.0.1:1 --model-file " + gguf() + " --vocab-size 100",
               "give --model-file or --vocab-size, not both (the model file's vocabulary sets "
               "the size)");
  expect_error("generate " + gguf() + " --prompt ''", "--prompt must not be empty");
  for (const auto& [args, line] : std::vector<std::pair<std::string, std::string>>{
           {"serve " + gguf() + " --port 0 --chat-template " + quote(testing::temp_dir()),
            "--chat-template " + testing::temp_dir() + ": not a regular file"},
           {"generate " + gguf() + " --prompt hi --temperature -1",
            "--temperature must be a finite number >= 0, got -1"},
           {"generate " + gguf() + " --prompt hi --top-p 0", "--top-p must be in (0, 1], got 0"}}) {
    const testing::CommandResult g = run_llmserve(args);
    EXPECT_EQ(g.exit_code, 1);
    EXPECT_TRUE(has(g.err, "error: " + line + "\n")) << g.err;
  }
  // The sampling flags are checked before the model loads: a missing model file is not
  // reached (its error would come first otherwise).
  for (const auto& [flag, line] : std::vector<std::pair<std::string, std::string>>{
           {"--temperature nan", "--temperature must be a finite number >= 0, got nan"},
           {"--top-p 1.5", "--top-p must be in (0, 1], got 1.5"}}) {
    const testing::CommandResult g =
        run_llmserve("generate " + quote(testing::temp_dir() + "/absent.gguf") + " --prompt hi " + flag);
    EXPECT_EQ(g.exit_code, 1);
    EXPECT_EQ(g.err, "error: " + line + "\n");
  }
  const testing::CommandResult b = run_llmserve(
      "bench " + quote(testing::temp_dir() + "/absent.gguf") + " --num-prompts 1 --temperature -1");
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_EQ(b.err, "error: --temperature must be a finite number >= 0, got -1\n");
  const testing::CommandResult r = run_llmserve("generate " + gguf() + " --prompt hi --top-k 1000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "\nerror: --top-k 1000 is larger than the vocabulary (512 tokens); -1 "
                         "keeps all\n")) << r.err;
}

}  // namespace llmserve
