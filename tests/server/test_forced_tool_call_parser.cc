// The parsers for grammar-forced tool calls (tool_choice "required" and a named function):
// each case is checked non-streamed, then streamed byte by byte, in 2-byte chunks, in every
// two-piece split and in random chunks, which must all rebuild the non-streamed result
// exactly (ids included: the id seed is fixed). No event is ever content.
#include <gtest/gtest.h>

#include "tool_event_replay.h"

#include <cctype>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/forced_tool_call_parser.h"

namespace llmserve::tool_parsers {
namespace {

using json = nlohmann::json;
using Factory = std::function<std::unique_ptr<ToolParser>(const ToolParserOptions&)>;

Factory required() {
  return [](const ToolParserOptions& o) { return make_required_tool_call_parser(o); };
}
Factory named(std::string name) {
  return [name](const ToolParserOptions& o) { return make_named_tool_call_parser(name, o); };
}

ToolParserOptions seeded(uint64_t seed = 7) {
  ToolParserOptions o;
  o.id_seed = seed;
  return o;
}

struct Call {
  std::string name;
  std::string arguments;
  bool complete = true;
};


ToolParseResult stream(const Factory& make, const std::string& text,
                       const std::vector<size_t>& cuts) {
  auto p = make(seeded());
  ToolParseResult r;
  size_t at = 0;
  for (size_t cut : cuts) {
    apply_events(p->push(std::string_view(text).substr(at, cut - at)), &r, false);
    at = cut;
  }
  apply_events(p->push(std::string_view(text).substr(at)), &r, false);
  apply_events(p->finish(), &r, false);
  EXPECT_TRUE(p->finished());
  match_parser_result(*p, &r);
  return r;
}

void expect_split_invariant(const Factory& make, const std::string& text,
                            const ToolParseResult& expected, bool every_two_piece = true) {
  const std::string want = describe(expected);
  std::vector<size_t> bytes, pairs;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  for (size_t i = 2; i < text.size(); i += 2) pairs.push_back(i);
  EXPECT_EQ(describe(stream(make, text, bytes)), want) << "byte by byte: " << text;
  EXPECT_EQ(describe(stream(make, text, pairs)), want) << "2-byte chunks: " << text;
  if (every_two_piece) {
    for (size_t i = 0; i <= text.size(); ++i) {
      ASSERT_EQ(describe(stream(make, text, {i})), want) << "split at " << i << ": " << text;
    }
  }
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> cuts;
    for (size_t at = 0;;) {
      at += rng() % 9;  // empty deltas included
      if (at >= text.size()) break;
      cuts.push_back(at);
    }
    ASSERT_EQ(describe(stream(make, text, cuts)), want) << "random chunks " << trial;
  }
}

ToolParseResult expect_parse(const Factory& make, const std::string& text,
                             const std::vector<Call>& calls) {
  auto p = make(seeded());
  const ToolParseResult r = parse_tool_calls(*p, text);
  EXPECT_EQ(r.content, "") << text;
  EXPECT_EQ(r.tool_calls.size(), calls.size()) << describe(r);
  for (size_t i = 0; i < r.tool_calls.size() && i < calls.size(); ++i) {
    EXPECT_EQ(r.tool_calls[i].index, static_cast<int>(i));
    EXPECT_EQ(r.tool_calls[i].name, calls[i].name);
    EXPECT_EQ(r.tool_calls[i].arguments, calls[i].arguments);
    EXPECT_EQ(r.tool_calls[i].complete, calls[i].complete) << r.tool_calls[i].arguments;
    if (calls[i].complete) {
      EXPECT_TRUE(json::accept(r.tool_calls[i].arguments)) << r.tool_calls[i].arguments;
    }
  }
  expect_split_invariant(make, text, r);
  return r;
}

// --- tool_choice "required" -----------------------------------------------------------------

TEST(RequiredToolCallParser, SingleCall) {
  const auto r = expect_parse(
      required(), R"([{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}])",
      {{"get_weather", R"({"city": "Paris", "unit": "celsius"})"}});
  EXPECT_EQ(json::parse(r.tool_calls[0].arguments),
            json({{"city", "Paris"}, {"unit", "celsius"}}));
  // Compact, as a grammar usually makes it.
  expect_parse(required(), R"([{"name":"f","parameters":{"a":1,"b":[true,null,-2.5e3]}}])",
               {{"f", R"({"a":1,"b":[true,null,-2.5e3]})"}});
  expect_parse(required(), R"([{"name":"f","parameters":{}}])", {{"f", "{}"}});
}

TEST(RequiredToolCallParser, MultipleCalls) {
  const auto r = expect_parse(
      required(),
      R"([{"name":"search","parameters":{"q":"cats"}},{"name":"lookup","parameters":{"id":42}}])",
      {{"search", R"({"q":"cats"})"}, {"lookup", R"({"id":42})"}});
  EXPECT_EQ(r.tool_calls[0].index, 0);
  EXPECT_EQ(r.tool_calls[1].index, 1);
  EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
  expect_parse(required(),
               R"([{"name":"a","parameters":{}},{"name":"b","parameters":{}},)"
               R"({"name":"a","parameters":{"x":"y"}}])",
               {{"a", "{}"}, {"b", "{}"}, {"a", R"({"x":"y"})"}});
}

TEST(RequiredToolCallParser, WhitespaceOutsideParametersIsDropped) {
  // Any JSON whitespace around and between elements and keys; the parameters keep their own.
  expect_parse(required(),
               "\n [\n  {\n    \"name\" :\t\"f\" ,\r\n    \"parameters\" :  {\n      \"a\": 1\n"
               "    }\n  } ,\n  {\"name\": \"g\", \"parameters\": { }}\n]\n ",
               {{"f", "{\n      \"a\": 1\n    }"}, {"g", "{ }"}});
}

TEST(RequiredToolCallParser, StringsWithBracketsAndEscapes) {
  const std::string params =
      R"({"code": "if (a) { return \"]}\"; } ]", "path": "C:\\dir\\}", "q": "say \"hi\"", "s": "\/\b\f\n\r\t\u0041"})";
  const auto r = expect_parse(required(),
                              R"([{"name": "run", "parameters": )" + params +
                                  R"(}, {"name": "x]}", "parameters": {"k": "]"}}])",
                              {{"run", params}, {"x]}", R"({"k": "]"})"}});
  EXPECT_EQ(json::parse(r.tool_calls[0].arguments)["code"], "if (a) { return \"]}\"; } ]");
  EXPECT_EQ(json::parse(r.tool_calls[0].arguments)["path"], "C:\\dir\\}");
}

TEST(RequiredToolCallParser, Unicode) {
  const std::string params =
      "{\"text\": \"na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x8E\x89\", "
      "\"esc\": \"\\u00e9\\ud83c\\udf89\"}";
  const auto r = expect_parse(required(),
                              "[{\"name\": \"tr\xC3\xA4nslate\", \"parameters\": " + params + "}]",
                              {{"tr\xC3\xA4nslate", params}});
  const json j = json::parse(r.tool_calls[0].arguments);
  EXPECT_EQ(j["text"], "na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x8E\x89");
  EXPECT_EQ(j["esc"], "\xC3\xA9\xF0\x9F\x8E\x89");
  // Invalid UTF-8 and raw control characters come out so that the arguments still parse.
  const auto bad = expect_parse(required(),
                                "[{\"name\":\"f\",\"parameters\":{\"a\":\"x\xFFy\nz\"}}]",
                                {{"f", "{\"a\":\"x\xEF\xBF\xBDy\\nz\"}"}});
  EXPECT_EQ(json::parse(bad.tool_calls[0].arguments)["a"], "x\xEF\xBF\xBDy\nz");
}

TEST(RequiredToolCallParser, CutOff) {
  // max_tokens in the second call's parameters: the first stays, the second is incomplete.
  expect_parse(required(), R"([{"name":"a","parameters":{"x":1}},{"name":"b","parameters":{"q":"hel)",
               {{"a", R"({"x":1})"}, {"b", R"({"q":"hel)", false}});
  // Right after the name: the call has begun, with no arguments yet.
  expect_parse(required(), R"([{"name":"a","parameters":{}},{"name":"b")",
               {{"a", "{}"}, {"b", "", false}});
  expect_parse(required(), R"([{"name":"b","param)", {{"b", "", false}});
  // Parameters whole but the object not closed: incomplete, like the other parsers.
  expect_parse(required(), R"([{"name":"b","parameters":{"k":[1,2]})",
               {{"b", R"({"k":[1,2]})", false}});
  // Before the name is complete nothing has begun.
  expect_parse(required(), R"([{"name":"a","parameters":{}},{"name":"b)", {{"a", "{}"}});
  expect_parse(required(), R"([{"na)", {});
  expect_parse(required(), "[", {});
  expect_parse(required(), "", {});
  // The array's closing bracket missing only.
  expect_parse(required(), R"([{"name":"a","parameters":{}})", {{"a", "{}"}});
}

TEST(RequiredToolCallParser, OtherShapes) {
  expect_parse(required(), "[]", {});
  // Keys in another order: the call begins once the name is known, with what came before.
  expect_parse(required(), R"([{"parameters": {"a": "}"}, "name": "f"}])", {{"f", R"({"a": "}"})"}});
  // Missing parameters: "{}"; an "arguments" key and unknown keys are accepted.
  expect_parse(required(), R"([{"name":"f"},{"name":"g","arguments":{"b":2},"extra":[1]}])",
               {{"f", "{}"}, {"g", R"({"b":2})"}});
  // Malformed: what was emitted stays, the rest is dropped; never content.
  expect_parse(required(), "Sure! [{\"name\":\"f\",\"parameters\":{}}]", {});
  expect_parse(required(), R"([{"name":"f","parameters":{"a":1}}] trailing text)",
               {{"f", R"({"a":1})"}});
  expect_parse(required(), R"([{"name":"f","parameters":{"a":1}} x {"name":"g"}])",
               {{"f", R"({"a":1})"}});
  expect_parse(required(), R"([{"name":"f","parameters":{"a":1,}},{"name":"g"}])",
               {{"f", R"({"a":1,)", false}});
  expect_parse(required(), R"([{"name":"","parameters":{}}])", {});
  expect_parse(required(), R"([1, {"name":"f"}])", {});
}

TEST(RequiredToolCallParser, RandomParametersRoundTrip) {
  std::mt19937 rng(99);
  const std::vector<std::string> strings = {
      "plain", "}", "]", "{\"}", "\\", "quote \" here", "naïve 日本 🎉", "", "a\nb\tc", "[{]}"};
  std::function<json(int)> value = [&](int depth) -> json {
    switch (rng() % (depth > 2 ? 4 : 6)) {
      case 0: return strings[rng() % strings.size()];
      case 1: return static_cast<int>(rng() % 2000) - 1000;
      case 2: return (rng() % 2) == 0;
      case 3: return nullptr;
      case 4: {
        json a = json::array();
        for (unsigned n = rng() % 4; n > 0; --n) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (unsigned n = rng() % 4; n > 0; --n) o[strings[rng() % strings.size()]] = value(depth + 1);
        return o;
      }
    }
  };
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<json> params;
    std::string text = "[";
    const unsigned n = 1 + rng() % 3;
    const int indent = trial % 3 == 0 ? 2 : -1;
    for (unsigned i = 0; i < n; ++i) {
      json p = json::object();
      for (unsigned k = rng() % 4; k > 0; --k) p[strings[rng() % strings.size()]] = value(0);
      params.push_back(p);
      if (i > 0) text += indent < 0 ? "," : ",\n";
      text += R"({"name":"fn_)" + std::to_string(i) + R"(","parameters":)" + p.dump(indent) + "}";
    }
    text += "]";
    auto parser = make_required_tool_call_parser(seeded());
    const ToolParseResult r = parse_tool_calls(*parser, text);
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.tool_calls.size(), n) << text;
    for (unsigned i = 0; i < n; ++i) {
      EXPECT_EQ(r.tool_calls[i].index, static_cast<int>(i));
      EXPECT_EQ(r.tool_calls[i].name, "fn_" + std::to_string(i));
      EXPECT_TRUE(r.tool_calls[i].complete);
      EXPECT_EQ(r.tool_calls[i].arguments, params[i].dump(indent));
      ASSERT_TRUE(json::accept(r.tool_calls[i].arguments)) << r.tool_calls[i].arguments;
      EXPECT_EQ(json::parse(r.tool_calls[i].arguments), params[i]);
    }
    expect_split_invariant(required(), text, r, /*every_two_piece=*/text.size() <= 400);
  }
}

TEST(RequiredToolCallParser, CallIds) {
  const std::string text = R"([{"name":"f","parameters":{}},{"name":"g","parameters":{}}])";
  auto a = make_required_tool_call_parser(seeded(1));
  auto b = make_required_tool_call_parser(seeded(1));
  const auto ra = parse_tool_calls(*a, text);
  const auto rb = parse_tool_calls(*b, text);
  ASSERT_EQ(ra.tool_calls.size(), 2u);
  EXPECT_EQ(ra.tool_calls[0].id, rb.tool_calls[0].id);
  EXPECT_EQ(ra.tool_calls[1].id, rb.tool_calls[1].id);
  EXPECT_NE(ra.tool_calls[0].id, ra.tool_calls[1].id);
  for (const ToolCall& c : ra.tool_calls) {
    ASSERT_EQ(c.id.size(), 29u);
    EXPECT_EQ(c.id.substr(0, 5), "call_");
    for (char ch : c.id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
  }
  auto u1 = make_required_tool_call_parser();
  auto u2 = make_required_tool_call_parser();
  EXPECT_NE(parse_tool_calls(*u1, text).tool_calls[0].id,
            parse_tool_calls(*u2, text).tool_calls[0].id);  // unseeded: random
  EXPECT_EQ(a->name(), "required");
}

TEST(RequiredToolCallParser, BeginsAsSoonAsTheNameIsComplete) {
  auto p = make_required_tool_call_parser(seeded());
  EXPECT_TRUE(p->push(R"([{"name":"get_wea)").empty());
  const auto ev = p->push(R"(ther")");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ToolEventKind::kToolCallBegin);
  EXPECT_EQ(ev[0].name, "get_weather");
  EXPECT_EQ(ev[0].index, 0);
  EXPECT_TRUE(p->push(R"(, "parameters": )").empty());
  const auto args = p->push(R"({"city": "Pa)");
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0].kind, ToolEventKind::kToolCallArguments);
  EXPECT_EQ(args[0].text, R"({"city": "Pa)");
  const auto rest = p->push(R"(ris"}}, {"name": "g")");
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].text, R"(ris"})");
  EXPECT_EQ(rest[1].kind, ToolEventKind::kToolCallBegin);
  EXPECT_EQ(rest[1].index, 1);
  EXPECT_TRUE(p->finish().empty());
  ASSERT_EQ(p->result().tool_calls.size(), 2u);
  EXPECT_TRUE(p->result().tool_calls[0].complete);
  EXPECT_FALSE(p->result().tool_calls[1].complete);
}

// --- a named tool_choice ----------------------------------------------------------------------

TEST(NamedToolCallParser, WholeOutputIsTheArguments) {
  const auto r = expect_parse(named("get_weather"), R"({"city": "Paris", "days": [1, 2]})",
                              {{"get_weather", R"({"city": "Paris", "days": [1, 2]})"}});
  EXPECT_EQ(json::parse(r.tool_calls[0].arguments), json({{"city", "Paris"}, {"days", {1, 2}}}));
  expect_parse(named("f"), "{}", {{"f", "{}"}});
  expect_parse(named("f"), "{\n  \"a\": {\"b\": null}\n}", {{"f", "{\n  \"a\": {\"b\": null}\n}"}});
}

TEST(NamedToolCallParser, WhitespaceOutsideTheValueIsDropped) {
  expect_parse(named("f"), " \n\t{\"a\": 1} \n", {{"f", R"({"a": 1})"}});
  // Anything after the value is dropped too.
  expect_parse(named("f"), R"({"a": 1}{"b": 2})", {{"f", R"({"a": 1})"}});
}

TEST(NamedToolCallParser, StringsWithBracesEscapesAndUnicode) {
  const std::string args =
      "{\"code\": \"} ] { [\", \"q\": \"say \\\"}\\\" \\\\\", \"u\": \"\xE6\x97\xA5\xF0\x9F\x8E\x89"
      "\\u00e9\"}";
  const auto r = expect_parse(named("run"), args, {{"run", args}});
  const json j = json::parse(r.tool_calls[0].arguments);
  EXPECT_EQ(j["code"], "} ] { [");
  EXPECT_EQ(j["q"], "say \"}\" \\");
  EXPECT_EQ(j["u"], "\xE6\x97\xA5\xF0\x9F\x8E\x89\xC3\xA9");
  // A raw newline inside a string is emitted escaped (the scanner's leniency).
  const auto nl = expect_parse(named("f"), "{\"a\": \"line1\nline2\"}",
                               {{"f", R"({"a": "line1\nline2"})"}});
  EXPECT_EQ(json::parse(nl.tool_calls[0].arguments)["a"], "line1\nline2");
}

TEST(NamedToolCallParser, CutOffAndEmpty) {
  expect_parse(named("f"), R"({"a": "unfinish)", {{"f", R"({"a": "unfinish)", false}});
  expect_parse(named("f"), R"({"a": 1)", {{"f", R"({"a": 1)", false}});
  expect_parse(named("f"), "", {{"f", "", false}});
  expect_parse(named("f"), "  \n", {{"f", "", false}});
  // Broken JSON: what came before the break stays, incomplete.
  expect_parse(named("f"), R"({"a": 1,, "b": 2})", {{"f", R"({"a": 1,)", false}});
}

TEST(NamedToolCallParser, BeginsAtTheFirstPush) {
  auto p = make_named_tool_call_parser("lookup", seeded(3));
  const auto first = p->push("");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, ToolEventKind::kToolCallBegin);
  EXPECT_EQ(first[0].index, 0);
  EXPECT_EQ(first[0].name, "lookup");
  EXPECT_EQ(first[0].id.substr(0, 5), "call_");
  EXPECT_EQ(first[0].id.size(), 29u);
  const auto second = p->push(" {\"id\"");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kind, ToolEventKind::kToolCallArguments);
  EXPECT_EQ(second[0].text, "{\"id\"");
  EXPECT_EQ(p->push(": 7}")[0].text, ": 7}");
  EXPECT_TRUE(p->push("\n").empty());
  EXPECT_TRUE(p->finish().empty());
  ASSERT_EQ(p->result().tool_calls.size(), 1u);
  EXPECT_TRUE(p->result().tool_calls[0].complete);
  EXPECT_EQ(p->result().tool_calls[0].arguments, R"({"id": 7})");
  EXPECT_EQ(p->name(), "named");

  // Empty output: the call begins at finish.
  auto e = make_named_tool_call_parser("lookup", seeded(3));
  const auto ev = e->finish();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ToolEventKind::kToolCallBegin);
  EXPECT_EQ(ev[0].id, first[0].id);  // same seed, same id
  EXPECT_FALSE(e->result().tool_calls[0].complete);
}

}  // namespace
}  // namespace llmserve::tool_parsers
