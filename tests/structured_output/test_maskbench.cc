// MaskBench (JSONSchemaBench, arXiv 2501.10868; ../shared/testdata/structured_output/maskbench):
// real-world schemas with valid and invalid instances, each instance serialized as MaskBench does
// (json.dumps, separators ", " and ": ", ensure_ascii=False), tokenized with the hf-llama3
// tokenizer, fed token by token. Zero invalid instances may be accepted; valid ones rejected are
// bounded and each listed with its reason in docs/structured_outputs.md. Every schema compiles or
// is refused with a message naming the keyword.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "structured_output/instance_check.h"
#include "structured_output/json_grammar_parts.h"
#include "structured_output/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::structured_output {
namespace {

using ojson = nlohmann::ordered_json;
const std::string kDir = std::string(LLMSERVE_SHARED_DIR) + "/testdata/structured_output/maskbench/data";

// Python's json.dumps(v, ensure_ascii=False) with its default separators.
std::string dumps(const ojson& v) {
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) s += ", ";
      first = false;
      s += json_string_literal(it.key()) + ": " + dumps(it.value());
    }
    return s + "}";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + dumps(v[i]);
    return s + "]";
  }
  if (v.is_string()) return json_string_literal(v.get<std::string>());
  if (v.is_number_float()) {
    // repr(float): shortest round-trip digits; nlohmann prints the same digits.
    std::string s = v.dump();
    if (s.find_first_of(".eE") == std::string::npos && s != "inf" && s != "nan") s += ".0";
    return s;
  }
  return v.dump();
}

struct Stats {
  int schemas = 0, compiled = 0, refused = 0;
  int valid = 0, valid_accepted = 0, invalid = 0, invalid_accepted = 0;
  int mask_mismatches = 0;
  std::map<std::string, int> refused_by;
  std::vector<std::string> valid_rejected, invalid_accepted_list;
  std::vector<double> mask_us, cold_mask_us, compile_us;
  /// Warm masks: (microseconds, "file @ ...text before the position"), for the slowest list.
  std::vector<std::pair<double, std::string>> warm_where;
};

TEST(MaskBench, NoInvalidAcceptedFewValidRejected) {
  auto tok = load_tokenizer_from_path(std::string(LLMSERVE_SHARED_DIR) + "/testdata/tokenizer/hf-llama3");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto vocab = TokenVocab::from_tokenizer(**tok);
  TokenMasker masker(vocab);
  const bool verbose = std::getenv("LLMSERVE_MASKBENCH_VERBOSE") != nullptr;
  const int mask_every = std::getenv("LLMSERVE_MASKBENCH_MASK_EVERY") ? std::atoi(std::getenv("LLMSERVE_MASKBENCH_MASK_EVERY")) : 50;
  std::vector<std::filesystem::path> files;
  for (auto& e : std::filesystem::directory_iterator(kDir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 1000u);
  Stats st;
  int instance_no = 0;
  std::regex keyword_re("keyword '([^']+)'");
  for (const auto& path : files) {
    std::ifstream in(path);
    ojson doc = ojson::parse(in);
    ++st.schemas;
    auto t0 = std::chrono::steady_clock::now();
    auto grammar = compile_json_schema(doc["schema"]);
    std::shared_ptr<const CompiledGrammar> compiled;
    if (grammar.ok()) {
      auto c = CompiledGrammar::compile(std::move(*grammar));
      ASSERT_TRUE(c.ok()) << path << ": " << c.status().message();
      compiled = *c;
    }
    st.compile_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (verbose && st.compile_us.back() > 5000) std::printf("SLOW COMPILE %.0f us: %s\n", st.compile_us.back(), path.filename().c_str());
    if (!compiled) {
      ++st.refused;
      const std::string& msg = grammar.status().message();
      std::smatch m;
      std::string key = std::regex_search(msg, m, keyword_re) ? m[1].str() : msg.substr(0, 40);
      st.refused_by[key]++;
      if (verbose) std::printf("REFUSED %s: %s\n", path.filename().c_str(), msg.c_str());
      continue;
    }
    ++st.compiled;
    for (const ojson& test : doc["tests"]) {
      const bool valid = test["valid"].get<bool>();
      const std::string text = dumps(test["data"]);
      const std::vector<int32_t> ids = (*tok)->encode(text, EncodeOptions{});
      TokenMasker* mk = (instance_no++ % mask_every == 0) ? &masker : nullptr;
      InstanceCheck r = check_instance(compiled, *vocab, ids, mk);
      st.cold_mask_us.insert(st.cold_mask_us.end(), r.mask_us.begin(), r.mask_us.end());
      if (mk) {  // again with this grammar's mask cache warm: the steady state of a served schema
        InstanceCheck warm = check_instance(compiled, *vocab, ids, mk);
        st.mask_us.insert(st.mask_us.end(), warm.mask_us.begin(), warm.mask_us.end());
        if (verbose) {
          std::string prefix;
          for (size_t i = 0; i < warm.mask_us.size(); ++i) {
            std::string at = prefix.size() > 40 ? prefix.substr(prefix.size() - 40) : prefix;
            st.warm_where.emplace_back(warm.mask_us[i], path.filename().string() + " @ ..." + at);
            if (i < ids.size()) prefix += vocab->bytes(ids[i]);
          }
        }
      }
      st.mask_mismatches += r.mask_mismatch;
      if (valid) {
        ++st.valid;
        st.valid_accepted += r.accepted;
        if (!r.accepted) {
          std::string at;
          if (r.rejected_at >= 0) {
            std::string prefix;
            for (int64_t i = 0; i < r.rejected_at && i < static_cast<int64_t>(ids.size()); ++i) prefix += vocab->bytes(ids[i]);
            at = prefix.size() > 60 ? prefix.substr(prefix.size() - 60) : prefix;
          }
          st.valid_rejected.push_back(path.filename().string() + " @ ..." + at);
        }
      } else {
        ++st.invalid;
        st.invalid_accepted += r.accepted;
        if (r.accepted) st.invalid_accepted_list.push_back(path.filename().string() + ": " + text.substr(0, 200));
      }
    }
  }
  auto pct = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  };
  std::printf("schemas %d: compiled %d (%.1f%%), refused %d\n", st.schemas, st.compiled, 100.0 * st.compiled / st.schemas, st.refused);
  for (auto& [k, n] : st.refused_by) std::printf("  refused by %-28s %d\n", k.c_str(), n);
  std::printf("valid %d: accepted %d, rejected %zu (%.2f%%)\n", st.valid, st.valid_accepted, st.valid_rejected.size(),
              st.valid ? 100.0 * st.valid_rejected.size() / st.valid : 0.0);
  std::printf("invalid %d: accepted %d\n", st.invalid, st.invalid_accepted);
  std::printf("mask (cache warm): %zu masks, p50 %.1f us, p99 %.1f us, max %.1f us\n", st.mask_us.size(),
              pct(st.mask_us, 0.5), pct(st.mask_us, 0.99), pct(st.mask_us, 1.0));
  std::printf("mask (first use of the schema): p50 %.1f us, p99 %.1f us; compile p50 %.1f us, p99 %.1f us\n",
              pct(st.cold_mask_us, 0.5), pct(st.cold_mask_us, 0.99), pct(st.compile_us, 0.5), pct(st.compile_us, 0.99));
  if (verbose) {
    std::sort(st.warm_where.begin(), st.warm_where.end(), std::greater<>());
    for (size_t i = 0; i < std::min<size_t>(40, st.warm_where.size()); ++i)
      std::printf("SLOW WARM MASK %.0f us: %s\n", st.warm_where[i].first, st.warm_where[i].second.c_str());
    for (auto& s : st.valid_rejected) std::printf("VALID REJECTED %s\n", s.c_str());
  }
  for (auto& s : st.invalid_accepted_list) std::printf("INVALID ACCEPTED %s\n", s.c_str());
  EXPECT_EQ(st.invalid_accepted, 0);
  EXPECT_EQ(st.mask_mismatches, 0);
  // Issue 16 asks for <= 0.2 %; today 3 of 1926 (0.16 %), each a key order in an object of
  // more than kMaxAnyOrderProperties properties (docs/structured_outputs.md).
  EXPECT_LE(st.valid_rejected.size(), static_cast<size_t>(st.valid * 0.002));
  EXPECT_GE(st.compiled, st.schemas * 84 / 100);
}

}  // namespace
}  // namespace llmserve::structured_output
