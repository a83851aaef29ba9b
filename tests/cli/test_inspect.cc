// `llmserve inspect` as a user runs it, against the synthetic models' shape.json: KV bytes per
// token (and the MHA-equivalent figures) computed by hand here, attention types, parameter
// counts, what a KV memory budget holds, and one-line errors for bad models and flags.
//
// Every synthetic model has 2 layers and f32 weights, so f32 KV elements are 4 bytes and
// "auto" is f32.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace llmserve {
namespace {

using testing::run_llmserve;
using nlohmann::json;

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string synthetic(const std::string& name) {
  return std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/" + name;
}

/// The checkpoints of one synthetic model: model.gguf, and hf/ where the folder has one.
std::vector<std::string> sources(const std::string& name) {
  std::vector<std::string> out = {synthetic(name) + "/model.gguf"};
  if (std::filesystem::exists(synthetic(name) + "/hf/config.json"))
    out.push_back(synthetic(name) + "/hf");
  return out;
}

/// Runs `inspect <args> --json` and parses stdout; a non-zero exit fails the test.
json inspect_json(const std::string& args) {
  auto r = run_llmserve("inspect " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  if (r.exit_code != 0) return json::object();
  return json::parse(r.out);
}

/// Exit code 1 and exactly one "error: ..." line on stderr naming `names`.
void expect_one_line_error(const testing::CommandResult& r, const std::string& names) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const size_t pos = r.err.rfind("error: ");
  ASSERT_NE(pos, std::string::npos) << r.err;
  EXPECT_TRUE(pos == 0 || r.err[pos - 1] == '\n') << r.err;
  const std::string line = r.err.substr(pos);
  EXPECT_NE(line.find(names), std::string::npos) << r.err;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out, "") << "nothing on stdout after an error";
}

/// Hand-computed KV cache figures of one synthetic model (from its shape.json), f32 KV.
struct KvCase {
  const char* model;
  const char* attention;
  int group_size;          // query heads per KV head; 0 = MLA (no group)
  int64_t per_layer;       // bytes per token per layer
  int64_t mha_per_layer;   // the MHA equivalent's
  double ratio_percent;    // per_layer / mha_per_layer
};

const KvCase kKvCases[] = {
    // n_heads 8, n_kv_heads 8, head_dim 16: K and V, 2 * 8 * 16 * 4 = 1024 (it is its own MHA).
    {"llama-mha", "MHA", 1, 1024, 1024, 100.0},
    // n_kv_heads 2: 2 * 2 * 16 * 4 = 256; MHA 2 * 8 * 16 * 4 = 1024; 256/1024 = 25%.
    {"llama-gqa", "GQA", 4, 256, 1024, 25.0},
    // n_kv_heads 1: 2 * 1 * 16 * 4 = 128; MHA 1024; 12.5%.
    {"llama-mqa", "MQA", 8, 128, 1024, 12.5},
    // n_heads 8, n_kv_heads 4, head_dim 16: 2 * 4 * 16 * 4 = 512; MHA 2 * 8 * 16 * 4 = 1024.
    {"qwen2-gqa-bias", "GQA", 2, 512, 1024, 50.0},
    // n_heads 4, n_kv_heads 2, head_dim 48: 2 * 2 * 48 * 4 = 768; MHA 2 * 4 * 48 * 4 = 1536.
    {"qwen3-qknorm", "GQA", 2, 768, 1536, 50.0},
    // MLA caches one latent row per token: (kv_lora 32 + qk_rope 8) * 4 = 160. Without the
    // latent each of the 4 heads would cache K (qk_nope 16 + qk_rope 8) and V (v_head 16):
    // 4 * (16 + 8 + 16) * 4 = 640; 160/640 = 25%.
    {"deepseek2-mla", "MLA", 0, 160, 640, 25.0},
};

TEST(Inspect, KvBytesPerTokenMatchHandComputed) {
  for (const KvCase& kc : kKvCases) {
    for (const std::string& src : sources(kc.model)) {
      SCOPED_TRACE(src);
      json j = inspect_json(quote(src) + " --kv-cache-dtype f32");
      if (j.empty()) continue;
      EXPECT_EQ(j["format"], src.ends_with("/hf") ? "hf" : "gguf");
      EXPECT_EQ(j["num_layers"], 2);
      EXPECT_EQ(j["attention"]["type"], kc.attention);
      if (kc.group_size > 0) EXPECT_EQ(j["attention"]["group_size"], kc.group_size);
      else EXPECT_FALSE(j["attention"].contains("group_size"));
      const json& kv = j["kv_cache"];
      EXPECT_EQ(kv["dtype"], "f32");
      EXPECT_EQ(kv["bytes_per_token_per_layer"], kc.per_layer);
      EXPECT_EQ(kv["bytes_per_token"], kc.per_layer * 2);  // 2 layers
      EXPECT_EQ(kv["mha_equivalent"]["bytes_per_token_per_layer"], kc.mha_per_layer);
      EXPECT_EQ(kv["mha_equivalent"]["bytes_per_token"], kc.mha_per_layer * 2);
      EXPECT_DOUBLE_EQ(kv["ratio_to_mha_percent"].get<double>(), kc.ratio_percent);
    }
  }
}

TEST(Inspect, ReportsShapeAndMlaDims) {
  json j = inspect_json(quote(synthetic("llama-gqa/model.gguf")));
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["hidden_size"], 128);
  EXPECT_EQ(j["num_heads"], 8);
  EXPECT_EQ(j["num_kv_heads"], 2);
  EXPECT_EQ(j["head_dim"], 16);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["max_position_embeddings"], 512);
  EXPECT_EQ(j["weight_dtype"], "f32");
  EXPECT_DOUBLE_EQ(j["rope"]["theta"].get<double>(), 10000.0);
  EXPECT_EQ(j["rope"]["scaling"]["type"], "none");
  EXPECT_FALSE(j.contains("mla"));

  j = inspect_json(quote(synthetic("deepseek2-mla/model.gguf")));
  EXPECT_EQ(j["architecture"], "deepseek2");
  ASSERT_TRUE(j.contains("mla"));
  EXPECT_EQ(j["mla"]["q_lora_rank"], 48);
  EXPECT_EQ(j["mla"]["kv_lora_rank"], 32);
  EXPECT_EQ(j["mla"]["qk_nope_head_dim"], 16);
  EXPECT_EQ(j["mla"]["qk_rope_head_dim"], 8);
  EXPECT_EQ(j["mla"]["v_head_dim"], 16);
  EXPECT_EQ(j["head_dim"], 24);  // qk_nope 16 + qk_rope 8
  EXPECT_EQ(j["rope"]["dim"], 8);
}

TEST(Inspect, ParameterCountMatchesHandSum) {
  // llama-gqa (vocab 512, dim 128, 2 layers, 8 heads / 2 KV heads of 16, ffn 352, untied):
  //   token_embd 512*128 = 65536, output 512*128 = 65536, output_norm 128;
  //   per layer: attn_norm 128 + q 128*128 = 16384 + k 32*128 = 4096 + v 4096 + o 16384
  //              + ffn_norm 128 + gate/up/down 3 * 352*128 = 135168  ->  176384;
  //   65536 + 65536 + 128 + 2 * 176384 = 483968.
  for (const std::string& src : sources("llama-gqa")) {
    SCOPED_TRACE(src);
    json j = inspect_json(quote(src));
    EXPECT_EQ(j["parameters"], 483968);
    EXPECT_EQ(j["parameters_human"], "0.48M");
    EXPECT_EQ(j["weight_bytes"], 483968 * 4);  // f32
  }
  // qwen2-gqa-bias (8 heads / 4 KV heads of 16, q/k/v biases, tied embeddings: no output):
  //   token_embd 65536, output_norm 128;
  //   per layer: 128 + q 16384 + q_bias 128 + k 64*128 = 8192 + k_bias 64 + v 8192 + v_bias 64
  //              + o 16384 + ffn_norm 128 + 135168  ->  184832;
  //   65536 + 128 + 2 * 184832 = 435328.
  for (const std::string& src : sources("qwen2-gqa-bias")) {
    SCOPED_TRACE(src);
    EXPECT_EQ(inspect_json(quote(src))["parameters"], 435328);
  }
  // deepseek2-mla (4 heads, q_lora 48, kv_lora 32, qk_nope 16, qk_rope 8, v_head 16):
  //   token_embd 65536, output 65536, output_norm 128;
  //   per layer: attn_norm 128 + q_a 128*48 = 6144 + q_a_norm 48 + q_b 48*4*(16+8) = 4608
  //              + kv_a 128*(32+8) = 5120 + kv_a_norm 32 + kv_b 32*4*(16+16) = 4096
  //              + o 4*16*128 = 8192 + ffn_norm 128 + 135168  ->  163664;
  //   65536 + 65536 + 128 + 2 * 163664 = 458528.
  EXPECT_EQ(inspect_json(quote(synthetic("deepseek2-mla/model.gguf")))["parameters"], 458528);
}

// qwen3moe-tiny (tests/models/data; dim 64, 2 layers, 4 heads / 2 KV heads of 16, q/k norms,
// 8 experts of width 32, 2 used, untied): expert matrices 2 layers * 8 * 3 * 32*64 = 98304
// parameters, a quarter (2 of 8) read per token: 24576. Decode bytes (f32): every matrix but
// the experts and the embedding (output 512*64 + per layer q 4096 + k 2048 + v 2048 + o 4096 +
// router 8*64 = 512 -> 12800, twice) = 32768 + 25600, plus the experts' share 24576, plus one
// embedding row of 64: 83008 parameters * 4 bytes.
TEST(Inspect, ExpertsTotalAndActive) {
  const std::string dir = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/qwen3moe-tiny/";
  for (const std::string src : {dir + "model.gguf", dir + "hf"}) {
    SCOPED_TRACE(src);
    json j = inspect_json(quote(src));
    EXPECT_EQ(j["experts"]["n_experts"], 8);
    EXPECT_EQ(j["experts"]["n_experts_used"], 2);
    EXPECT_EQ(j["experts"]["expert_ffn_dim"], 32);
    EXPECT_EQ(j["experts"]["expert_parameters"], 98304);
    EXPECT_EQ(j["experts"]["active_expert_parameters"], 24576);
    EXPECT_EQ(j["experts"]["active_expert_bytes"], 24576 * 4);
    EXPECT_EQ(j["decode_bytes_per_token"], 83008 * 4);
  }
  auto r = run_llmserve("inspect " + quote(dir + "model.gguf"));
  EXPECT_NE(r.out.find("8 per layer, 2 used per token, width 32"), std::string::npos) << r.out;
  // Its ffn_dim belongs to no layer (was printed bare, next to the experts' width).
  EXPECT_NE(r.out.find("(unused: every layer's MLP is experts, below)"), std::string::npos) << r.out;
  r = run_llmserve("inspect " + quote(std::string(LLMSERVE_SOURCE_DIR) +
                                      "/tests/models/data/deepseek3-tiny/model.gguf"));
  EXPECT_NE(r.out.find("(the 1 leading dense layer; experts below)"), std::string::npos) << r.out;
}

// deepseek3-tiny: 16 experts of width 32 in layers 1-2 (layer 0 dense), top-4, sigmoid scores,
// 4 groups with 2 kept, x 2.5, one ungated shared expert of 32. Expert matrices 2 layers * 16 *
// 3 * 32*64 = 196608 parameters, a quarter read per token.
TEST(Inspect, DeepseekRouting) {
  const std::string dir = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/deepseek3-tiny/";
  json j = inspect_json(quote(dir + "model.gguf"));
  EXPECT_EQ(j["experts"]["n_experts"], 16);
  EXPECT_EQ(j["experts"]["scoring"], "sigmoid");
  EXPECT_EQ(j["experts"]["n_expert_groups"], 4);
  EXPECT_EQ(j["experts"]["n_expert_groups_used"], 2);
  EXPECT_EQ(j["experts"]["n_dense_leading_layers"], 1);
  EXPECT_EQ(j["experts"]["shared_expert_gated"], false);
  EXPECT_EQ(j["experts"]["expert_parameters"], 196608);
  EXPECT_EQ(j["experts"]["active_expert_parameters"], 196608 / 4);
  auto r = run_llmserve("inspect " + quote(dir + "hf"));
  EXPECT_NE(r.out.find("sigmoid scores, experts from the best 2 of 4 groups (by their top-2 sum), weights x 2.5; "
                       "layers 0..0 dense"),
            std::string::npos)
      << r.out;
}

// mistral-swa-tiny: window 40 in both layers; f32 KV, 2 KV heads of 16, 2 layers: a block of
// 16 tokens is 16 * 2 * 2*2*16*4 = 8192 bytes; a sequence holds at most ceil(40 / 16) + 1 = 4.
TEST(Inspect, SlidingWindowBoundsTheKvOfASequence) {
  const std::string m = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/mistral-swa-tiny/model.gguf";
  json j = inspect_json(quote(m) + " --kv-cache-memory 1MiB");
  EXPECT_EQ(j["attention"]["sliding_window"]["window"], 40);
  EXPECT_EQ(j["attention"]["sliding_window"]["layers"], json::array({0, 1}));
  EXPECT_EQ(j["attention"]["sliding_window"]["kv_per_sequence"]["max_blocks"], 4);
  EXPECT_EQ(j["attention"]["sliding_window"]["kv_per_sequence"]["max_bytes"], 4 * 8192);
  EXPECT_EQ(j["attention"]["sliding_window"]["kv_per_sequence"]["sequences_held"], 128 / 4);
  EXPECT_EQ(j["kv_cache"]["bytes_per_block"], 8192);
  const std::string q = std::string(LLMSERVE_SOURCE_DIR) + "/tests/models/data/qwen2-swa-tiny/hf";
  auto r = run_llmserve("inspect " + quote(q));
  EXPECT_NE(r.out.find("16 tokens in layers 1, 2 (the other 1 full attention)"), std::string::npos) << r.out;
  // Mixed full and sliding layers: hybrid KV, window-sized sliding KV (ceil(16 / 16) + 1 = 2).
  EXPECT_NE(r.out.find("hybrid: the sliding layers keep at most 2 block(s)"), std::string::npos) << r.out;
}

TEST(Inspect, SequencesThatFitInBudget) {
  // llama-gqa, f32, 1 MiB, block 16: a block is 16 tokens * 2 layers * 256 = 8192 bytes;
  // 1048576 / 8192 = 128 blocks = 2048 tokens; a 512-token sequence takes 512/16 = 32 blocks,
  // so 128 / 32 = 4 fit. MHA equivalent: 16 * 2 * 1024 = 32768 bytes a block, 32 blocks,
  // 512 tokens, 1 sequence.
  json j = inspect_json(quote(synthetic("llama-gqa/model.gguf")) +
                        " --kv-cache-memory 1MiB --block-size 16 --max-model-len 512"
                        " --kv-cache-dtype f32");
  const json& kv = j["kv_cache"];
  EXPECT_EQ(kv["memory_bytes"], 1048576);
  EXPECT_EQ(kv["block_size"], 16);
  EXPECT_EQ(kv["max_model_len"], 512);
  EXPECT_EQ(kv["bytes_per_block"], 8192);
  EXPECT_EQ(kv["blocks"], 128);
  EXPECT_EQ(kv["tokens"], 2048);
  EXPECT_EQ(kv["sequences"], 4);
  EXPECT_EQ(kv["mha_equivalent"]["bytes_per_block"], 32768);
  EXPECT_EQ(kv["mha_equivalent"]["blocks"], 32);
  EXPECT_EQ(kv["mha_equivalent"]["tokens"], 512);
  EXPECT_EQ(kv["mha_equivalent"]["sequences"], 1);

  // A length that does not fill its last block: ceil(520 / 16) = 33 blocks, 128 / 33 = 3.
  j = inspect_json(quote(synthetic("llama-gqa/model.gguf")) +
                   " --kv-cache-memory 1048576 --max-model-len 520");
  EXPECT_EQ(j["kv_cache"]["sequences"], 3);

  // Defaults: the engine's 2 GiB budget and the model's 512-token context;
  // 2147483648 / 8192 = 262144 blocks, / 32 = 8192 sequences.
  j = inspect_json(quote(synthetic("llama-gqa/model.gguf")));
  EXPECT_EQ(j["kv_cache"]["memory_bytes"], 2147483648LL);
  EXPECT_EQ(j["kv_cache"]["max_model_len"], 512);
  EXPECT_EQ(j["kv_cache"]["blocks"], 262144);
  EXPECT_EQ(j["kv_cache"]["sequences"], 8192);

  // deepseek2-mla, f32, 1 MiB, block 16: 16 * 2 * 160 = 5120 bytes a block,
  // floor(1048576 / 5120) = 204 blocks = 3264 tokens, 204 / 32 = 6 sequences of 512.
  // MHA equivalent: 16 * 2 * 640 = 20480 a block, 51 blocks, 816 tokens, 1 sequence.
  j = inspect_json(quote(synthetic("deepseek2-mla/model.gguf")) +
                   " --kv-cache-memory 1MiB --block-size 16 --max-model-len 512");
  EXPECT_EQ(j["kv_cache"]["blocks"], 204);
  EXPECT_EQ(j["kv_cache"]["tokens"], 3264);
  EXPECT_EQ(j["kv_cache"]["sequences"], 6);
  EXPECT_EQ(j["kv_cache"]["mha_equivalent"]["blocks"], 51);
  EXPECT_EQ(j["kv_cache"]["mha_equivalent"]["tokens"], 816);
  EXPECT_EQ(j["kv_cache"]["mha_equivalent"]["sequences"], 1);
}

TEST(Inspect, Bf16HalvesKvBytesAndAutoIsWeightDtype) {
  for (const KvCase& kc : kKvCases) {
    const std::string m = quote(synthetic(std::string(kc.model) + "/model.gguf")) +
                          " --kv-cache-memory 1MiB";
    SCOPED_TRACE(kc.model);
    json f32 = inspect_json(m + " --kv-cache-dtype f32");
    json bf16 = inspect_json(m + " --kv-cache-dtype bf16");
    json f16 = inspect_json(m + " --kv-cache-dtype f16");
    json autod = inspect_json(m);
    if (f32.empty() || bf16.empty()) continue;
    EXPECT_EQ(bf16["kv_cache"]["dtype"], "bf16");
    EXPECT_EQ(bf16["kv_cache"]["bytes_per_token_per_layer"], kc.per_layer / 2);
    EXPECT_EQ(bf16["kv_cache"]["bytes_per_token"], kc.per_layer);  // 2 layers * half
    EXPECT_EQ(bf16["kv_cache"]["mha_equivalent"]["bytes_per_token_per_layer"],
              kc.mha_per_layer / 2);
    EXPECT_EQ(f16["kv_cache"]["bytes_per_token_per_layer"], kc.per_layer / 2);
    EXPECT_GE(bf16["kv_cache"]["tokens"].get<int64_t>(),
              2 * f32["kv_cache"]["tokens"].get<int64_t>());
    EXPECT_EQ(autod["kv_cache"]["dtype"], "f32");  // the weights are f32
    EXPECT_EQ(autod["kv_cache"], f32["kv_cache"]);
  }
  // llama-gqa: 1 MiB / (16 * 2 * 128) = 256 blocks in bf16, twice f32's 128.
  EXPECT_EQ(inspect_json(quote(synthetic("llama-gqa/model.gguf")) +
                         " --kv-cache-memory 1MiB --kv-cache-dtype bf16")["kv_cache"]["blocks"],
            256);
}

TEST(Inspect, MqaFitsEightTimesTheTokensOfMha) {
  // Same 1 MiB, f32: MHA 32768 bytes a block -> 32 blocks, 512 tokens;
  // MQA 16 * 2 * 128 = 4096 -> 256 blocks, 4096 tokens = 8 * 512.
  const std::string opts = " --kv-cache-memory 1MiB --kv-cache-dtype f32";
  json mha = inspect_json(quote(synthetic("llama-mha/model.gguf")) + opts);
  json mqa = inspect_json(quote(synthetic("llama-mqa/model.gguf")) + opts);
  EXPECT_EQ(mha["kv_cache"]["tokens"], 512);
  EXPECT_EQ(mqa["kv_cache"]["tokens"], 4096);
  EXPECT_EQ(mqa["kv_cache"]["tokens"].get<int64_t>(),
            8 * mha["kv_cache"]["tokens"].get<int64_t>());
  EXPECT_EQ(mqa["kv_cache"]["tokens"].get<int64_t>(),
            8 * mqa["kv_cache"]["mha_equivalent"]["tokens"].get<int64_t>());
  EXPECT_EQ(mha["kv_cache"]["tokens"], mha["kv_cache"]["mha_equivalent"]["tokens"]);
}

TEST(Inspect, TextReportAndModelFlag) {
  const std::string m = synthetic("llama-gqa/model.gguf");
  auto r = run_llmserve("inspect " + quote(m) + " --kv-cache-memory 1MiB --kv-cache-dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"format", "gguf", "GQA (group size 4", "483968 (0.48M)", "MHA equivalent",
                        "bytes per token per layer", "25%", "100%", "sequences of 512 tokens"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  // --model is the same as the positional MODEL.
  EXPECT_EQ(inspect_json("--model " + quote(m)), inspect_json(quote(m)));
  // A llama2.c checkpoint.
  json j = inspect_json(quote(std::string(LLMSERVE_SHARED_DIR) +
                              "/models/stories260K/stories260K.bin"));
  EXPECT_EQ(j["format"], "llama2c");
  EXPECT_GT(j["parameters"].get<int64_t>(), 0);
}

// A llama-quantize mix (../shared/testdata/models/quantized/llama-q, manifest.json lists every
// tensor's type): per-type counts and bytes, bits per weight and the decode bytes per token,
// computed here from the model's dimensions and ggml-common.h's block sizes.
TEST(Inspect, QuantizedTypesBitsPerWeightAndDecodeBytes) {
  const std::string dir = std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/quantized/llama-q/";
  std::ifstream in(dir + "manifest.json");
  const json manifest = json::parse(in);
  // (elements, bytes) per block.
  const std::map<std::string, std::pair<int64_t, int64_t>> block = {
      {"F32", {1, 4}}, {"Q8_0", {32, 34}}, {"Q4_0", {32, 18}}, {"Q4_K", {256, 144}},
      {"Q5_K", {256, 176}}, {"Q6_K", {256, 210}}, {"IQ4_NL", {32, 18}}};
  // dim 256, ffn 768, vocab 512, 8 heads / 2 KV heads of 32: [rows, cols] of each matrix.
  auto shape = [](const std::string& name) -> std::pair<int64_t, int64_t> {
    if (name == "token_embd.weight" || name == "output.weight") return {512, 256};
    if (name.ends_with("attn_q.weight") || name.ends_with("attn_output.weight")) return {256, 256};
    if (name.ends_with("attn_k.weight") || name.ends_with("attn_v.weight")) return {64, 256};
    if (name.ends_with("ffn_down.weight")) return {256, 768};
    return {768, 256};  // ffn_gate, ffn_up
  };
  for (const char* file : {"model-Q4_K_M.gguf", "model-IQ4_NL.gguf", "model-Q8_0.gguf"}) {
    SCOPED_TRACE(file);
    std::map<std::string, std::pair<int64_t, int64_t>> types;  // type -> (tensors, bytes)
    int64_t matrix_params = 0, matrix_bytes = 0, decode = 0;
    for (const auto& [name, type] : manifest["files"][file]["per_tensor"].items()) {
      const auto [rows, cols] = shape(name);
      const auto [elems, bytes] = block.at(type.get<std::string>());
      const int64_t row_bytes = cols / elems * bytes, b = rows * row_bytes;
      types[type.get<std::string>()].first += 1;
      types[type.get<std::string>()].second += b;
      matrix_params += rows * cols;
      matrix_bytes += b;
      decode += name == "token_embd.weight" ? row_bytes : b;  // untied: one embedding row
    }
    types["F32"].first += 5;  // output_norm + 2 x (attn_norm, ffn_norm), [256] each
    types["F32"].second += 5 * 256 * 4;
    json j = inspect_json(quote(dir + file));
    EXPECT_EQ(j["kv_cache"]["dtype"], "f16");  // auto = f16 for quantized weights
    // ... unless --dtype names the float dtype (auto follows it, as vLLM's does).
    EXPECT_EQ(inspect_json(quote(dir + file) + " --dtype float32")["kv_cache"]["dtype"], "f32");
    EXPECT_EQ(j["weight_dtype"], manifest["files"][file]["per_tensor"]["token_embd.weight"]);
    ASSERT_EQ(j["tensor_types"].size(), types.size());
    for (const json& t : j["tensor_types"]) {
      const auto& want = types.at(t["type"].get<std::string>());
      EXPECT_EQ(t["tensors"], want.first) << t;
      EXPECT_EQ(t["bytes"], want.second) << t;
    }
    EXPECT_NEAR(j["weight_matrix_bits_per_weight"].get<double>(),
                8.0 * double(matrix_bytes) / double(matrix_params), 1e-12);
    EXPECT_EQ(j["decode_bytes_per_token"], decode);
  }
  // Q4_K_M by hand: 1084032 bytes of matrices over 1769472 weights = 4.90 bits per weight;
  // decode reads all but token_embd (73728 bytes) plus one 144-byte Q4_K row.
  json j = inspect_json(quote(dir + "model-Q4_K_M.gguf"));
  EXPECT_EQ(j["decode_bytes_per_token"], 1084032 - 73728 + 144);
  auto r = run_llmserve("inspect " + quote(dir + "model-Q4_K_M.gguf"));
  EXPECT_NE(r.out.find("Q6_K tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4.90 (weight matrices)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode bytes per token   1010448"), std::string::npos) << r.out;
  // Float models: one type, 32 bits per weight, and the embedding row in f32.
  json f = inspect_json(quote(synthetic("llama-gqa/model.gguf")));
  ASSERT_EQ(f["tensor_types"].size(), 1u);
  EXPECT_EQ(f["tensor_types"][0]["type"], "F32");
  EXPECT_EQ(f["weight_matrix_bits_per_weight"], 32.0);
}

TEST(Inspect, QuantizationFlagReportsWhatLlamaQuantizeWrote) {
  // inspect --quantization on the F32 file = inspect of the file llama-quantize made from it
  // (types, bytes, bits per weight, decode bytes, KV auto), and nothing is converted.
  const std::string dir = std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/quantized/llama-q/";
  for (const auto& [value, file] : {std::pair{"q4_k_m", "model-Q4_K_M.gguf"},
                                    std::pair{"q5_k_m", "model-Q5_K_M.gguf"},
                                    std::pair{"q8_0", "model-Q8_0.gguf"}}) {
    SCOPED_TRACE(value);
    json want = inspect_json(quote(dir + file));
    json got = inspect_json(quote(dir + "model-F32.gguf") + " --quantization " + value);
    for (const char* key : {"tensor_types", "weight_bytes", "weight_matrix_bits_per_weight",
                            "decode_bytes_per_token", "weight_dtype", "parameters"})
      EXPECT_EQ(got[key], want[key]) << key;
    EXPECT_EQ(got["kv_cache"]["dtype"], "f16");  // quantized at load: as a quantized file
    EXPECT_EQ(got["quantization"]["value"], value);
    EXPECT_EQ(got["quantization"]["already_quantized"], false);
    // A file already quantized as asked: as stored.
    json same = inspect_json(quote(dir + file) + " --quantization " + value);
    EXPECT_EQ(same["quantization"]["already_quantized"], true);
    EXPECT_EQ(same["tensor_types"], want["tensor_types"]);
  }
  auto r = run_llmserve("inspect " + quote(dir + "model-F32.gguf") + " --quantization q4_k_m");
  EXPECT_NE(r.out.find("q4_k_m at load: 16 weight matrices -> Q4_K x "), std::string::npos) << r.out;
  expect_one_line_error(run_llmserve("inspect " + quote(dir + "model-Q8_0.gguf") +
                                     " --quantization q4_k_m"),
                        "is already quantized");
  expect_one_line_error(run_llmserve("inspect " + quote(dir + "model-F32.gguf") +
                                     " --quantization q3_k"),
                        "--quantization");
}

TEST(Inspect, BadModelsAndFlagsGiveOneLineErrors) {
  expect_one_line_error(run_llmserve("inspect /nonexistent/model.gguf"),
                        "/nonexistent/model.gguf");
  const std::string empty_dir = testing::temp_dir() + "/inspect_no_config";
  std::filesystem::create_directories(empty_dir);
  expect_one_line_error(run_llmserve("inspect " + quote(empty_dir)), empty_dir);
  const std::string truncated = testing::temp_dir() + "/inspect_truncated.gguf";
  std::ofstream(truncated, std::ios::binary) << "GGUF\x03\x00\x00\x00";
  expect_one_line_error(run_llmserve("inspect " + quote(truncated)), truncated);

  const std::string m = quote(synthetic("llama-gqa/model.gguf"));
  expect_one_line_error(run_llmserve("inspect " + m + " --kv-cache-memory 0"),
                        "--kv-cache-memory");
  expect_one_line_error(run_llmserve("inspect " + m + " --kv-cache-memory lots"),
                        "--kv-cache-memory");
  expect_one_line_error(run_llmserve("inspect " + m + " --kv-cache-memory 1.2.3"),
                        "--kv-cache-memory");
  expect_one_line_error(run_llmserve("inspect " + m + " --block-size 0"), "--block-size");
  expect_one_line_error(run_llmserve("inspect " + m + " --max-model-len 0"), "--max-model-len");
  expect_one_line_error(run_llmserve("inspect " + m + " --kv-cache-dtype f8"),
                        "--kv-cache-dtype");
  expect_one_line_error(run_llmserve("inspect"), "MODEL");
  EXPECT_EQ(run_llmserve("inspect " + m + " --block-size abc").exit_code, 1);
}

}  // namespace
}  // namespace llmserve
