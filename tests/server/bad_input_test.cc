// The bad-input contract over real loopback HTTP: every malformed or out-of-range request to
// /v1/completions and /v1/chat/completions gets a 4xx with an OpenAI-style error body
// ({"error": {message, type, param, code}}) whose `param` names the offending field (null
// only for whole-body problems: not JSON, not an object, invalid UTF-8, too large), and none
// of them crashes or hangs the server, reaches the engine or leaves a KV block or request
// behind. The limits come from the OpenAI / vLLM documentation (temperature [0, 2], top_p
// (0, 1], logprobs <= 20, ...) and from the served engine (max_model_len, vocabulary size).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../engine/reference_cases.h"
#include "engine/llm_engine.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

struct BadCase {
  const char* path;
  std::string body;
  int status;
  std::optional<std::string> param;  // nullopt: param must be null
  std::vector<std::string> message_has;
};

constexpr const char* kCmpl = "/v1/completions";
constexpr const char* kChat = "/v1/chat/completions";

/// A completions body: {"prompt": "x", <extra>}.
std::string cmpl(const std::string& extra) { return R"({"prompt": "x", )" + extra + "}"; }
/// A chat body: {"messages": [one user message], <extra>}.
std::string chat(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "x"}], )" + extra + "}";
}
/// A token-id prompt of `n` tokens (BOS + 'a'...) for the fake tokenizer.
std::string ids_prompt(size_t n) {
  std::vector<int32_t> ids(n, FakeTokenizer::byte_token('a'));
  ids[0] = 1;
  return json(ids).dump();
}

/// Every (field, wrong-typed value) pair, for both endpoints where the field applies.
std::vector<BadCase> wrong_type_cases() {
  struct Typed {
    const char* field;
    const char* value;
    bool completions, chat;
  };
  const std::vector<Typed> typed = {
      {"model", "7", true, true},
      {"max_tokens", R"("16")", true, true},
      {"max_tokens", "1.5", true, true},
      {"max_tokens", "true", true, true},
      {"max_completion_tokens", R"("x")", false, true},
      {"temperature", R"("NaN")", true, true},
      {"temperature", R"("0.5")", true, true},
      {"temperature", "[1]", true, true},
      {"top_p", R"("x")", true, true},
      {"top_k", "1.5", true, true},
      {"top_k", R"("5")", true, true},
      {"min_p", R"("a")", true, true},
      {"presence_penalty", "true", true, true},
      {"frequency_penalty", R"({"a": 1})", true, true},
      {"repetition_penalty", R"("1")", true, true},
      {"min_tokens", R"("1")", true, true},
      {"n", R"("two")", true, true},
      {"n", "1.5", true, true},
      {"seed", R"("42")", true, true},
      {"seed", "1.5", true, true},
      {"stop", "5", true, true},
      {"stop", "[1]", true, true},
      {"stop", R"({"a": "b"})", true, true},
      {"stop_token_ids", R"("5")", true, true},
      {"stop_token_ids", "[1.5]", true, true},
      {"stop_token_ids", "5", true, true},
      {"ignore_eos", R"("yes")", true, true},
      {"skip_special_tokens", "1", true, true},
      {"add_special_tokens", R"("no")", true, true},
      {"priority", R"("high")", true, true},
      {"priority", "1.5", true, true},
      {"user", "42", true, true},
      {"user", R"(["a"])", true, true},
      {"stream", R"("yes")", true, true},
      {"stream_options", "5", true, true},
      {"logprobs", R"("5")", true, false},
      {"logprobs", "true", true, false},
      {"logprobs", "3", false, true},
      {"top_logprobs", R"("2")", false, true},
      {"echo", R"("yes")", true, false},
      {"echo", "1", true, false},
      {"add_generation_prompt", R"("yes")", false, true},
      {"continue_final_message", "1", false, true},
      {"chat_template_kwargs", R"("x")", false, true},
      {"tools", R"("x")", false, true},
      {"tools", R"(["x"])", false, true},
      {"tools", R"([{"type": "bogus"}])", false, true},
      {"tools", R"([{"type": "function", "function": {"name": ""}}])", false, true},
      {"documents", "5", false, true},
  };
  std::vector<BadCase> cases;
  for (const Typed& t : typed) {
    const std::string extra = fmt::format(R"("{}": {})", t.field, t.value);
    if (t.completions) cases.push_back({kCmpl, cmpl(extra), 400, t.field, {t.field}});
    if (t.chat) cases.push_back({kChat, chat(extra), 400, t.field, {t.field}});
  }
  // Nested and prompt / messages shapes.
  cases.push_back({kCmpl, cmpl(R"("stream": true, "stream_options": {"include_usage": "y"})"),
                   400, "stream_options", {"include_usage"}});
  for (const char* prompt : {"123", "true", R"({"a": 1})", "[1.5]", R"([[1], [2]])", "[-1]",
                             "[1, \"x\"]", "[[\"x\"]]"})
    cases.push_back({kCmpl, fmt::format(R"({{"prompt": {}}})", prompt), 400, "prompt", {}});
  for (const char* messages :
       {R"("hi")", "5", R"([5])", R"([{"content": "x"}])", R"([{"role": 5, "content": "x"}])",
        R"([{"role": "", "content": "x"}])", R"([{"role": "user", "content": 5}])",
        R"([{"role": "user", "content": [{"type": "image_url"}]}])",
        R"([{"role": "user", "content": [{"type": "text", "text": 5}]}])",
        R"([{"role": "user", "content": [5]}])"})
    cases.push_back({kChat, fmt::format(R"({{"messages": {}}})", messages), 400, "messages", {}});
  return cases;
}

/// Out-of-range values and malformed bodies against the fake engine (max_model_len 256,
/// vocabulary 259 tokens).
std::vector<BadCase> value_cases() {
  const std::string invalid_utf8 = "{\"prompt\": \"a\xff\xfe z\"}";
  const std::string invalid_utf8_chat =
      "{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}";
  return {
      // Not JSON / not an object / not UTF-8: the whole body is to blame (param null).
      {kCmpl, "{not json", 400, std::nullopt, {"JSON"}},
      {kCmpl, R"({"prompt": "x",})", 400, std::nullopt, {"JSON"}},
      {kCmpl, "", 400, std::nullopt, {"JSON"}},
      {kCmpl, R"({"prompt": "x", "temperature": NaN})", 400, std::nullopt, {"JSON"}},
      {kCmpl, R"({"prompt": "x", "temperature": Infinity})", 400, std::nullopt, {"JSON"}},
      {kCmpl, "[1, 2]", 400, std::nullopt, {"object"}},
      {kChat, "\"hi\"", 400, std::nullopt, {"object"}},
      {kCmpl, invalid_utf8, 400, std::nullopt, {"body", "UTF-8"}},
      {kChat, invalid_utf8_chat, 400, std::nullopt, {"body", "UTF-8"}},
      // Missing / empty prompt and messages.
      {kCmpl, "{}", 400, "prompt", {"required"}},
      {kCmpl, R"({"prompt": null})", 400, "prompt", {"required"}},
      {kCmpl, R"({"prompt": ""})", 400, "prompt", {"empty"}},
      {kCmpl, R"({"prompt": [""]})", 400, "prompt", {"empty"}},
      {kCmpl, R"({"prompt": []})", 400, "prompt", {"empty"}},
      {kCmpl, R"({"prompt": [[]]})", 400, "prompt", {"empty"}},
      {kCmpl, R"({"prompt": ["a", "b"]})", 400, "prompt", {"2 prompts"}},
      {kChat, "{}", 400, "messages", {"required"}},
      {kChat, R"({"messages": []})", 400, "messages", {"empty"}},
      // Prompt length against max_model_len = 256 (at least one token must be generated).
      {kCmpl, R"({"prompt": )" + ids_prompt(256) + R"(, "max_tokens": 1})", 400, "prompt",
       {"256", "255"}},
      {kCmpl, R"({"prompt": )" + ids_prompt(256) + "}", 400, "prompt", {"256"}},
      {kCmpl, R"({"prompt": )" + ids_prompt(257) + R"(, "max_tokens": 1})", 400, "prompt",
       {"257", "256"}},
      {kCmpl, R"({"prompt": ")" + std::string(300, 'a') + R"("})", 400, "prompt", {"301"}},
      {kCmpl, R"({"prompt": )" + ids_prompt(255) + R"(, "max_tokens": 2})", 400, "max_tokens",
       {"257", "256"}},
      {kChat, chat(R"("user": "pad", "max_tokens": 300)"), 400, "max_tokens", {"300"}},
      {kChat, R"({"messages": [{"role": "user", "content": ")" + std::string(300, 'a') +
                  R"("}]})",
       400, "messages", {"256"}},
      {kCmpl, R"({"prompt": [1, 259]})", 400, "prompt", {"259"}},
      {kCmpl, R"({"prompt": [1, -3]})", 400, "prompt", {"-3"}},
      // max_tokens.
      {kCmpl, cmpl(R"("max_tokens": 0)"), 400, "max_tokens", {"0"}},
      {kCmpl, cmpl(R"("max_tokens": -1)"), 400, "max_tokens", {"-1"}},
      {kCmpl, cmpl(R"("max_tokens": 2147483647)"), 400, "max_tokens", {"2147483647"}},
      {kCmpl, cmpl(R"("max_tokens": 2147483648)"), 400, "max_tokens", {"2147483648"}},
      {kCmpl, cmpl(R"("max_tokens": 1e12)"), 400, "max_tokens", {}},
      {kCmpl, cmpl(R"("max_tokens": 18446744073709551616)"), 400, "*", {}},
      {kChat, chat(R"("max_completion_tokens": 0)"), 400, "max_completion_tokens", {"max_completion_tokens", "0"}},
      // n.
      {kCmpl, cmpl(R"("n": 0)"), 400, "n", {"0"}},
      {kCmpl, cmpl(R"("n": -1)"), 400, "n", {"-1"}},
      {kCmpl, cmpl(R"("n": 17)"), 400, "n", {"17", "16"}},
      {kChat, chat(R"("n": 1000000000)"), 400, "n", {"1000000000"}},
      {kCmpl, cmpl(R"("n": 1e300)"), 400, "n", {}},
      // temperature: OpenAI's [0, 2]. 1e400 overflows a double: a JSON error naming the
      // field whose value it is.
      {kCmpl, cmpl(R"("temperature": -0.01)"), 400, "temperature", {"-0.01"}},
      {kCmpl, cmpl(R"("temperature": 2.01)"), 400, "temperature", {"2.01"}},
      {kChat, chat(R"("temperature": 100)"), 400, "temperature", {"100"}},
      {kCmpl, cmpl(R"("temperature": 1e400)"), 400, "temperature",
       {"1e400", "beyond a 64-bit float's range", "(in 'temperature')"}},
      {kCmpl, cmpl(R"("temperature": -1e400)"), 400, "temperature", {"1e400"}},
      {kCmpl, cmpl(R"("temperature": 1e300)"), 400, "temperature", {"1e+300", "between 0 and 2"}},
      {kCmpl, cmpl(R"("top_p": 1e300)"), 400, "top_p", {"1e+300", "(0, 1]"}},
      {kCmpl, cmpl(R"("repetition_penalty": 1e300)"), 400, "repetition_penalty", {"1e+300"}},
      // Below a float's smallest magnitude: named as sent (was read, and reported, as 0).
      {kCmpl, cmpl(R"("top_p": 1e-50)"), 400, "top_p", {"1e-50", "32-bit float"}},
      {kChat, chat(R"("temperature": -1e-60)"), 400, "temperature", {"-1e-60", "between 0 and 2"}},
      {kCmpl, cmpl(R"("temperature": 1e-60)"), 400, "temperature", {"1e-60", "32-bit float"}},
      // A range is checked on the number as sent, before its float: not "too small".
      {kCmpl, cmpl(R"("top_p": -1e-50)"), 400, "top_p", {"-1e-50", "(0, 1]"}},
      {kCmpl, cmpl(R"("repetition_penalty": 1e-50)"), 400, "repetition_penalty",
       {"1e-50", "smallest magnitude"}},
      // Just beyond a bound: a float rounds these onto it (2, 1, -2), which passed.
      {kCmpl, cmpl(R"("temperature": 2.0000000001)"), 400, "temperature", {"2.0000000001"}},
      {kChat, chat(R"("top_p": 1.0000000001)"), 400, "top_p", {"1.0000000001"}},
      {kCmpl, cmpl(R"("presence_penalty": -2.0000000001)"), 400, "presence_penalty",
       {"-2.0000000001"}},
      {kCmpl, cmpl(R"("frequency_penalty": 2.0000000001)"), 400, "frequency_penalty",
       {"2.0000000001"}},
      {kCmpl, cmpl(R"("min_p": 1.0000000001)"), 400, "min_p", {"1.0000000001"}},
      {kCmpl, cmpl(R"("stream": true, "stream_options": {"x": [1e999]})"), 400,
       "stream_options", {"1e999"}},
      // top_p in (0, 1], top_k <= vocabulary, min_p in [0, 1].
      {kCmpl, cmpl(R"("top_p": 0)"), 400, "top_p", {"0"}},
      {kCmpl, cmpl(R"("top_p": -0.5)"), 400, "top_p", {"-0.5"}},
      {kChat, chat(R"("top_p": 1.01)"), 400, "top_p", {"1.01"}},
      {kCmpl, cmpl(R"("top_p": 1e400)"), 400, "top_p", {}},
      {kCmpl, cmpl(R"("top_k": 260)"), 400, "top_k", {"260", "259"}},
      {kChat, chat(R"("top_k": 2147483647)"), 400, "top_k", {"2147483647"}},
      {kCmpl, cmpl(R"("top_k": -2)"), 400, "top_k", {"-2"}},
      {kCmpl, cmpl(R"("top_k": 3000000000)"), 400, "top_k", {}},
      {kCmpl, cmpl(R"("min_p": 1.5)"), 400, "min_p", {"1.5"}},
      // Penalties.
      {kCmpl, cmpl(R"("presence_penalty": 2.5)"), 400, "presence_penalty", {"2.5"}},
      {kCmpl, cmpl(R"("frequency_penalty": -2.5)"), 400, "frequency_penalty", {"-2.5"}},
      {kCmpl, cmpl(R"("frequency_penalty": 1e400)"), 400, "frequency_penalty", {}},
      {kCmpl, cmpl(R"("repetition_penalty": 0)"), 400, "repetition_penalty", {"0", "must be > 0"}},
      // Named quoted, with the value as sent (was validate()'s float: -2.0000002).
      {kCmpl, cmpl(R"("repetition_penalty": -2.0000001)"), 400, "repetition_penalty",
       {"'repetition_penalty' must be > 0", "-2.0000001"}},
      {kChat, chat(R"("repetition_penalty": -1e-50)"), 400, "repetition_penalty", {"-1e-50", "> 0"}},
      {kCmpl, cmpl(R"("repetition_penalty": 1e400)"), 400, "repetition_penalty", {}},
      {kCmpl, cmpl(R"("min_tokens": -1)"), 400, "min_tokens", {"-1"}},
      {kCmpl, cmpl(R"("min_tokens": 5, "max_tokens": 4)"), 400, "min_tokens", {"5", "4"}},
      // Logprobs over OpenAI's limit of 20.
      {kCmpl, cmpl(R"("logprobs": 21)"), 400, "logprobs", {"21", "20"}},
      {kCmpl, cmpl(R"("logprobs": -1)"), 400, "logprobs", {"-1"}},
      {kChat, chat(R"("logprobs": true, "top_logprobs": 21)"), 400, "top_logprobs", {"21"}},
      {kChat, chat(R"("top_logprobs": 1)"), 400, "top_logprobs", {"logprobs"}},
      {kCmpl, cmpl(R"("echo": true, "logprobs": 21)"), 400, "logprobs", {"21"}},
      {kCmpl, cmpl(R"("echo": true, "max_tokens": 0)"), 400, "max_tokens", {"0"}},
      // Stops.
      {kCmpl, cmpl(R"("stop": [""])"), 400, "stop", {"empty"}},
      {kCmpl, cmpl(R"("stop": "")"), 400, "stop", {"empty"}},
      {kCmpl, cmpl(R"("stop": )" + json(std::vector<std::string>(65, "ab")).dump()), 400, "stop",
       {"64", "65"}},
      {kCmpl, cmpl(R"("stop_token_ids": [259])"), 400, "stop_token_ids", {"259"}},
      {kChat, chat(R"("stop_token_ids": [-1])"), 400, "stop_token_ids", {"-1"}},
      // Streaming options without streaming; an unknown model; chat's contradictory flags.
      {kCmpl, cmpl(R"("stream_options": {"include_usage": true})"), 400, "stream_options", {}},
      {kCmpl, cmpl(R"("model": "gpt-4")"), 404, "model", {"gpt-4"}},
      {kChat, chat(R"("continue_final_message": true)"), 400, "continue_final_message", {}},
  };
}

/// Sends every case; each must get its status, an OpenAI error body and its param.
void send_all(const TestServer& ts, const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + c.body.substr(0, 160));
    expect_api_error(ts.post_raw(c.path, c.body), c.status, c.param, c.message_has);
  }
}

/// `name`'s sample value on the /metrics page (first series), or -1.
double metric(const TestServer& ts, const std::string& name) {
  auto r = ts.get("/metrics");
  if (!r || r->status != 200) return -1;
  const size_t pos = r->body.find("\n" + name + "{");
  if (pos == std::string::npos) return -1;
  const size_t sp = r->body.find("} ", pos);
  return std::stod(r->body.substr(sp + 2));
}

/// Nothing is left in the engine: no KV block in use, no request running or waiting.
void expect_engine_idle(const TestServer& ts) {
  EXPECT_TRUE(wait_for([&] {
    return metric(ts, "llmserve:kv_blocks_used") == 0 &&
           metric(ts, "vllm:num_requests_running") == 0 &&
           metric(ts, "vllm:num_requests_waiting") == 0;
  })) << "blocks " << metric(ts, "llmserve:kv_blocks_used") << ", running "
      << metric(ts, "vllm:num_requests_running") << ", waiting "
      << metric(ts, "vllm:num_requests_waiting");
  EXPECT_EQ(metric(ts, "vllm:kv_cache_usage_perc"), 0.0);
}

TEST(BadInput, WrongTypesForEveryFieldAreA400NamingIt) {
  TestServer ts;
  send_all(ts, wrong_type_cases());
  EXPECT_EQ(ts.fake().num_added(), 0) << "a rejected request reached the engine";
  expect_engine_idle(ts);
  EXPECT_EQ(ts.fake().blocks_in_use(), 0);
}

TEST(BadInput, OutOfRangeValuesAndBrokenBodiesAre4xxNamingTheField) {
  TestServer ts;
  send_all(ts, value_cases());
  EXPECT_EQ(ts.fake().num_added(), 0) << "a rejected request reached the engine";
  expect_engine_idle(ts);
  EXPECT_EQ(ts.fake().blocks_in_use(), 0);
  // The server still serves.
  auto ok = ts.post(kCmpl, {{"prompt", "x"}, {"max_tokens", 2}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(BadInput, BoundaryValuesAndNeutralValuesOfRefusedFieldsAreAccepted) {
  TestServer ts;  // max_model_len 256, vocabulary 259
  const std::vector<std::string> good = {
      // The longest prompt that leaves room for one token, with and without max_tokens.
      R"({"prompt": )" + ids_prompt(255) + R"(, "max_tokens": 1})",
      R"({"prompt": )" + ids_prompt(255) + "}",
      cmpl(R"("max_tokens": 1)"),
      cmpl(R"("max_tokens": 254)"),  // BOS + 'x' + 254 = 256
      cmpl(R"("temperature": 0, "max_tokens": 1)"),
      cmpl(R"("temperature": 2, "max_tokens": 1)"),
      cmpl(R"("top_p": 1, "top_k": 259, "max_tokens": 1)"),
      cmpl(R"("top_p": 1e-30, "top_k": 0, "max_tokens": 1)"),
      cmpl(R"("top_k": -1, "min_p": 1, "max_tokens": 1)"),
      cmpl(R"("n": 16, "max_tokens": 1)"),
      cmpl(R"("logprobs": 20, "max_tokens": 1)"),
      cmpl(R"("logprobs": false, "echo": true, "max_tokens": 1)"),
      cmpl(R"("logprobs": null, "echo": true, "max_tokens": 1)"),
      cmpl(R"("presence_penalty": -2, "frequency_penalty": 2, "max_tokens": 1)"),
      cmpl(R"("seed": -1, "max_tokens": 1)"),
      cmpl(R"("user": "alice", "max_tokens": 1)"),
      cmpl(R"("max_tokens": 1, "stop": )" + json(std::vector<std::string>(64, "zz")).dump()),
      cmpl(R"("user": null, "temperature": null, "n": null, "max_tokens": 1)"),
      // Refused fields at the value that asks for nothing.
      cmpl(R"("max_tokens": 1, "best_of": 1, "use_beam_search": false, "suffix": "")"),
  };
  for (const std::string& body : good) {
    SCOPED_TRACE(body.substr(0, 160));
    auto r = ts.post_raw(kCmpl, body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  auto r = ts.post_raw(kChat, chat(R"("max_tokens": 1, "user": "bob",
                                     "temperature": 2, "top_logprobs": 20, "logprobs": true)"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  expect_engine_idle(ts);
}

TEST(BadInput, ChatTemplateThatRaisesIsA400) {
  ServerConfig config;
  config.chat_template =
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
      "supported') }}{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}";
  TestServer ts(FakeEngineOptions{}, config);
  const json bad = {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                  {{"role", "user"}, {"content", "Hi"}}}}};
  for (bool stream : {false, true}) {
    json body = bad;
    body["stream"] = stream;
    expect_api_error(ts.post(kChat, body), 400, std::nullopt, {"System role not supported"});
  }
  EXPECT_EQ(ts.fake().num_added(), 0);
  auto ok = ts.post(kChat, {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                            {"max_tokens", 1}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  expect_engine_idle(ts);
}

TEST(BadInput, TenMegabyteBodyIsRejectedWithAnErrorBody) {
  TestServer ts;
  // A 10 MB prompt: over the body limit (413) or, under a larger limit, far over
  // max_model_len (400 naming prompt). Either way an OpenAI error body, and no crash.
  const std::string body = R"({"prompt": ")" + std::string(10'000'000, 'a') + R"("})";
  for (const char* path : {kCmpl, kChat}) {
    auto r = ts.post_raw(path, path == kCmpl ? body
                                             : R"({"messages": [{"role": "user", "content": ")" +
                                                   std::string(10'000'000, 'a') + R"("}]})");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_TRUE(r->status == 413 || r->status == 400) << r->status;
    expect_api_error(r, r->status, "*", {});
  }
  EXPECT_EQ(ts.fake().num_added(), 0);
  expect_engine_idle(ts);
  EXPECT_EQ(ts.post(kCmpl, {{"prompt", "x"}, {"max_tokens", 1}})->status, 200);
}

// The same contract with the real engine (stories260K: vocabulary 512, max_model_len 512):
// the server's length and vocabulary checks agree with the engine's own.
TEST(BadInputRealEngine, LengthLimitsMatchTheEngineAndNothingLeaks) {
  EngineConfig c;
  c.model_path = stories_gguf();
  c.scheduler.max_model_len = 512;
  c.scheduler.check_invariants = true;
  c.cache.num_kv_blocks = 64;
  c.num_threads = 2;
  auto engine = LLMEngine::create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ServerConfig config;
  config.port = 0;
  TestServer ts(std::move(engine).value(), config);
  auto prompt = [](size_t n) {
    std::vector<int32_t> ids(n, 400);
    ids[0] = 1;
    return ids;
  };
  expect_api_error(ts.post(kCmpl, {{"prompt", prompt(512)}, {"max_tokens", 1}}), 400, "prompt",
                   {"512"});
  expect_api_error(ts.post(kCmpl, {{"prompt", prompt(512)}}), 400, "prompt", {"512"});
  expect_api_error(ts.post(kCmpl, {{"prompt", prompt(513)}}), 400, "prompt", {"513"});
  expect_api_error(ts.post(kCmpl, {{"prompt", prompt(511)}, {"max_tokens", 2}}), 400,
                   "max_tokens", {"513"});
  expect_api_error(ts.post(kCmpl, {{"prompt", {1, 512}}, {"max_tokens", 1}}), 400, "prompt",
                   {"512"});
  expect_api_error(ts.post(kCmpl, {{"prompt", "x"}, {"top_k", 513}}), 400, "top_k", {"513"});
  expect_api_error(ts.post(kCmpl, {{"prompt", "x"}, {"temperature", 2.5}}), 400, "temperature",
                   {"2.5"});
  expect_api_error(ts.post(kCmpl, {{"prompt", ""}}), 400, "prompt", {"empty"});
  expect_api_error(ts.post(kChat, {{"messages", json::array()}}), 400, "messages", {"empty"});
  // The longest prompt that fits: one token is generated.
  auto r = ts.post(kCmpl, {{"prompt", prompt(511)}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 511);
  EXPECT_EQ(body["usage"]["completion_tokens"], 1);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  // Same without max_tokens: it defaults to the one token left.
  r = ts.post(kCmpl, {{"prompt", prompt(511)}, {"temperature", 0}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 1);
  expect_engine_idle(ts);
}

}  // namespace
}  // namespace llmserve::testing
