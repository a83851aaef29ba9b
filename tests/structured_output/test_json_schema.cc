// JSON Schema compiler: refusals name the keyword and path; integer ranges and dates checked
// against direct computation; patterns lowered onto JSON string text; the grammar-check CLI.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "structured_output/constraint.h"
#include "structured_output/json_schema.h"
#include "structured_output/matcher.h"

namespace llmserve::structured_output {
namespace {

std::shared_ptr<const CompiledGrammar> schema(const char* text) {
  ConstraintSpec spec;
  spec.text = text;
  auto c = compile_constraint(spec);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : nullptr;
}

TEST(JsonSchema, RefusalsNameKeywordAndPath) {
  for (auto [text, needle] : std::vector<std::pair<const char*, const char*>>{
           {R"({"not":{"type":"string"}})", "keyword 'not' at '/'"},
           {R"({"properties":{"a":{"type":"array","uniqueItems":true}}})", "keyword 'uniqueItems' at '/properties/a'"},
           {R"({"type":"string","format":"uri"})", "format 'uri' has no grammar"},
           {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})", "keyword 'oneOf'"},
           {R"({"$ref":"http://example.com/s.json"})", "keyword '$ref'"},
           {R"({"type":"number","minimum":0.5})", "keyword 'minimum'"},
           {R"({"type":"strin"})", "'strin' at '/' is not a JSON type"},
           {R"({"type":"object"} trailing)", "not valid JSON"}}) {
    ConstraintSpec spec;
    spec.text = text;
    auto c = compile_constraint(spec);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  }
}

TEST(JsonSchema, IntegerRangesAgainstArithmetic) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{-120, 37}, {5, 5}, {-9, -3}, {0, 1000}, {17, 203}}) {
    std::string text = "{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) + ",\"maximum\":" + std::to_string(hi) + "}";
    auto g = schema(text.c_str());
    for (int v = -1100; v <= 1100; ++v) {
      ASSERT_EQ(grammar_accepts(g, std::to_string(v)), v >= lo && v <= hi) << text << " v=" << v;
    }
    EXPECT_FALSE(grammar_accepts(g, "007"));
    EXPECT_FALSE(grammar_accepts(g, "-0"));
  }
}

TEST(JsonSchema, BoundedNumbersAgainstArithmetic) {
  auto g = schema(R"({"type":"number","exclusiveMinimum":-2,"maximum":3})");
  for (int i = -400; i <= 400; ++i) {
    for (const char* frac : {"", ".0", ".5", ".25", ".05"}) {
      int whole = std::abs(i) / 100;
      std::string text = (i < 0 ? "-" : "") + std::to_string(whole) + frac;
      double v = std::stod(text);
      bool want = v > -2 && v <= 3 && !(text[0] == '-' && v == 0);  // "-0..." is never produced
      ASSERT_EQ(grammar_accepts(g, text), want) << text;
    }
  }
}

TEST(JsonSchema, DatesKnowMonthLengthsAndLeapYears) {
  auto g = schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(grammar_accepts(g, "\"2024-02-29\""));
  EXPECT_TRUE(grammar_accepts(g, "\"2000-02-29\""));
  EXPECT_FALSE(grammar_accepts(g, "\"1900-02-29\""));
  EXPECT_FALSE(grammar_accepts(g, "\"2023-02-29\""));
  EXPECT_FALSE(grammar_accepts(g, "\"2023-04-31\""));
  EXPECT_TRUE(grammar_accepts(g, "\"2023-12-31\""));
  EXPECT_FALSE(grammar_accepts(g, "\"0000-01-01\""));
}

TEST(JsonSchema, PatternConstrainsTheDecodedString) {
  // ".+" must not run past the closing quote; a quote inside is written \" in JSON.
  auto g = schema(R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x.+$"},"b":{"type":"integer"}},"additionalProperties":false})");
  EXPECT_TRUE(grammar_accepts(g, R"({"a": "xy", "b": 1})"));
  EXPECT_TRUE(grammar_accepts(g, R"({"a": "x\"q"})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a": "x", "b": 1})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a": "xy", "b": 1, "c": 2})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a": "xy", "b": "1"})"));
}

TEST(JsonSchema, AllOfKeepsEachPartsAdditionalProperties) {
  auto g = schema(R"({"allOf":[{"properties":{"a":{"type":"integer"}},"additionalProperties":false},
                               {"properties":{"b":{"type":"integer"}}}]})");
  EXPECT_TRUE(grammar_accepts(g, R"({"a": 1})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a": 1, "b": 2})"));  // b is additional for the first part
}

TEST(JsonSchema, WhitespaceIsBounded) {
  auto g = schema(R"({"type":"object"})");
  EXPECT_TRUE(grammar_accepts(g, "{\n    \"k\": [1, 2]\n}"));
  EXPECT_FALSE(grammar_accepts(g, "{" + std::string(40, ' ') + "}"));
}

// Objects accept their declared keys in any order, each at most once, the required ones
// present (additional keys anywhere): checked against direct computation over every key sequence of up to 5 keys.
TEST(JsonSchema, AnyOrderKeysAgainstEnumeration) {
  for (bool open : {false, true}) {
    std::string text = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},)"
                       R"("c":{"type":"integer"},"d":{"type":"integer"}},"required":["b","d"],)"
                       R"("additionalProperties":)" + std::string(open ? "true" : "false") + "}";
    auto g = schema(text.c_str());
    ASSERT_TRUE(g);
    const std::string keys = open ? "abcdz" : "abcd";  // z: an additional property
    std::vector<std::string> seqs = {""};
    for (size_t len = 1; len <= 5; ++len) {
      std::vector<std::string> next;
      for (const std::string& q : seqs) {
        if (q.size() + 1 != len) continue;
        for (char k : keys) next.push_back(q + k);
      }
      seqs.insert(seqs.end(), next.begin(), next.end());
    }
    for (const std::string& q : seqs) {
      std::string instance = "{";
      for (size_t i = 0; i < q.size(); ++i) instance += (i ? ", \"" : "\"") + std::string(1, q[i]) + "\": 1";
      instance += "}";
      // Declared keys at most once; the additional key z may repeat (JSON allows duplicate
      // names and additionalProperties constrains values, not counts).
      std::string declared;
      for (char k : q) if (k != 'z') declared += k;
      bool distinct = std::set<char>(declared.begin(), declared.end()).size() == declared.size();
      bool required = q.find('b') != std::string::npos && q.find('d') != std::string::npos;
      ASSERT_EQ(grammar_accepts(g, instance), distinct && required) << text << "  " << instance;
    }
  }
}

// Above kMaxAnyOrderProperties declared properties, objects follow `properties` order or the
// `required` order (required ones first, as listed, then the others in `properties` order).
TEST(JsonSchema, LargeObjectsFollowPropertiesOrRequiredOrder) {
  const size_t n = kMaxAnyOrderProperties + 1;
  auto key = [](size_t i) { return "\"k" + std::to_string(i) + "\""; };
  std::string props, required;
  for (size_t i = 0; i < n; ++i) props += (i ? "," : "") + key(i) + R"(:{"type":"integer"})";
  for (size_t i = n; i-- > 1;) required += (i + 1 < n ? "," : "") + key(i);  // k8..k1
  auto object = [&](const std::vector<size_t>& order) {
    std::string out = "{";
    for (size_t j = 0; j < order.size(); ++j) out += (j ? "," : "") + key(order[j]) + ":1";
    return out + "}";
  };
  auto g = schema((R"({"type":"object","additionalProperties":false,"properties":{)" + props +
                   R"(},"required":[)" + required + "]}")
                      .c_str());
  ASSERT_TRUE(g);
  std::vector<size_t> in_order, by_required, shuffled;
  for (size_t i = 0; i < n; ++i) in_order.push_back(i);
  for (size_t i = n; i-- > 1;) by_required.push_back(i);
  by_required.push_back(0);
  EXPECT_TRUE(grammar_accepts(g, object(in_order)));
  EXPECT_TRUE(grammar_accepts(g, object(by_required)));
  std::vector<size_t> without_optional(by_required.begin(), by_required.end() - 1);
  EXPECT_TRUE(grammar_accepts(g, object(without_optional)));
  shuffled = in_order;
  std::swap(shuffled[1], shuffled[2]);  // neither order
  EXPECT_FALSE(grammar_accepts(g, object(shuffled)));
  std::vector<size_t> missing(in_order.begin(), in_order.end() - 1);  // k8 (required) absent
  EXPECT_FALSE(grammar_accepts(g, object(missing)));
}

// Draft 4-7 ignore the siblings of a $ref (draft-07 core 8.3); 2019-09 on applies both. The
// draft is known by its meta-schema URI exactly, as validators know it.
TEST(JsonSchema, RefSiblingsFollowTheDraft) {
  auto with_schema = [](const std::string& uri) {
    std::string t = R"({"definitions":{"o":{"type":"object","properties":{"a":{"type":"integer"}},)"
                    R"("additionalProperties":false}},"$ref":"#/definitions/o","required":["a"])";
    if (!uri.empty()) t += R"(,"$schema":")" + uri + "\"";
    return schema((t + "}").c_str());
  };
  for (const char* uri : {"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema"}) {
    auto g = with_schema(uri);
    ASSERT_TRUE(g) << uri;
    EXPECT_TRUE(grammar_accepts(g, "{}")) << uri << ": the sibling 'required' is ignored";
  }
  for (const char* uri : {"", "https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft-07/schema#"}) {
    auto g = with_schema(uri);
    ASSERT_TRUE(g) << uri;
    EXPECT_FALSE(grammar_accepts(g, "{}")) << uri << ": 'required' applies";
    EXPECT_TRUE(grammar_accepts(g, R"({"a":1})")) << uri;
  }
}

// vLLM's whitespace_pattern replaces the default whitespace; anything but JSON whitespace is
// refused.
TEST(JsonSchema, WhitespacePattern) {
  ConstraintSpec spec;
  spec.text = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  spec.json.whitespace.pattern = "\n?";
  auto c = compile_constraint(spec);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(grammar_accepts(*c, R"({"a":1})"));
  EXPECT_TRUE(grammar_accepts(*c, "{\n\"a\":\n1\n}"));
  EXPECT_FALSE(grammar_accepts(*c, R"({ "a":1})"));
  EXPECT_FALSE(grammar_accepts(*c, "{\n\n\"a\":1}"));
  // One gap between the braces of an empty object, whichever construction built it.
  for (const char* text : {R"({"type":"object","additionalProperties":false})",
                           R"({"type":"object","properties":{"a":{"type":"integer"}}})",
                           R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})"}) {
    ConstraintSpec empty;
    empty.text = text;
    empty.json.whitespace.pattern = "\n";
    auto e = compile_constraint(empty);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_TRUE(grammar_accepts(*e, "\n{\n}\n")) << text;
    EXPECT_FALSE(grammar_accepts(*e, "\n{\n\n}\n")) << text;
  }
  EXPECT_TRUE(check_whitespace_pattern("[ \t]{0,4}").ok());
  EXPECT_TRUE(check_whitespace_pattern("(\r\n|\n)?").ok());
  for (const char* bad : {"\\s*", ".?", "[ a]*", "(a"}) {
    Status st = check_whitespace_pattern(bad);
    EXPECT_FALSE(st.ok()) << bad;
    spec.json.whitespace.pattern = bad;
    EXPECT_FALSE(compile_constraint(spec).ok()) << bad;
  }
}

TEST(GrammarCheckCli, AcceptRejectAndRefusal) {
  const std::string dir = testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + name) << text;
    return dir + name;
  };
  std::string s = write("s.json", R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
  std::string good = write("good.json", R"({"n": 12})");
  std::string bad = write("bad.json", R"({"n": "12"})");
  std::string refused = write("refused.json", R"({"not":{}})");
  std::string tok = std::string(LLMSERVE_SHARED_DIR) + "/testdata/tokenizer/hf-llama3";
  auto run = [&](const std::string& args, int& rc) {
    std::string out;
    FILE* p = popen((std::string(LLMSERVE_BIN) + " grammar-check --tokenizer " + tok + " " + args + " 2>&1").c_str(), "r");
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    rc = WEXITSTATUS(pclose(p));
    return out;
  };
  int rc = 0;
  std::string out = run("--json-schema " + s + " " + good + " " + bad, rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("accept " + good), std::string::npos) << out;
  EXPECT_NE(out.find("reject " + bad), std::string::npos) << out;
  out = run("--json-schema " + refused + " " + good, rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("keyword 'not'"), std::string::npos) << out;
  out = run("--choice yes --choice no " + write("yes.txt", "yes"), rc);
  EXPECT_NE(out.find("accept"), std::string::npos) << out;
}

}  // namespace
}  // namespace llmserve::structured_output
