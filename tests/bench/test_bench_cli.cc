// `llmserve bench` as a user runs it: --json prints one object with the keys, the
// timeline file is well-formed XML with one row per request, bad flags exit 1.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace llmserve::bench
