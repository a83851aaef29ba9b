// bench --roofline's pieces (bench/roofline.h): the in-process read-bandwidth probe, the
// roofline arithmetic and its JSON / table rows; and through the CLI, that the bytes per token
// it divides by are inspect's decode_bytes_per_token for the same file.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "bench/roofline.h"
#include "common/thread_pool.h"

namespace llmserve::bench {
namespace {

TEST(Roofline, ProbeMeasuresAPlausibleBandwidthWithAndWithoutWorkers) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double gbs = probe_read_bandwidth(pool, int64_t{64} << 20, 2);
    EXPECT_TRUE(std::isfinite(gbs)) << threads;
    EXPECT_GT(gbs, 0.1) << threads;    // far below any machine's DRAM
    EXPECT_LT(gbs, 10000.0) << threads;  // far above any (a wrong byte count would show)
  }
}

TEST(Roofline, FiguresFromTheProbesAndTheMedianTpot) {
  DecodeRoofline r;
  r.bytes_per_token = 500'000'000;  // 0.5 GB per token
  r.bandwidth_before_gbs = 40;
  r.bandwidth_after_gbs = 60;       // mean 50 GB/s -> 100 tok/s
  EXPECT_DOUBLE_EQ(r.roofline_tok_s(), 100.0);
  BenchMetrics m;
  m.tpot_ms = {12.0, 12.5, 30.0};   // median 12.5 ms -> 80 tok/s
  const nlohmann::json j = roofline_to_json(r, m);
  EXPECT_EQ(j["bytes_per_token"], 500'000'000);
  EXPECT_DOUBLE_EQ(j["read_bandwidth_before_gbs"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(j["read_bandwidth_after_gbs"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(j["roofline_tok_s"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(j["decode_tok_s"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(j["fraction_of_roofline"].get<double>(), 0.8);
  const std::string table = format_roofline_table(r, m);
  EXPECT_NE(table.find("Decode Roofline"), std::string::npos) << table;
  EXPECT_NE(table.find("500.0"), std::string::npos) << table;     // MB per token
  EXPECT_NE(table.find("40.0 / 60.0"), std::string::npos) << table;
  EXPECT_NE(table.find("80.0%"), std::string::npos) << table;
  EXPECT_EQ(table.find("fit in the cache"), std::string::npos) << table;
  m.tpot_ms.median = 5.0;  // 200 tok/s: above the DRAM roofline, said so
  EXPECT_NE(format_roofline_table(r, m).find("200.0% (above: the weights fit in the cache)"),
            std::string::npos) << format_roofline_table(r, m);
}

TEST(Roofline, NoTpotSampleGivesNullsNotInfinity) {
  DecodeRoofline r;
  r.bytes_per_token = 1'000'000;
  r.bandwidth_before_gbs = r.bandwidth_after_gbs = 10;
  const BenchMetrics m;  // one-token outputs: no TPOT
  const nlohmann::json j = roofline_to_json(r, m);
  EXPECT_TRUE(j["decode_tok_s"].is_null());
  EXPECT_TRUE(j["fraction_of_roofline"].is_null());
  EXPECT_NE(format_roofline_table(r, m).find("n/a"), std::string::npos);
  EXPECT_EQ(DecodeRoofline{}.roofline_tok_s(), 0.0);  // no bytes: no roofline, not a division by 0
}

/// The CLI's stdout (`stderr`: its stderr instead) and exit code.
std::string run_stdout(const std::string& args, int* code, bool stderr = false) {
  const std::string cmd = std::string(LLMSERVE_BIN) + " " + args + (stderr ? " 2>&1 >/dev/null" : " 2>/dev/null");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(Roofline, BenchDividesByInspectsBytesPerToken) {
  const std::string model = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  int code = -1;
  const std::string out = run_stdout("bench " + model + " --max-model-len 256 --num-prompts 1 --input-len 8 "
                                     "--output-len 8 --roofline --json", &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.contains("decode_roofline")) << out;
  const nlohmann::json& r = j["decode_roofline"];
  const std::string info = run_stdout("inspect " + model + " --json", &code);
  ASSERT_EQ(code, 0) << info;
  const nlohmann::json ij = nlohmann::json::parse(info, nullptr, false);
  ASSERT_TRUE(ij.contains("decode_bytes_per_token")) << info;
  EXPECT_EQ(r["bytes_per_token"], ij["decode_bytes_per_token"]);
  EXPECT_GT(r["read_bandwidth_before_gbs"].get<double>(), 0);
  EXPECT_GT(r["read_bandwidth_after_gbs"].get<double>(), 0);
  EXPECT_GT(r["decode_tok_s"].get<double>(), 0);
  EXPECT_NEAR(r["fraction_of_roofline"].get<double>(),
              r["decode_tok_s"].get<double>() / r["roofline_tok_s"].get<double>(), 1e-9);
  // With --quantization the bytes are the planned types' (issue 14's F32 llama-q model; q8_0:
  // about 8.5 / 32 of its matrices' bytes).
  const std::string f32 = std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/quantized/llama-q/model-F32.gguf";
  const std::string q = run_stdout("bench " + f32 + " --max-model-len 256 --num-prompts 1 --input-len 8 "
                                   "--output-len 8 --roofline --json --quantization q8_0", &code);
  ASSERT_EQ(code, 0) << q;
  const std::string qi = run_stdout("inspect " + f32 + " --json --quantization q8_0", &code);
  ASSERT_EQ(code, 0) << qi;
  const std::string fi = run_stdout("inspect " + f32 + " --json", &code);
  ASSERT_EQ(code, 0) << fi;
  const int64_t q_bytes = nlohmann::json::parse(q)["decode_roofline"]["bytes_per_token"].get<int64_t>();
  EXPECT_EQ(q_bytes, nlohmann::json::parse(qi)["decode_bytes_per_token"].get<int64_t>());
  EXPECT_LT(q_bytes, nlohmann::json::parse(fi)["decode_bytes_per_token"].get<int64_t>() / 3);
  // --dtype bf16 converts the float matrices at load: half their bytes, in bench and inspect.
  const std::string b = run_stdout("bench " + f32 + " --max-model-len 256 --num-prompts 1 --input-len 8 "
                                   "--output-len 8 --roofline --json --dtype bf16", &code);
  ASSERT_EQ(code, 0) << b;
  const std::string bi = run_stdout("inspect " + f32 + " --json --dtype bf16", &code);
  ASSERT_EQ(code, 0) << bi;
  const int64_t b_bytes = nlohmann::json::parse(b)["decode_roofline"]["bytes_per_token"].get<int64_t>();
  const int64_t f_bytes = nlohmann::json::parse(fi)["decode_bytes_per_token"].get<int64_t>();
  EXPECT_EQ(b_bytes, nlohmann::json::parse(bi)["decode_bytes_per_token"].get<int64_t>());
  EXPECT_EQ(b_bytes, f_bytes / 2);  // every matrix f32 -> bf16, the embedding row too
}

TEST(Roofline, BenchRefusesWorkloadsThatAreNotOneStream) {
  const std::string model = std::string(LLMSERVE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  const std::pair<std::string, std::string> cases[] = {
      {"bench " + model + " --roofline", "use --num-prompts 1 (got 100)"},  // the default
      {"bench " + model + " --roofline --num-prompts 1 --dataset prefix_repetition",
       "needs the random dataset"},
      {"bench " + model + " --roofline --num-prompts 1 --multi-turn-conversations 2",
       "does not apply to --multi-turn-conversations"},
      {"bench --roofline serve --url http://127.0.0.1:9", "not bench serve"}};
  for (const auto& [args, message] : cases) {
    int code = -1;
    const std::string err = run_stdout(args, &code, /*stderr=*/true);
    EXPECT_EQ(code, 1) << args;
    EXPECT_NE(err.find("error: --"), std::string::npos) << args << ": " << err;
    EXPECT_NE(err.find(message), std::string::npos) << args << ": " << err;
  }
}

}  // namespace
}  // namespace llmserve::bench
