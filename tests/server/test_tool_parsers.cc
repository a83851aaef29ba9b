// Tool-call parsers on exact model outputs. Each string is quoted from a test of vLLM
// (github.com/vllm-project/vllm, tests/tool_parsers/) or llama.cpp (tests/test-chat.cpp),
// cited next to it; the expectations are this library's (see tool_parser.h for where they
// differ from vLLM's: content around calls is kept, a streamed call is never taken back).
// Every case is checked non-streamed, then streamed in every split: byte by byte, every
// two-piece split and random chunkings must rebuild exactly the non-streamed result.
#include <gtest/gtest.h>

#include "tool_event_replay.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/json_scanner.h"
#include "server/tool_parsers/tool_parser_registry.h"

namespace llmserve::tool_parsers {
namespace {

struct Call {
  std::string name;
  std::string arguments;
  bool complete = true;
};

std::unique_ptr<ToolParser> make(const std::string& name, ToolParserOptions options = {}) {
  if (!options.id_seed) options.id_seed = 7;
  auto p = make_tool_parser(name, options);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}


ToolParseResult stream(const std::string& name, const std::string& text,
                       const std::vector<size_t>& cuts, const ToolParserOptions& options) {
  auto p = make(name, options);
  ToolParseResult r;
  size_t at = 0;
  for (size_t cut : cuts) {
    apply_events(p->push(std::string_view(text).substr(at, cut - at)), &r);
    at = cut;
  }
  apply_events(p->push(std::string_view(text).substr(at)), &r);
  apply_events(p->finish(), &r);
  // The parser's own result() is the same thing (it also knows `complete`).
  match_parser_result(*p, &r);
  return r;
}

// Streams `text` in every split checked here; each must rebuild `expected` exactly.
void expect_split_invariant(const std::string& name, const std::string& text,
                            const ToolParseResult& expected, const ToolParserOptions& options) {
  const std::string want = describe(expected);
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  EXPECT_EQ(describe(stream(name, text, every, options)), want) << "byte by byte: " << text;
  if (text.size() <= 600) {
    for (size_t i = 1; i < text.size(); ++i) {
      ASSERT_EQ(describe(stream(name, text, {i}, options)), want) << "split at " << i;
    }
  }
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> cuts;
    for (size_t at = 0;;) {
      at += 1 + rng() % 9;
      if (at >= text.size()) break;
      cuts.push_back(at);
    }
    ASSERT_EQ(describe(stream(name, text, cuts, options)), want) << "random chunks " << trial;
  }
}

ToolParseResult expect_parse(const std::string& name, const std::string& text,
                             const std::string& content, const std::vector<Call>& calls,
                             const ToolParserOptions& options = {}) {
  auto p = make(name, options);
  const ToolParseResult r = parse_tool_calls(*p, text);
  EXPECT_EQ(r.content, content) << text;
  EXPECT_EQ(r.tool_calls.size(), calls.size()) << describe(r);
  for (size_t i = 0; i < r.tool_calls.size() && i < calls.size(); ++i) {
    EXPECT_EQ(r.tool_calls[i].index, static_cast<int>(i));
    EXPECT_EQ(r.tool_calls[i].name, calls[i].name);
    EXPECT_EQ(r.tool_calls[i].arguments, calls[i].arguments);
    EXPECT_EQ(r.tool_calls[i].complete, calls[i].complete) << r.tool_calls[i].arguments;
    if (calls[i].complete) {
      EXPECT_TRUE(nlohmann::json::accept(r.tool_calls[i].arguments)) << r.tool_calls[i].arguments;
    }
  }
  ToolParserOptions seeded = options;
  if (!seeded.id_seed) seeded.id_seed = 7;
  expect_split_invariant(name, text, r, seeded);
  return r;
}

// --- hermes ---------------------------------------------------------------------------------

TEST(HermesToolParser, PlainTextPassesThrough) {
  // vLLM tests/tool_parsers/test_hermes_tool_parser.py (streaming_just_forward_text)
  expect_parse("hermes", "This is some prior text that has nothing to do with tool calling.",
               "This is some prior text that has nothing to do with tool calling.", {});
  // vLLM test_hermes_tool_parser.py (non_streaming_no_tool_call)
  expect_parse("hermes", "This is not a tool call.", "This is not a tool call.", {});
  // Trailing whitespace and a would-be marker that never completes stay content.
  expect_parse("hermes", "Hello\n\n", "Hello\n\n", {});
  expect_parse("hermes", "a <tool", "a <tool", {});
  expect_parse("hermes", "a <tool_cal b", "a <tool_cal b", {});
}

TEST(HermesToolParser, SingleCalls) {
  // vLLM test_hermes_tool_parser.py (bug_19056 / tool_call_between_tags)
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}\n"
               "</tool_call>",
               "", {{"final_answer", R"({"trigger": true})"}});
  // vLLM test_hermes_tool_parser.py (parser_streaming; Python's backslash-newline joins lines)
  expect_parse("hermes",
               "<tool_call>{\"name\": \"get_current_temperature\",\"arguments\": {\"location\":"
               "\"San Francisco, California, United States\", \"unit\": \"celsius\"}}</tool_call>",
               "",
               {{"get_current_temperature",
                 R"({"location":"San Francisco, California, United States", "unit": "celsius"})"}});
  // llama.cpp tests/test-chat.cpp (NousResearch-Hermes-2-Pro, MiMo-VL / Hermes 3 / Qwen 2.5)
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}"
               "</tool_call>",
               "", {{"special_function", R"({"arg1": 1})"}});
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n"
               "</tool_call>",
               "", {{"special_function", R"({"arg1": 1})"}});
}

TEST(HermesToolParser, ContentAroundCalls) {
  // vLLM test_hermes_tool_parser.py (content_then_tool_call_with_stream_interval)
  expect_parse("hermes",
               "Sure, let me check the weather.<tool_call>{\"name\": \"get_weather\", "
               "\"arguments\": {\"city\": \"NYC\"}}</tool_call>",
               "Sure, let me check the weather.", {{"get_weather", R"({"city": "NYC"})"}});
  // llama.cpp test-chat.cpp (NousResearch-Hermes-2-Pro, content before the call)
  expect_parse("hermes",
               "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"special_function\", "
               "\"arguments\": {\"arg1\": 1}}</tool_call>",
               "Hello, world!\nWhat's up?", {{"special_function", R"({"arg1": 1})"}});
  // Whitespace touching only calls is formatting; between content pieces it is kept.
  expect_parse("hermes",
               "Sure.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n",
               "Sure.", {{"f", R"({"a": 1})"}});
  expect_parse("hermes",
               "Before <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> after.",
               "Before  after.", {{"f", "{}"}});
}

TEST(HermesToolParser, ParallelCalls) {
  // vLLM test_hermes_tool_parser.py (multiple_tool_calls_with_stream_interval)
  expect_parse("hermes",
               "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"cats\"}}</tool_call>"
               "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"dogs\"}}</tool_call>",
               "", {{"search", R"({"q": "cats"})"}, {"search", R"({"q": "dogs"})"}});
  // A missing </tool_call> before the next call still separates them.
  expect_parse("hermes",
               "<tool_call>{\"name\": \"a\", \"arguments\": {}}\n"
               "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": [1, {\"y\": null}]}}",
               "", {{"a", "{}"}, {"b", R"({"x": [1, {"y": null}]})"}});
}

TEST(HermesToolParser, ArgumentShapes) {
  // vLLM test_hermes_tool_parser.py (tool_call_until_eos): no </tool_call> at EOS.
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}",
               "", {{"final_answer", R"({"trigger": true})"}});
  // vLLM test_hermes_tool_parser.py (serialized_arguments): Granite 4 serializes arguments.
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"get_db_config\", \"arguments\": "
               "\"{\\\"param\\\": \\\"max_connections\\\"}\"}\n</tool_call>",
               "", {{"get_db_config", R"({"param": "max_connections"})"}});
  // vLLM test_hermes_tool_parser.py (bare_string_arguments): kept as a JSON string.
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"do_thing\", \"arguments\": \"hello\"}\n</tool_call>", "",
               {{"do_thing", R"("hello")"}});
  // Arguments before the name, no arguments, null arguments, extra keys.
  expect_parse("hermes",
               "<tool_call>{\"arguments\": {\"name\": \"x\"}, \"name\": \"f\"}</tool_call>", "",
               {{"f", R"({"name": "x"})"}});
  expect_parse("hermes", "<tool_call>{\"name\": \"f\"}</tool_call>", "", {{"f", "{}"}});
  expect_parse("hermes", "<tool_call>{\"name\": \"f\", \"arguments\": null}</tool_call>", "",
               {{"f", "{}"}});
  expect_parse("hermes",
               "<tool_call>{\"type\": \"function\", \"name\": \"f\", \"arguments\": {\"n\": -1.5e3}, "
               "\"id\": 9}</tool_call>",
               "", {{"f", R"({"n": -1.5e3})"}});
  // Escapes, '}' and '<' inside strings, UTF-8.
  expect_parse("hermes",
               "<tool_call>{\"name\": \"say\", \"arguments\": {\"t\": \"a \\\"}\\\" </tool_call> "
               "\\u00e9 é\"}}</tool_call>",
               "", {{"say", R"({"t": "a \"}\" </tool_call> \u00e9 é"})"}});
  // Invalid UTF-8 inside a string comes out as U+FFFD: the arguments stay valid JSON.
  expect_parse("hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"t\": \"a\xff\"}}</tool_call>",
               "", {{"f", "{\"t\": \"a\xEF\xBF\xBD\"}"}});
  // A raw newline inside a string is emitted escaped: the arguments stay valid JSON.
  expect_parse("hermes",
               "<tool_call>{\"name\": \"sh\", \"arguments\": {\"cmd\": \"ls\n-l\"}}</tool_call>", "",
               {{"sh", R"({"cmd": "ls\n-l"})"}});
}

TEST(HermesToolParser, MalformedOutput) {
  // vLLM test_hermes_tool_parser.py (tool_call_invalid_json): the closing brace is missing.
  // The call's header was streamed, so it stays, incomplete (vLLM returns it as content).
  expect_parse("hermes",
               "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}", "",
               {{"final_answer", R"({"trigger": true})", false}});
  // Not JSON, no name, a name that is not a string: content, marker and all.
  expect_parse("hermes", "<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>",
               {});
  expect_parse("hermes", "<tool_call>{\"arguments\": {}}</tool_call>",
               "<tool_call>{\"arguments\": {}}</tool_call>", {});
  expect_parse("hermes", "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call> ok",
               "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call> ok", {});
  expect_parse("hermes", "x <tool_call>{\"name\": \"f\", \"argu", "x <tool_call>{\"name\": \"f\", \"argu",
               {});
  // JSON that breaks off after the header: the call is incomplete, the rest of its block
  // is dropped, and what follows the block is content again.
  expect_parse("hermes",
               "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru }}</tool_call>Then text.",
               "Then text.", {{"f", R"({"a": tru)", false}});
}

// --- llama3_json ----------------------------------------------------------------------------

TEST(Llama3JsonToolParser, Calls) {
  // vLLM tests/tool_parsers/test_llama3_json_tool_parser.py (with_arguments)
  expect_parse("llama3_json",
               R"({"name": "searchTool", "parameters": {"query": "test query", "limit": 10}})", "",
               {{"searchTool", R"({"query": "test query", "limit": 10})"}});
  // vLLM test_llama3_json_tool_parser.py (simple): vLLM drops the surrounding text; we keep it.
  expect_parse("llama3_json",
               "Here is the result: {\"name\": \"getOpenIncidentsTool\", \"parameters\": {}} Would "
               "you like to know more?",
               "Here is the result: Would you like to know more?", {{"getOpenIncidentsTool", "{}"}});
  // vLLM test_llama3_json_tool_parser.py (with_arguments_key)
  expect_parse("llama3_json", R"({"name": "searchTool", "arguments": {"query": "test"}})", "",
               {{"searchTool", R"({"query": "test"})"}});
  // vLLM test_llama3_json_tool_parser.py (with_escaped_quotes_in_nested_json)
  expect_parse("llama3_json",
               R"({"name": "parserTool", "parameters": {"text": "He said \"Hello {world}\""}})", "",
               {{"parserTool", R"({"text": "He said \"Hello {world}\""})"}});
  // vLLM test_llama3_json_tool_parser.py (deeply_nested_json)
  expect_parse("llama3_json",
               R"({"name": "complexTool", "parameters": {"level1": {"level2": {"level3": )"
               R"({"level4": {"value": "deep"}}}}}})",
               "",
               {{"complexTool",
                 R"({"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}})"}});
  // <|python_tag|> first (Llama 3.1's template renders calls so).
  expect_parse("llama3_json",
               "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
               {{"get_weather", R"({"city": "Paris"})"}});
}

TEST(Llama3JsonToolParser, ParallelCalls) {
  // vLLM test_llama3_json_tool_parser.py (multiple_json)
  expect_parse("llama3_json",
               R"({"name": "searchTool", "parameters": {"query": "test1"}}; )"
               R"({"name": "getOpenIncidentsTool", "parameters": {}}; )"
               R"({"name": "searchTool", "parameters": {"query": "test2"}})",
               "",
               {{"searchTool", R"({"query": "test1"})"},
                {"getOpenIncidentsTool", "{}"},
                {"searchTool", R"({"query": "test2"})"}});
  // vLLM test_llama3_json_tool_parser.py (streaming_parallel_separators)
  for (const char* sep : {"; ", ";", ";\n", "\n"}) {
    expect_parse("llama3_json",
                 std::string(R"({"name": "searchTool", "parameters": {"query": "test1"}})") + sep +
                     R"({"name": "getOpenIncidentsTool", "parameters": {}})",
                 "", {{"searchTool", R"({"query": "test1"})"}, {"getOpenIncidentsTool", "{}"}});
  }
  expect_parse("llama3_json",
               R"({"name": "f", "parameters": {"q": 1}}; {"name": "g", "parameters": {}} done)",
               "done", {{"f", R"({"q": 1})"}, {"g", "{}"}});
  // vLLM test_llama3_json_tool_parser.py (json_fragment_in_trailing_text)
  expect_parse("llama3_json",
               R"({"name": "searchTool", "parameters": {"query": "test"}} )"
               R"(The arguments I passed were {"query": "test"})",
               R"(The arguments I passed were {"query": "test"})",
               {{"searchTool", R"({"query": "test"})"}});
}

TEST(Llama3JsonToolParser, NotCalls) {
  // vLLM test_llama3_json_tool_parser.py (no_json, invalid_json, missing_name_key,
  // missing_parameters_and_arguments_key): all content, unchanged.
  for (const char* text : {"This is just some text without any tool calls",
                           R"({"name": "invalidTool", "parameters": {invalid json})",
                           R"({"parameters": {}})", R"({"name": "toolWithoutParams"})",
                           "Use {braces} and {\"a\": 1} freely", "{", "<|python_tag|>brave_search."
                           "call(query=\"x\")", R"({"name": "John", "age": 30})"}) {
    expect_parse("llama3_json", text, text, {});
  }
}

// --- mistral --------------------------------------------------------------------------------

TEST(MistralToolParser, PreV11Array) {
  // vLLM tests/tool_parsers/test_mistral_tool_parser.py (pre_v11: single_tool_add, ...)
  expect_parse("mistral", R"([TOOL_CALLS][{"name": "add", "arguments":{"a": 3.5, "b": 4}}])", "",
               {{"add", R"({"a": 3.5, "b": 4})"}});
  expect_parse("mistral",
               R"([TOOL_CALLS] [{"arguments":{"city": "San Francisco", "state": "CA", )"
               R"("unit": "celsius"}, "name": "get_current_weather"}])",
               "",
               {{"get_current_weather",
                 R"({"city": "San Francisco", "state": "CA", "unit": "celsius"})"}});
  expect_parse("mistral", R"([TOOL_CALLS] [{"arguments":{"name": "John Doe"}, "name": "get_age"}])",
               "", {{"get_age", R"({"name": "John Doe"})"}});
  expect_parse("mistral",
               R"([TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, )"
               R"({"name": "get_current_weather", "arguments":{"city": "San Francisco", )"
               R"("state": "CA", "unit": "celsius"}}])",
               "",
               {{"add", R"({"a": 3.5, "b": 4})"},
                {"get_current_weather",
                 R"({"city": "San Francisco", "state": "CA", "unit": "celsius"})"}});
  expect_parse("mistral", R"(Hello[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}])",
               "Hello", {{"add", R"({"a": 1, "b": 2})"}});
  // vLLM test_mistral_tool_parser.py (streaming pre_v11: single_tool_add, trailing data)
  expect_parse("mistral", R"([TOOL_CALLS]  [ {"name":"add" , "arguments" : {"a": 3, "b": 4} } ])",
               "", {{"add", R"({"a": 3, "b": 4})"}});
  expect_parse("mistral",
               "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\":{\"city\": "
               "\"Dallas\", \"state\": \"TX\", \"unit\": \"fahrenheit\"}}]\nextra trailing data",
               "extra trailing data",
               {{"get_current_weather", R"({"city": "Dallas", "state": "TX", "unit": "fahrenheit"})"}});
  // llama.cpp test-chat.cpp (Mistral-Nemo-Instruct-2407): the model's "id" is ignored.
  expect_parse("mistral",
               R"([TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, )"
               R"("id": "123456789"}])",
               "", {{"special_function", R"({"arg1": 1})"}});
  // vLLM test_mistral_tool_parser.py (regex_fallback_fails): content (we keep the marker).
  expect_parse("mistral", "[TOOL_CALLS] not json at all", "[TOOL_CALLS] not json at all", {});
  expect_parse("mistral", "This is a test", "This is a test", {});
}

TEST(MistralToolParser, V11NameArgs) {
  // vLLM test_mistral_tool_parser.py (v11, [ARGS] skipped by the detokenizer)
  expect_parse("mistral", R"([TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4})", "",
               {{"add_this_and_that", R"({"a": 3.5, "b": 4})"}});
  expect_parse("mistral", R"([TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6})",
               "", {{"add", R"({"a": 3.5, "b": 4})"}, {"multiply", R"({"a": 3, "b": 6})"}});
  expect_parse("mistral", R"(bla[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4})", "bla",
               {{"add_this_and_that", R"({"a": 3.5, "b": 4})"}});
  // vLLM test_mistral_tool_parser.py ("complex": cut off inside the string)
  expect_parse("mistral",
               R"x(hi{hi[TOOL_CALLS]bash{"command": "print(\"hello world!\")\nre.compile(r'{}'))x",
               "hi{hi",
               {{"bash", R"x({"command": "print(\"hello world!\")\nre.compile(r'{}'))x", false}});
  // vLLM test_mistral_tool_parser.py ("wrong_json": in fact whole)
  expect_parse("mistral",
               R"x(hi{hi[TOOL_CALLS]bash{"command": "print(\"hello world!\")\nre.compile(r'{}')"})x",
               "hi{hi",
               {{"bash", R"x({"command": "print(\"hello world!\")\nre.compile(r'{}')"})x"}});
  // llama.cpp test-chat.cpp (Ministral-3, Devstral): with [ARGS]
  expect_parse("mistral", R"([TOOL_CALLS]special_function[ARGS]{"arg1":1})", "",
               {{"special_function", R"({"arg1":1})"}});
  expect_parse("mistral",
               R"([TOOL_CALLS]special_function[ARGS]{"arg1": 1})"
               R"([TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2})",
               "",
               {{"special_function", R"({"arg1": 1})"},
                {"special_function_with_opt", R"({"arg1": 1, "arg2": 2})"}});
  expect_parse("mistral", "Hello, world!\nWhat's up?[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}",
               "Hello, world!\nWhat's up?", {{"special_function", R"({"arg1": 1})"}});
  // vLLM test_mistral_tool_parser.py (v11_without_args): nothing to call; content.
  expect_parse("mistral", "[TOOL_CALLS]toolname_no_args", "[TOOL_CALLS]toolname_no_args", {});
}

TEST(MistralToolParser, CallIds) {
  // llama.cpp test-chat.cpp (Mistral-Small-3.2): [CALL_ID] gives the id.
  const auto r = expect_parse(
      "mistral",
      R"([TOOL_CALLS]special_function[CALL_ID]000000001[ARGS]{"arg1": 1})"
      R"([TOOL_CALLS]special_function_with_opt[CALL_ID]000000002[ARGS]{"arg1": 1, "arg2": 2})",
      "", {{"special_function", R"({"arg1": 1})"},
           {"special_function_with_opt", R"({"arg1": 1, "arg2": 2})"}});
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].id, "000000001");
  EXPECT_EQ(r.tool_calls[1].id, "000000002");
  // Generated Mistral ids are 9 alphanumerics (its templates reject others).
  auto p = make("mistral");
  const auto g = parse_tool_calls(*p, R"([TOOL_CALLS]f[ARGS]{"a": 1})");
  ASSERT_EQ(g.tool_calls.size(), 1u);
  EXPECT_EQ(g.tool_calls[0].id.size(), 9u);
}

// --- deepseek_v3 / deepseek_v31 -------------------------------------------------------------

TEST(DeepSeekV3ToolParser, Calls) {
  // vLLM tests/tool_parsers/test_deepseekv3_tool_parser.py (single, parallel, empty, surrounding)
  expect_parse("deepseek_v3",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
               "```json\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>"
               "<｜tool▁calls▁end｜>",
               "", {{"get_weather", R"({"city": "Tokyo", "unit": "celsius"})"}});
  expect_parse("deepseek_v3",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
               "```json\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>"
               "<｜tool▁call▁begin｜>function<｜tool▁sep｜>search_hotels\n```json\n{\"location\": "
               "\"Tokyo\", \"check_in\": \"2025-01-15\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "",
               {{"get_weather", R"({"city": "Tokyo", "unit": "celsius"})"},
                {"search_hotels", R"({"location": "Tokyo", "check_in": "2025-01-15"})"}});
  expect_parse("deepseek_v3",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_time\n"
               "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "", {{"get_current_time", "{}"}});
  expect_parse("deepseek_v3",
               "Let me check the weather for you.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
               "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>"
               "<｜tool▁calls▁end｜>",
               "Let me check the weather for you.", {{"get_weather", R"({"city": "Paris"})"}});
  // vLLM test_deepseekv3_tool_parser.py (escaped_strings)
  expect_parse("deepseek_v3",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>send_message\n"
               "```json\n{\"text\": \"He said \\\"hello\\\"\", \"path\": \"C:\\\\Users\\\\file\", "
               "\"newline\": \"line1\\nline2\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "",
               {{"send_message",
                 R"({"text": "He said \"hello\"", "path": "C:\\Users\\file", "newline": "line1\nline2"})"}});
  // llama.cpp test-chat.cpp (DeepSeek-R1-Distill-Qwen-32B): no newline before the fence.
  expect_parse("deepseek_v3",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n"
               "```json\n{\"arg1\": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "", {{"special_function", R"({"arg1": 1})"}});
}

TEST(DeepSeekV3ToolParser, Malformed) {
  // vLLM test_deepseekv3_tool_parser.py (malformed_input_outputs)
  // 1: the object is never closed; the header was streamed, so an incomplete call.
  expect_parse("deepseek_v3",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
               "```json\n{\"city\": \"Tokyo\"\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "", {{"get_weather", "{\"city\": \"Tokyo\"\n", false}});
  // 2: no <｜tool▁call▁begin｜>: not a call, content unchanged.
  const std::string no_call_begin =
      "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\"}\n"
      "```<｜tool▁calls▁end｜>";
  expect_parse("deepseek_v3", no_call_begin, no_call_begin, {});
}

TEST(DeepSeekV31ToolParser, Calls) {
  // vLLM tests/tool_parsers/test_deepseekv31_tool_parser.py (with_tool, multiple_tools):
  // vLLM drops " some suffix text"; we keep it.
  expect_parse("deepseek_v31",
               "normal text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}"
               "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "normal text", {{"foo", R"({"x":1})"}});
  expect_parse("deepseek_v31",
               "some prefix text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}"
               "<｜tool▁call▁end｜><｜tool▁call▁begin｜>bar<｜tool▁sep｜>{\"y\":2}<｜tool▁call▁end｜>"
               "<｜tool▁calls▁end｜> some suffix text",
               "some prefix text some suffix text", {{"foo", R"({"x":1})"}, {"bar", R"({"y":2})"}});
  // llama.cpp test-chat.cpp (DeepSeek-V3.1)
  expect_parse("deepseek_v31",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": "
               "\"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "", {{"get_time", R"({"city": "XYZCITY"})"}});
  // vLLM test_deepseekv31_tool_parser.py (unparsable_block): content unchanged.
  for (const char* text : {"Let me look that up.<｜tool▁calls▁begin｜>get_weather",
                           "<｜tool▁calls▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁calls▁end｜>"}) {
    expect_parse("deepseek_v31", text, text, {});
  }
}

// --- qwen3_coder, kimi_k2, granite ----------------------------------------------------------

nlohmann::json special_function_tools() {
  // llama.cpp test-chat.cpp's special_function_tool (arg1: integer) and its _with_opt twin.
  return nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "special_function",
      "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "special_function_with_opt",
      "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"},
                                                      "arg2": {"type": "integer"}}}}}])");
}

TEST(Qwen3CoderToolParser, Calls) {
  ToolParserOptions opts;
  opts.tools = special_function_tools();
  // llama.cpp test-chat.cpp (Qwen3-Coder)
  expect_parse("qwen3_coder",
               "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
               "</function>\n</tool_call>",
               "", {{"special_function", R"({"arg1": 1})"}}, opts);
  // llama.cpp test-chat.cpp (Qwen3-Coder: the opening <tool_call> skipped)
  expect_parse("qwen3_coder",
               "Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
               "</function>\n</tool_call>",
               "Let me call it.", {{"special_function", R"({"arg1": 1})"}}, opts);
  expect_parse("qwen3_coder",
               "<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n"
               "</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n"
               "1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>",
               "",
               {{"special_function", R"({"arg1": 1})"},
                {"special_function_with_opt", R"({"arg1": 1, "arg2": 2})"}},
               opts);
  // vLLM tests/reasoning/test_qwen3_reasoning_parser.py (TOOL_CALL_BODY): no schema -> string.
  expect_parse("qwen3_coder",
               "<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n"
               "</function>\n</tool_call>",
               "", {{"bash", R"({"command": "cat /etc/hosts"})"}});
  // Multi-line strings keep inner newlines; quotes are escaped; a value not of its type is a
  // string; a missing </parameter> ends at the next tag.
  expect_parse("qwen3_coder",
               "<tool_call>\n<function=special_function>\n<parameter=arg1>\nnot a number\n"
               "</parameter>\n<parameter=note>\nline \"1\"\n\nline 2\n<parameter=x>\n7\n</function>\n"
               "</tool_call>",
               "",
               {{"special_function",
                 R"({"arg1": "not a number", "note": "line \"1\"\n\nline 2", "x": "7"})"}},
               opts);
  // Truncated inside a value: an incomplete call.
  expect_parse("qwen3_coder", "<tool_call>\n<function=bash>\n<parameter=command>\nls -", "",
               {{"bash", R"({"command": "ls -")", false}});
}

TEST(KimiK2ToolParser, Calls) {
  // llama.cpp test-chat.cpp (moonshotai-Kimi-K2): the header is the id.
  const auto r = expect_parse(
      "kimi_k2",
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0"
      "<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>",
      "", {{"special_function", R"({"arg1": 1})"}});
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].id, "functions.special_function:0");
}

TEST(GraniteToolParser, Calls) {
  // vLLM tests/tool_parsers/test_granite_tool_parser.py (single, parallel, string prefix)
  expect_parse("granite", R"(<|tool_call|> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}])",
               "", {{"get_weather", R"({"city": "Tokyo"})"}});
  expect_parse("granite",
               "<|tool_call|> [\n  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}},\n"
               "  {\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}\n]",
               "",
               {{"get_weather", R"({"city": "Tokyo"})"},
                {"get_time", R"({"timezone": "Asia/Tokyo"})"}});
  expect_parse("granite", R"(<tool_call> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}])",
               "", {{"get_weather", R"({"city": "Tokyo"})"}});
  // vLLM test_granite_tool_parser.py (streaming_parallel_calls_batched_deltas)
  expect_parse("granite",
               R"(<|tool_call|> [{"arguments": {"city": "Tokyo"}, "name": "get_weather"}, )"
               R"({"arguments": {"timezone": "Asia/Tokyo"}, "name": "get_time"}])",
               "",
               {{"get_weather", R"({"city": "Tokyo"})"},
                {"get_time", R"({"timezone": "Asia/Tokyo"})"}});
  // vLLM test_granite_tool_parser.py (malformed_input_outputs[3]): no marker, content.
  expect_parse("granite", R"(Some text [{"name": "func"}])", R"(Some text [{"name": "func"}])", {});
}

// --- the JSON scanner underneath ------------------------------------------------------------

// What JsonScanner makes of a whole text: accepted iff one JSON value, then only whitespace.
bool scanner_accepts(const std::string& text, std::string* emitted) {
  JsonScanner scanner;
  size_t i = 0;
  for (; i < text.size() && !scanner.done(); ++i) {
    const JsonScanner::Result r = scanner.feed(text[i], emitted);
    if (r == JsonScanner::Result::kError) return false;
    if (r == JsonScanner::Result::kDoneBefore) break;
  }
  if (!scanner.complete_at_end()) return false;
  for (; i < text.size(); ++i) {
    if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r') return false;
  }
  return true;
}

TEST(JsonScanner, AgreesWithNlohmannOnRandomTexts) {
  const std::vector<std::string> pieces = {"{", "}", "[", "]", ",", ":", "\"k\"", "\"", "\\",
                                           "\\u00e9", "\\n", "0", "12", "-", ".5", "e", "E+",
                                           "true", "fals", "null", " ", "x", "é"};
  // (No raw newline: inside a string the scanner repairs it, where nlohmann rejects it.)
  std::mt19937 rng(5);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    std::string emitted;
    const bool ours = scanner_accepts(text, &emitted);
    ASSERT_EQ(ours, nlohmann::json::accept(text)) << text;
    if (ours) {
      ++accepted;
      EXPECT_TRUE(nlohmann::json::accept(emitted)) << emitted;
    }
  }
  EXPECT_GT(accepted, 300);
}

TEST(JsonScanner, RepairsStringsIntoValidJson) {
  std::string out;
  ASSERT_TRUE(scanner_accepts("{\"a\": \"x\ny\t\x01\"}", &out));  // raw control characters
  EXPECT_EQ(out, "{\"a\": \"x\\ny\\t\\u0001\"}");
  EXPECT_TRUE(nlohmann::json::accept(out));
  out.clear();
  JsonScanner s;
  for (char c : std::string("\"x\ny\xff\xc3\"")) (void)s.feed(c, &out);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(out, "\"x\\ny\xEF\xBF\xBD\xEF\xBF\xBD\"");  // \n escaped, bad bytes -> U+FFFD
  EXPECT_EQ(sanitize_utf8("a\xE2\x82\xAC" "b\xE2\x82"), "a\xE2\x82\xAC" "b\xEF\xBF\xBD");
}

// --- properties shared by every parser ------------------------------------------------------

// Well-formed outputs of each format (two calls, content around), to be mutated below.
const std::map<std::string, std::string>& seed_outputs() {
  static const std::map<std::string, std::string> seeds = {
      {"hermes",
       "Hi.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, \"x}\"], \"b\": null}}\n"
       "</tool_call>\n<tool_call>{\"arguments\": \"{\\\"k\\\": 2}\", \"name\": \"g\"}</tool_call> ok"},
      {"llama3_json",
       "Hi {x} <|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": -1.5e3}}; "
       "{\"type\": \"function\", \"name\": \"g\", \"parameters\": {\"s\": \"{\\\"\"}} ok"},
      {"mistral",
       "Hi[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"arguments\": {}, "
       "\"name\": \"g\"}][TOOL_CALLS]h[CALL_ID]abcdefghi[ARGS]{\"b\": true}[TOOL_CALLS]k{\"c\": []}"},
      {"deepseek_v3",
       "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```"
       "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{\"b\": \"```\"}```"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜> ok"},
      {"deepseek_v31",
       "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>"
       "<｜tool▁call▁begin｜>g<｜tool▁sep｜>{\"b\": {}}<｜tool▁call▁end｜><｜tool▁calls▁end｜> ok"},
      {"kimi_k2",
       "Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
       "{\"a\": 1}<|tool_call_end|><|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{}"
       "<|tool_call_end|><|tool_calls_section_end|> ok"},
      {"qwen3_coder",
       "Hi\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\nx \"y\"\nz\n"
       "</parameter>\n</function>\n</tool_call>\n<function=g>\n</function>\n</tool_call> ok"},
      {"granite",
       "Hi <|tool_call|> [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", "
       "\"arguments\": {}}] ok"},
  };
  return seeds;
}

TEST(ToolParsers, MutatedOutputsNeverCrashAndStaySplitInvariant) {
  // Truncations, deletions, insertions and swaps of well-formed outputs exercise every
  // half-finished and broken state of each format.
  const std::vector<std::string> junk = {"{", "}", "\"", ",", ":", "\\", "\n", " ", "<", "[", "]",
                                         "`", "x", "1", "é", ";"};
  std::mt19937 rng(42);
  for (const auto& [name, seed] : seed_outputs()) {
    ToolParserOptions opts;
    opts.id_seed = 7;
    {  // the seed itself parses into two complete calls
      auto p = make(name, opts);
      const ToolParseResult r = parse_tool_calls(*p, seed);
      EXPECT_GE(r.tool_calls.size(), 2u) << name << ": " << describe(r);
      for (const ToolCall& c : r.tool_calls) EXPECT_TRUE(c.complete) << name << ": " << describe(r);
    }
    int num_calls = 0;
    for (int trial = 0; trial < 300; ++trial) {
      std::string text = seed;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const size_t at = rng() % text.size();
        switch (rng() % 4) {
          case 0: text.resize(at); break;
          case 1: text.erase(at, 1 + rng() % 4); break;
          case 2: text.insert(at, junk[rng() % junk.size()]); break;
          case 3: std::swap(text[at], text[rng() % text.size()]); break;
        }
      }
      auto p = make(name, opts);
      const ToolParseResult whole = parse_tool_calls(*p, text);
      num_calls += static_cast<int>(whole.tool_calls.size());
      for (const ToolCall& c : whole.tool_calls) {
        if (c.complete) {
          EXPECT_TRUE(nlohmann::json::accept(c.arguments)) << name << ": " << text;
        }
      }
      std::vector<size_t> every;
      for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
      ASSERT_EQ(describe(stream(name, text, every, opts)), describe(whole))
          << name << " byte by byte: " << text;
      std::vector<size_t> cuts;
      for (size_t at = 0;;) {
        at += 1 + rng() % 6;
        if (at >= text.size()) break;
        cuts.push_back(at);
      }
      ASSERT_EQ(describe(stream(name, text, cuts, opts)), describe(whole)) << name << ": " << text;
    }
    EXPECT_GT(num_calls, 100) << name;  // many mutations still hold calls
  }
}

TEST(ToolParsers, CallIds) {
  ToolParserOptions seeded;
  seeded.id_seed = 1;
  auto a = make("hermes", seeded);
  auto b = make("hermes", seeded);
  const std::string text =
      R"(<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g", "arguments": {}}</tool_call>)";
  const auto ra = parse_tool_calls(*a, text);
  const auto rb = parse_tool_calls(*b, text);
  ASSERT_EQ(ra.tool_calls.size(), 2u);
  EXPECT_EQ(ra.tool_calls[0].id, rb.tool_calls[0].id);  // a seed makes them reproducible
  EXPECT_NE(ra.tool_calls[0].id, ra.tool_calls[1].id);
  for (const ToolCall& c : ra.tool_calls) {
    ASSERT_EQ(c.id.size(), 29u);
    EXPECT_EQ(c.id.substr(0, 5), "call_");
    for (char ch : c.id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
  }
  auto u1 = make_tool_parser("hermes").value();
  auto u2 = make_tool_parser("hermes").value();
  EXPECT_NE(parse_tool_calls(*u1, text).tool_calls[0].id,
            parse_tool_calls(*u2, text).tool_calls[0].id);  // unseeded: random
}

TEST(ToolParserRegistry, Names) {
  const auto names = tool_parser_names();
  for (const char* n : {"hermes", "llama3_json", "mistral", "deepseek_v3", "deepseek_v31",
                        "qwen3_coder", "granite", "kimi_k2"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    auto p = make_tool_parser(n);
    ASSERT_TRUE(p.ok());
  }
  EXPECT_EQ(make_tool_parser("llama4_json").value()->name(), "llama3_json");
  const auto bad = make_tool_parser("hermes2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'hermes2'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("deepseek_v3, deepseek_v31, granite, hermes"),
            std::string::npos)
      << bad.status().message();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ToolParserRegistry, DetectsEveryTemplateInSharedTestdata) {
  // "" = no tool calls in that template (SmolLM3's file here is Unsloth's edit without tools).
  const std::map<std::string, std::string> expected = {
      {"HuggingFaceTB-SmolLM3-3B", ""},
      {"Qwen-Qwen2.5-7B-Instruct", "hermes"},
      {"Qwen-Qwen3-0.6B", "hermes"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek_v3"},
      {"google-gemma-2-2b-it", ""},
      {"meta-llama-Llama-3.1-8B-Instruct", "llama3_json"},
      {"microsoft-Phi-3.5-mini-instruct", ""},
      {"mistralai-Mistral-Nemo-Instruct-2407", "mistral"},
  };
  const std::filesystem::path dir =
      std::filesystem::path(LLMSERVE_SHARED_DIR) / "testdata" / "chat_templates";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string stem = entry.path().stem().string();
    const auto it = expected.find(stem);
    ASSERT_NE(it, expected.end()) << "new template, add its expected parser: " << stem;
    EXPECT_EQ(detect_tool_parser(read_file(entry.path())).value_or(""), it->second) << stem;
    ++seen;
  }
  EXPECT_EQ(seen, static_cast<int>(expected.size()));
  // The tokenizer configs' templates: Llama 3 8B Instruct's has no tools, Qwen3's does.
  const std::filesystem::path tok = std::filesystem::path(LLMSERVE_SHARED_DIR) / "testdata" /
                                    "tokenizer";
  for (const auto& [name, want] : std::map<std::string, std::string>{{"hf-llama3", ""},
                                                                     {"hf-qwen3", "hermes"}}) {
    const auto cfg = nlohmann::json::parse(read_file(tok / name / "tokenizer_config.json"));
    EXPECT_EQ(detect_tool_parser(cfg.at("chat_template").get<std::string>()).value_or(""), want)
        << name;
  }
}

TEST(ToolParserRegistry, DetectsFormatsFromTemplateFragments) {
  // Fragments of templates in llama.cpp's models/templates/ (the lines that render calls).
  // Qwen3-Coder.jinja
  EXPECT_EQ(detect_tool_parser("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
                               "{{- '<parameter=' + args_name + '>\\n' }}"),
            "qwen3_coder");
  // deepseek-ai-DeepSeek-V3.1.jinja
  EXPECT_EQ(detect_tool_parser("{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']"
                               "['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + "
                               "'<｜tool▁call▁end｜>'}}"),
            "deepseek_v31");
  // moonshotai-Kimi-K2.jinja
  EXPECT_EQ(detect_tool_parser("<|tool_calls_section_begin|>{%- for tool_call in message"
                               "['tool_calls'] -%}<|tool_call_begin|>"),
            "kimi_k2");
  // ibm-granite-granite-3.3-2B-Instruct.jinja
  EXPECT_EQ(detect_tool_parser("{{- '<|tool_call|>' + message['tool_calls'] | tojson }}"),
            "granite");
  // Mistral-Small-3.2-24B-Instruct-2506.jinja
  EXPECT_EQ(detect_tool_parser("{{- '[TOOL_CALLS]' + tool.name + '[CALL_ID]' + tool_call.id + "
                               "'[ARGS]' + arguments }}"),
            "mistral");
  // Near misses that this library does not parse: GLM-4.6.jinja, ByteDance-Seed-OSS.jinja,
  // MiniMax-M3.jinja, meetkai-functionary-medium-v3.1.jinja.
  EXPECT_EQ(detect_tool_parser("<tool_call>{{ tc.name }}\n<arg_key>{{ k }}</arg_key>"), std::nullopt);
  EXPECT_EQ(detect_tool_parser("<seed:tool_call>\n<function={{ name }}>\n<parameter=x>"),
            std::nullopt);
  EXPECT_EQ(detect_tool_parser("<minimax:tool_call>\n<invoke name=\"{{ name }}\">"), std::nullopt);
  EXPECT_EQ(detect_tool_parser("<function={{ tool_call.name }}>{{ tool_call.arguments }}</function>"),
            std::nullopt);
  EXPECT_EQ(detect_tool_parser("{{ messages[0]['content'] }}"), std::nullopt);
}

}  // namespace
}  // namespace llmserve::tool_parsers
