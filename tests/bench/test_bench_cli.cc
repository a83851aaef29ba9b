// `llmserve bench` as a user runs it: --json prints one object with the keys, the
// timeline file is well-formed XML with one row per request, bad flags exit 1; the prefix-cache
// workloads (multi-turn, prefix_repetition) report their hit rate, and contradictory workload
// flags are one-line errors naming the flag, before any model is loaded.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../cli/cli_runner.h"
#include "xml_check.h"

namespace llmserve::bench {
namespace {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout only
};

CliResult run_cli(const std::string& args) {
  CliResult r;
  const std::string cmd = std::string(LLMSERVE_BIN) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string model() {
  return std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf --max-model-len 512";
}

TEST(BenchCli, JsonAndTimeline) {
  const std::string svg_path = ::testing::TempDir() + "bench_cli_timeline.svg";
  const CliResult r = run_cli("bench " + model() + " --num-prompts 5 --input-len 20 " +
                              "--output-len 6 --range-ratio 0.5 --request-rate 500 --seed 3 " +
                              "--max-num-seqs 2 --json --timeline " + svg_path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  for (const char* k : {"completed", "duration_s", "request_throughput", "output_throughput",
                        "total_token_throughput", "num_preemptions", "kv_utilization_mean",
                        "kv_utilization_peak"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
    for (const char* s : {"mean", "median", "p99"}) EXPECT_TRUE(j[k][s].is_number()) << k << s;
  EXPECT_EQ(j["completed"], 5);
  EXPECT_LE(j["peak_running"].get<int>(), 2);
  std::ifstream f(svg_path);
  std::stringstream svg;
  svg << f.rdbuf();
  EXPECT_EQ(testing::xml_error(svg.str()), "");
  size_t rows = 0;
  for (size_t p = svg.str().find("<g class=\"row\""); p != std::string::npos;
       p = svg.str().find("<g class=\"row\"", p + 1))
    ++rows;
  EXPECT_EQ(rows, 5u);
}

TEST(BenchCli, TableAndErrors) {
  const CliResult r = run_cli("bench " + model() + " --num-prompts 2 --input-len 8 --output-len 4");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Successful requests:                     2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("P99 ITL (ms):"), std::string::npos);
  EXPECT_NE(r.out.find("Mean KV utilization:"), std::string::npos);
  EXPECT_EQ(run_cli("bench " + model() + " --request-rate -1").exit_code, 1);
  EXPECT_EQ(run_cli("bench " + model() + " --range-ratio 1.5").exit_code, 1);
  EXPECT_EQ(run_cli("bench " + model() + " --output-len 600").exit_code, 1);  // > max_model_len
  EXPECT_EQ(run_cli("bench --num-prompts 2").exit_code, 1);                   // no MODEL
  EXPECT_EQ(run_cli("bench serve --num-prompts 2").exit_code, 1);             // no --url
}

nlohmann::json run_json(const std::string& args) {
  const CliResult r = run_cli("bench " + model() + " --threads 1 --json " + args);
  EXPECT_EQ(r.exit_code, 0) << args;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(BenchCli, MultiTurnHitRateWithAndWithoutPrefixCaching) {
  const std::string mt = "--multi-turn-conversations 3 --multi-turn-turns 2 "
                         "--multi-turn-new-tokens 20 --output-len 8";
  const nlohmann::json on = run_json(mt);
  EXPECT_EQ(on["completed"], 6);
  EXPECT_GT(on["prefix_cache_hit_rate"].get<double>(), 0.0);
  EXPECT_EQ(on["prefix_cache_hits"], on["cached_prompt_tokens"]);
  ASSERT_EQ(on["turns"].size(), 2u);
  EXPECT_EQ(on["turns"][0]["turn"], 1);
  EXPECT_EQ(on["turns"][0]["mean_prompt_tokens"], 21.0);  // BOS + 20
  EXPECT_EQ(on["turns"][1]["mean_prompt_tokens"], 49.0);  // + 8 generated + 20 new
  EXPECT_EQ(on["turns"][1]["mean_cached_tokens"], 16.0);  // 28 computed: one full block
  for (const auto& t : on["turns"]) EXPECT_GT(t["ttft_ms"]["median"].get<double>(), 0.0);
  const nlohmann::json off = run_json(mt + " --no-enable-prefix-caching");
  EXPECT_EQ(off["prefix_cache_hit_rate"], 0.0);
  EXPECT_EQ(off["prefix_cache_hits"], 0);
  EXPECT_EQ(off["turns"][1]["mean_cached_tokens"], 0.0);
  const CliResult table = run_cli("bench " + model() + " --threads 1 " + mt);
  EXPECT_NE(table.out.find("Prefix cache hit rate:"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Turn 2 TTFT mean / median / P99 (ms):"), std::string::npos);
}

TEST(BenchCli, PrefixRepetitionDataset) {
  const nlohmann::json j = run_json(
      "--dataset prefix_repetition --num-prompts 6 --prefix-repetition-prefix-len 40 "
      "--prefix-repetition-suffix-len 8 --prefix-repetition-num-prefixes 2 "
      "--prefix-repetition-output-len 4 --max-num-batched-tokens 64");
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["total_input_tokens"], 6 * 48);
  EXPECT_EQ(j["total_output_tokens"], 6 * 4);
  EXPECT_GT(j["prefix_cache_hits"].get<int>(), 0);
  EXPECT_TRUE(j["turns"].is_null());
}

/// Exit 1 and stderr exactly "error: " + line (nothing else: no model was loaded).
void expect_error(const std::string& args, const std::string& line) {
  const llmserve::testing::CommandResult r = llmserve::testing::run_llmserve(args);
  EXPECT_EQ(r.exit_code, 1) << args;
  EXPECT_EQ(r.err, "error: " + line + "\n") << args;
  EXPECT_EQ(r.out, "") << args;
}

// The arrival and length flags are checked before the model loads (its log lines would come
// first otherwise), --request-rate with the syntax of every number flag (QA: it took "0x10"
// as 16 and " 1" as 1).
TEST(BenchCli, WorkloadNumbersAreCheckedBeforeTheModelLoads) {
  const std::string b = "bench " + model() + " ";
  expect_error(b + "--request-rate 0x10", "--request-rate: '0x10' is not a decimal number");
  expect_error(b + "--request-rate ' 1'", "--request-rate: ' 1' is not a decimal number");
  expect_error(b + "--request-rate 0", "--request-rate: '0' is not a positive number or inf");
  expect_error(b + "--burstiness 0", "--burstiness must be a finite positive number, got 0");
  expect_error(b + "--burstiness 1e999", "--burstiness must be a finite positive number, got inf");
  expect_error(b + "--request-rate 1e999",
               "--request-rate: '1e999' is beyond a 64-bit float's range (inf sends every request "
               "at once)");
  expect_error(b + "--request-rate 1e-999", "--request-rate: '1e-999' is not a positive number or inf");
  expect_error(b + "--range-ratio 1", "--range-ratio must be in [0, 1), got 1");
  expect_error(b + "--num-prompts 2 --output-len 4 --request-rate inf --burstiness inf",
               "--burstiness must be a finite positive number, got inf");
  expect_error(b + "--num-prompts 2 --output-len 4 --request-rate 1e-9",
               "--request-rate 1e-09 would spread 2 requests over about 1e+09 s (more than a "
               "week); give a higher rate");
}

TEST(BenchCli, ContradictoryWorkloadFlagsAreOneLineErrors) {
  const std::string b = "bench " + model() + " ";
  expect_error(b + "--multi-turn-turns 2", "--multi-turn-turns needs --multi-turn-conversations");
  expect_error(b + "--multi-turn-new-tokens 9",
               "--multi-turn-new-tokens needs --multi-turn-conversations");
  expect_error(b + "--multi-turn-conversations 2 --num-prompts 4",
               "--num-prompts does not apply to --multi-turn-conversations (it sends "
               "conversations x turns requests)");
  expect_error(b + "--multi-turn-conversations 2 --input-len 4",
               "--input-len does not apply to --multi-turn-conversations (use "
               "--multi-turn-new-tokens)");
  expect_error(b + "--multi-turn-conversations 2 --range-ratio 0.5",
               "--range-ratio does not apply to --multi-turn-conversations (every turn has the "
               "same lengths)");
  expect_error(b + "--multi-turn-conversations 2 --request-rate 5",
               "--request-rate does not apply to --multi-turn-conversations (every conversation "
               "starts at once and sends its next turn when the previous reply has finished)");
  expect_error(b + "--multi-turn-conversations 2 --dataset prefix_repetition",
               "--dataset prefix_repetition cannot be combined with --multi-turn-conversations "
               "(each turn's new tokens are random)");
  expect_error(b + "--multi-turn-conversations 0",
               "--multi-turn-conversations: must be >= 1, got 0 (see 'llmserve bench --help')");
  expect_error(b + "--prefix-repetition-num-prefixes 2",
               "--prefix-repetition-num-prefixes needs --dataset prefix_repetition");
  expect_error(b + "--dataset prefix_repetition --input-len 8",
               "--input-len does not apply to --dataset prefix_repetition (use "
               "--prefix-repetition-prefix-len and --prefix-repetition-suffix-len)");
  expect_error(b + "--dataset prefix_repetition --output-len 8",
               "--output-len does not apply to --dataset prefix_repetition (use "
               "--prefix-repetition-output-len)");
  expect_error(b + "--dataset prefix_repetition --num-prompts 4",
               "--prefix-repetition-num-prefixes 10 is more than --num-prompts 4 (every prefix "
               "needs a request)");
  expect_error(b + "--dataset /nonexistent.jsonl --output-len 8",
               "--output-len does not apply to a --dataset file (each entry gives its "
               "output_len)");
  expect_error("bench serve --url http://127.0.0.1:1 --multi-turn-conversations 2 --vocab-size 9",
               "--vocab-size does not apply to bench serve --multi-turn-conversations (turns "
               "are sent as text)");
  expect_error("bench serve --url http://127.0.0.1:1 --multi-turn-turns 2",
               "--multi-turn-turns needs --multi-turn-conversations");
}

}  // namespace
}  // namespace llmserve::bench
