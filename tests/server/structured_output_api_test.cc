// Structured outputs and tool calls through the HTTP API on the real engine (stories260K, a
// model that knows nothing of JSON): whatever it samples, a constrained reply that finishes
// with "stop" is a sentence of its constraint; streamed replies equal non-streamed ones;
// forced tool calls come back as message.tool_calls; bad constraints are 400s naming the field.
#include <gtest/gtest.h>

#include "engine/llm_engine.h"
#include "server_test_util.h"
#include "structured_output/constraint.h"

namespace llmserve::testing {
namespace {

using structured_output::ConstraintSpec;

TestServer& server() {
  static TestServer* ts = new TestServer(stories_http_engine(), any_port());  // shared by the tests
  return *ts;
}

bool accepts(const ConstraintSpec& spec, const std::string& text) {
  auto g = structured_output::compile_constraint(spec);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() && structured_output::grammar_accepts(*g, text);
}

ConstraintSpec schema_spec(const json& schema) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kJsonSchema;
  s.text = schema.dump();
  return s;
}

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 3}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})");

json chat_body(json extra) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me about Lily."}}}},
               {"max_tokens", 200},
               {"temperature", 1.0},
               {"seed", 7}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

json post_ok(const std::string& path, const json& body) {
  auto r = server().post(path, body);
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

TEST(StructuredOutputApi, JsonSchemaRepliesFollowTheSchema) {
  int stops = 0;
  for (int seed = 0; seed < 6; ++seed) {
    json body = chat_body({{"seed", seed},
                           {"response_format",
                            {{"type", "json_schema"},
                             {"json_schema", {{"name", "person"}, {"schema", kPerson}}}}}});
    const json r = post_ok("/v1/chat/completions", body);
    const std::string text = r["choices"][0]["message"]["content"];
    const std::string reason = r["choices"][0]["finish_reason"];
    ASSERT_TRUE(reason == "stop" || reason == "length") << reason;
    if (reason != "stop") continue;
    ++stops;
    EXPECT_TRUE(accepts(schema_spec(kPerson), text)) << text;
    const json v = json::parse(text);
    EXPECT_TRUE(v["name"].is_string()) << text;
    EXPECT_TRUE(v["age"].is_number_integer()) << text;
    EXPECT_LE(v["age"].get<int>(), 120);
  }
  EXPECT_GE(stops, 3);  // the schema is small: most samples complete it within 200 tokens
}

TEST(StructuredOutputApi, EveryConstraintFieldOnBothEndpoints) {
  struct Case {
    const char* name;
    json fields;
    ConstraintSpec spec;
  };
  ConstraintSpec regex;
  regex.kind = ConstraintSpec::Kind::kRegex;
  regex.text = "(yes|no), because [a-z ]{1,30}\\.";
  ConstraintSpec choice;
  choice.kind = ConstraintSpec::Kind::kChoice;
  choice.choices = {"red", "green", "blue"};
  ConstraintSpec gbnf;
  gbnf.kind = ConstraintSpec::Kind::kGrammar;
  gbnf.text = "root ::= \"Answer: \" [0-9]+ (\" apples\" | \" pears\")";
  ConstraintSpec object;
  object.kind = ConstraintSpec::Kind::kJsonObject;
  ConstraintSpec compact = schema_spec(kPerson);
  compact.json.whitespace.compact = true;
  ConstraintSpec newlines = schema_spec(kPerson);  // vLLM's whitespace_pattern
  newlines.json.whitespace.pattern = "\n?";
  const std::vector<Case> cases = {
      {"structured_outputs.regex", {{"structured_outputs", {{"regex", regex.text}}}}, regex},
      {"structured_outputs.choice", {{"structured_outputs", {{"choice", choice.choices}}}}, choice},
      {"structured_outputs.grammar", {{"structured_outputs", {{"grammar", gbnf.text}}}}, gbnf},
      {"structured_outputs.json compact",
       {{"structured_outputs", {{"json", kPerson}, {"disable_any_whitespace", true}}}},
       compact},
      {"structured_outputs.json whitespace_pattern",
       {{"structured_outputs", {{"json", kPerson}, {"whitespace_pattern", "\n?"}}}},
       newlines},
      {"guided_whitespace_pattern",
       {{"guided_json", kPerson}, {"guided_whitespace_pattern", "\n?"}},
       newlines},
      {"response_format json_object", {{"response_format", {{"type", "json_object"}}}}, object},
      {"guided_regex", {{"guided_regex", regex.text}}, regex},
      {"guided_choice", {{"guided_choice", choice.choices}}, choice},
      {"guided_json", {{"guided_json", kPerson}}, schema_spec(kPerson)},
      {"llama.cpp grammar", {{"grammar", gbnf.text}}, gbnf},
      {"llama.cpp json_schema", {{"json_schema", kPerson}}, schema_spec(kPerson)},
  };
  for (const Case& c : cases)
    for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
      SCOPED_TRACE(std::string(c.name) + " " + path);
      json body = chat_body(c.fields);
      if (std::string(path) == "/v1/completions") {
        body.erase("messages");
        body["prompt"] = "Once upon a time";
      }
      body["n"] = 2;
      const json r = post_ok(path, body);
      ASSERT_EQ(r["choices"].size(), 2u);
      for (const json& ch : r["choices"]) {
        const std::string text =
            ch.contains("message") ? ch["message"]["content"].get<std::string>()
                                   : ch["text"].get<std::string>();
        if (ch["finish_reason"] == "stop") {
          EXPECT_TRUE(accepts(c.spec, text)) << text;
        } else {
          EXPECT_EQ(ch["finish_reason"], "length") << text;
        }
      }
    }
}

TEST(StructuredOutputApi, StreamedEqualsNonStreamedAndLengthIsLength) {
  json body = chat_body({{"structured_outputs", {{"json", kPerson}}}});
  const json whole = post_ok("/v1/chat/completions", body);
  body["stream"] = true;
  StreamReply s = post_stream(server(), "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200);
  std::string text, reason;
  for (const json& c : s.chunks) {
    if (c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content") && d["content"].is_string()) text += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) reason = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(reason, whole["choices"][0]["finish_reason"].get<std::string>());

  // Cut by max_tokens: "length", never "stop", and the usage counts the tokens.
  json cut = chat_body({{"structured_outputs", {{"json", kPerson}}}, {"max_tokens", 3}});
  const json r = post_ok("/v1/chat/completions", cut);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 3);
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
      "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 10}},
      "required": ["zone"], "additionalProperties": false}}}
])");

TEST(StructuredOutputApi, RequiredAndNamedToolChoicesReturnToolCalls) {
  int calls_seen = 0;
  for (int seed = 0; seed < 4; ++seed) {
    for (const json& choice : {json("required"),
                               json{{"type", "function"}, {"function", {{"name", "get_time"}}}}}) {
      SCOPED_TRACE(choice.dump() + " seed " + std::to_string(seed));
      json body = chat_body({{"tools", kTools}, {"tool_choice", choice}, {"seed", seed}});
      const json r = post_ok("/v1/chat/completions", body);
      const json& ch = r["choices"][0];
      if (ch["finish_reason"] == "length") continue;
      ASSERT_EQ(ch["finish_reason"], "tool_calls") << r.dump();
      const json& calls = ch["message"]["tool_calls"];
      ASSERT_GE(calls.size(), 1u) << r.dump();
      EXPECT_TRUE(ch["message"]["content"].is_null());
      for (const json& call : calls) {
        ++calls_seen;
        EXPECT_EQ(call["type"], "function");
        EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
        const std::string name = call["function"]["name"];
        if (choice.is_object()) {
          EXPECT_EQ(name, "get_time");
        }
        EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
        const json args = json::parse(call["function"]["arguments"].get<std::string>());
        EXPECT_TRUE(args.is_object());
        EXPECT_TRUE(args.contains(name == "get_time" ? "zone" : "city")) << args.dump();
      }
      // Streamed: the argument fragments join to the non-streamed arguments.
      body["stream"] = true;
      StreamReply s = post_stream(server(), "/v1/chat/completions", body);
      ASSERT_EQ(s.status, 200);
      std::map<int, std::string> args, names;
      std::string reason;
      for (const json& c : s.chunks) {
        if (c["choices"].empty()) continue;
        const json& d = c["choices"][0]["delta"];
        if (d.contains("tool_calls"))
          for (const json& tc : d["tool_calls"]) {
            const int idx = tc["index"];
            if (tc.contains("id")) names[idx] = tc["function"]["name"];
            args[idx] += tc["function"]["arguments"].get<std::string>();
          }
        if (!c["choices"][0]["finish_reason"].is_null()) reason = c["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(reason, "tool_calls");
      ASSERT_EQ(args.size(), calls.size());
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(names[int(i)], calls[i]["function"]["name"]);
        EXPECT_EQ(args[int(i)], calls[i]["function"]["arguments"]);
      }
    }
  }
  EXPECT_GE(calls_seen, 2);
}

TEST(StructuredOutputApi, ParallelToolCallsFalseGivesOneCall) {
  for (int seed = 0; seed < 3; ++seed) {
    const json r = post_ok("/v1/chat/completions",
                           chat_body({{"tools", kTools}, {"tool_choice", "required"},
                                      {"parallel_tool_calls", false}, {"seed", seed}}));
    if (r["choices"][0]["finish_reason"] == "tool_calls") {
      EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u);
    }
  }
}

void expect_400(const json& body, const std::string& param, const std::string& words,
                const std::string& path = "/v1/chat/completions") {
  auto r = server().post(path, body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["error"]["param"], param) << r->body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(words), std::string::npos) << r->body;
}

TEST(StructuredOutputApi, BadConstraintsAre400sNamingTheField) {
  const json not_schema = {{"type", "object"}, {"not", {{"required", {"a"}}}}};
  expect_400(chat_body({{"response_format",
                         {{"type", "json_schema"},
                          {"json_schema", {{"name", "x"}, {"schema", not_schema}}}}}}),
             "response_format", "keyword 'not'");
  expect_400(chat_body({{"structured_outputs", {{"regex", "(a"}}}}), "structured_outputs", "regex");
  expect_400(chat_body({{"structured_outputs", {{"choice", "x"}}}}), "structured_outputs",
             "structured_outputs.choice");
  expect_400(chat_body({{"structured_outputs", {{"grammar", "root ::= undefined_rule"}}}}),
             "structured_outputs", "undefined_rule");
  expect_400(chat_body({{"guided_regex", "a+"}, {"guided_choice", {"x"}}}), "guided_choice",
             "send only one");
  expect_400(chat_body({{"structured_outputs", {{"json", kPerson}, {"regex", "a"}}}}),
             "structured_outputs", "send only one");
  expect_400(chat_body({{"structured_outputs", {{"jsn", kPerson}}}}), "structured_outputs",
             "structured_outputs.jsn");
  expect_400(chat_body({{"structured_outputs", {{"whitespace_pattern", "\\s*"}, {"json", kPerson}}}}),
             "structured_outputs", "other than JSON whitespace");
  expect_400(chat_body({{"structured_outputs", {{"whitespace_pattern", " *"}, {"regex", "a"}}}}),
             "structured_outputs", "applies to JSON only");
  expect_400(chat_body({{"structured_outputs", {{"whitespace_pattern", " *"},
                                                {"disable_any_whitespace", true},
                                                {"json", kPerson}}}}),
             "structured_outputs", "conflict");
  expect_400(chat_body({{"guided_whitespace_pattern", " *"}}), "guided_whitespace_pattern",
             "applies to a JSON constraint");
  expect_400(chat_body({{"guided_json", kPerson}, {"guided_whitespace_pattern", "(a"}}),
             "guided_whitespace_pattern", "guided_whitespace_pattern");
  expect_400(chat_body({{"response_format", {{"type", "json_schema"}}}}), "response_format",
             "json_schema");
  expect_400(chat_body({{"response_format", {{"type", "yaml"}}}}), "response_format", "yaml");
  expect_400(chat_body({{"tools", kTools},
                        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
             "tool_choice", "'nope'");
  expect_400(chat_body({{"tool_choice", "required"}}), "tool_choice", "needs 'tools'");
  // stories260K's template shows no tool-call format: "auto" cannot parse calls.
  expect_400(chat_body({{"tools", kTools}}), "tool_choice", "--tool-call-parser");
  expect_400(chat_body({{"tools", kTools}, {"tool_choice", "required"},
                        {"response_format", {{"type", "json_object"}}}}),
             "tool_choice", "cannot be combined");
  json bad_tool = kTools;
  bad_tool[0]["function"]["parameters"] = {{"type", "object"}, {"patternProperties", json::object()}};
  expect_400(chat_body({{"tools", bad_tool}, {"tool_choice", "required"}}), "tools",
             "patternProperties");
  // Constraints that match nothing, and hostile shapes (QA): 400s, fast, naming the field.
  expect_400(chat_body({{"response_format",
                         {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", false}}}}}}),
             "response_format", "matches no string");
  expect_400(chat_body({{"guided_json", {{"enum", json::array()}}}}), "guided_json",
             "matches no string");
  expect_400(chat_body({{"grammar", "root ::= \"x\" root"}}), "grammar", "matches no string");
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < 100000; ++i) deep += "}";
  expect_400(chat_body({{"guided_json", deep}}), "guided_json", "nests deeper than 64");
  expect_400(chat_body({{"response_format",
                         {{"type", "json_schema"}, {"json_schema", {{"name", "bad name!"}, {"schema", kPerson}}}}}}),
             "response_format", "a-z");
  expect_400(chat_body({{"tools", {kTools[0], kTools[0]}}, {"tool_choice", "required"}}), "tools",
             "given twice");
  json string_tool = kTools;
  string_tool[1]["function"]["parameters"] = {{"type", "string"}};
  expect_400(chat_body({{"tools", string_tool}, {"tool_choice", "required"}}), "tools",
             "tools[1].function.parameters");
  json enum_tool = kTools;
  enum_tool[0]["function"]["parameters"] = {{"type", "object"}, {"properties", {{"a", {{"enum", json::array()}}}}},
                                            {"required", {"a"}}};
  expect_400(chat_body({{"tools", enum_tool}, {"tool_choice", "required"}}), "tools",
             "tools[0].function.parameters");
  // The engine is unaffected: a plain request still works.
  const json ok = post_ok("/v1/chat/completions", chat_body({{"max_tokens", 5}}));
  EXPECT_EQ(ok["usage"]["completion_tokens"], 5);
}

TEST(StructuredOutputApi, MetricsCountMasksCompilesAndRefusals) {
  post_ok("/v1/chat/completions",
          chat_body({{"guided_choice", {"alpha", "beta"}}, {"max_tokens", 10}}));
  auto refused = server().post("/v1/completions",
                               {{"prompt", "x"}, {"guided_json", {{"not", {{"type", "null"}}}}}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  auto r = server().get("/metrics");
  ASSERT_TRUE(r);
  for (const char* name : {"llmserve:structured_output_mask_seconds_count{",
                           "llmserve:structured_output_compile_seconds_count{",
                           "llmserve:structured_output_refused_total{"})
    EXPECT_NE(r->body.find(name), std::string::npos) << name;
  EXPECT_NE(r->body.find("llmserve:structured_output_refused_total{"), std::string::npos);
  EXPECT_NE(r->body.find("keyword=\"not\"}"), std::string::npos);
  const size_t at = r->body.find("llmserve:structured_output_mask_seconds_count{");
  ASSERT_NE(at, std::string::npos);
  const size_t sp = r->body.find("} ", at);
  EXPECT_GT(std::stod(r->body.substr(sp + 2)), 0);
}

}  // namespace
}  // namespace llmserve::testing
