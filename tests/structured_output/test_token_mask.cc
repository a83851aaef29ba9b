// TokenMasker: the cached mask (fill) and the plain trie walk (fill_uncached) against the slow
// twin (every token checked on its own with Matcher::advance), along random constrained walks.
#include <gtest/gtest.h>

#include <random>

#include "structured_output/json_schema.h"
#include "structured_output/token_mask.h"

namespace llmserve::structured_output {
namespace {

std::shared_ptr<const TokenVocab> small_vocab() {
  std::vector<std::string> t = {""};  // id 0: a special token (no bytes)
  const std::string chars = "{}[]\":, \n\tabcnrtuelsfy0123456789.-+eE\\/@TZ";
  for (char c : chars) t.push_back(std::string(1, c));
  for (char a : std::string("\"{a1 ,:")) {
    for (char b : std::string("\"}a1 ,:e")) t.push_back(std::string{a, b});
  }
  for (const char* w : {"\"name\"", "\": \"", "\", \"", "{\"", "\"}", "name", "age", "true", "false", "null", "12",
                        "3.5", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F", "\x98\x80", "\": ", ", \"",
                        "\\n", "\\u00", "e\"", "1\",", "\"}]", "abc", "2024-", "01-", "T12:", "00Z\"", "http", "://",
                        ".co", "1,", "0}", "true,", "null}", "5e", "-1", "a.b"}) {
    t.push_back(w);
  }
  return std::make_shared<TokenVocab>(std::move(t));
}

void random_walks(const nlohmann::ordered_json& schema, int walks, int steps, uint32_t seed) {
  auto g = compile_json_schema(schema);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto c = CompiledGrammar::compile(std::move(*g));
  ASSERT_TRUE(c.ok());
  auto vocab = small_vocab();
  TokenMasker masker(vocab);
  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    Matcher m(*c);
    for (int s = 0; s < steps; ++s) {
      TokenBitmask fast, plain, slow;
      masker.fill(m, fast);
      masker.fill_uncached(m, plain);
      TokenMasker::fill_reference(m, *vocab, slow);
      ASSERT_EQ(fast, slow) << "walk " << w << " step " << s;
      ASSERT_EQ(plain, slow) << "walk " << w << " step " << s;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
        if (mask_test(slow, id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;  // finished, or a byte this small vocabulary lacks
      ASSERT_TRUE(m.advance(vocab->bytes(allowed[rng() % allowed.size()])));
    }
  }
}

TEST(TokenMasker, MatchesReferenceOnObjectSchema) {
  random_walks(nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":-5,"maximum":120},
      "tags":{"type":"array","items":{"enum":["a","b c",1.5,null]},"maxItems":3},
      "when":{"type":"string","format":"date-time"}},"required":["name"]})"),
               40, 60, 1);
}

TEST(TokenMasker, MatchesReferenceOnAnyJson) {
  random_walks(nlohmann::ordered_json::parse(R"({"anyOf":[{"type":"object"},{"type":"array"},{"type":"number"}]})"), 40, 60, 2);
}

TEST(TokenMasker, MatchesReferenceOnRecursiveSchema) {
  random_walks(nlohmann::ordered_json::parse(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":false}},
      "$ref":"#/$defs/node"})"),
               40, 80, 3);
}

// Value positions, where a token may end a number or literal inside the cached frames and go on
// into the frames below ("1,", "true,", "null}"), and a URL pattern (several places in the
// pattern at once).
TEST(TokenMasker, MatchesReferenceAtValuePositionsAndPatterns) {
  random_walks(nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "u":{"type":"string","pattern":"^(https?://)?[\\da-z.-]+\\.[a-z.]{2,6}$"},"n":{"type":"number"},
      "b":{"type":["boolean","null"]},"xs":{"type":"array","items":{"type":"integer"}}}})"),
               60, 60, 4);
}

TEST(TokenVocab, TrieHoldsEveryTokenOnce) {
  auto v = small_vocab();
  std::vector<int> seen(v->vocab_size(), 0);
  for (int32_t id : v->token_ids()) seen[id]++;
  for (int32_t id = 0; id < v->vocab_size(); ++id) EXPECT_EQ(seen[id], v->bytes(id).empty() ? 0 : 1) << id;
}

}  // namespace
}  // namespace llmserve::structured_output
