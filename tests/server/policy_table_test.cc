// The request policy, table-driven: docs/api.md's Parameters table must list exactly the
// fields of the code's table (request_policy.cc) with the same endpoints, origin and fate, and
// every field, sent over HTTP to the fake engine, must be honoured with a valid value (200)
// and refused with a refused or invalid one (400 naming it). A field sent to an endpoint it
// does not belong to, or in no schema at all, is OpenAI's "Unrecognized request argument"
// 400; --ignore-unknown-fields turns that into a 200 with a log line and a response header.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "server/request_policy.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

struct DocRow {
  uint8_t endpoints = 0;
  std::string origin;
  std::string fate;
};

std::string trim(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

/// The rows of docs/api.md's "## Parameters" table, by field name.
std::map<std::string, DocRow> read_docs_table() {
  std::ifstream in(std::string(LLMSERVE_SOURCE_DIR) + "/docs/api.md");
  EXPECT_TRUE(in) << "docs/api.md not found";
  std::map<std::string, DocRow> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Parameters";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
    EXPECT_GE(cells.size(), 7u) << line;
    if (cells.size() < 7) continue;
    const std::string name = cells[0].substr(1, cells[0].find('`', 1) - 1);
    DocRow row;
    std::stringstream eps(cells[1]);
    std::string ep;
    while (std::getline(eps, ep, ',')) {
      ep = trim(ep);
      if (ep == "C") row.endpoints |= kEndpointCompletions;
      else if (ep == "Ch") row.endpoints |= kEndpointChat;
      else if (ep == "T") row.endpoints |= kEndpointTokenize;
      else if (ep == "D") row.endpoints |= kEndpointDetokenize;
      else ADD_FAILURE() << "unknown endpoint '" << ep << "' in: " << line;
    }
    row.origin = cells[2];
    row.fate = cells[3];
    EXPECT_TRUE(rows.emplace(name, row).second) << "docs/api.md lists " << name << " twice";
  }
  return rows;
}

const char* fate_name(FieldFate f) {
  switch (f) {
    case FieldFate::kHonoured: return "honoured";
    case FieldFate::kPartly: return "partly";
    case FieldFate::kRefused: return "refused";
  }
  return "?";
}

TEST(RequestPolicy, DocsTableMatchesTheCodeRowForRow) {
  const auto docs = read_docs_table();
  std::set<std::string> in_code;
  for (const RequestField& f : request_fields()) {
    const std::string name(f.name);
    in_code.insert(name);
    auto it = docs.find(name);
    if (it == docs.end()) {
      ADD_FAILURE() << "docs/api.md has no row for " << name;
      continue;
    }
    EXPECT_EQ(it->second.endpoints, f.endpoints) << name;
    EXPECT_EQ(it->second.origin, f.origin) << name;
    EXPECT_EQ(it->second.fate, fate_name(f.fate)) << name;
  }
  for (const auto& [name, row] : docs)
    EXPECT_TRUE(in_code.count(name)) << "docs/api.md documents " << name
                                     << ", which request_policy.cc does not know";
  EXPECT_GT(docs.size(), 80u);
}

/// One field's examples: `ok` must be a 200, `bad` a 400 naming `bad_param` (default: the
/// field). Fragments are JSON objects merged into the endpoint's minimal body.
struct Example {
  Endpoint endpoint;
  std::string ok;   // "" = none (a refused field without a neutral value)
  std::string bad;  // "" = none (a field with no invalid value here)
  std::string bad_param = "";
};

const std::map<std::string, Example>& examples() {
  constexpr Endpoint C = kEndpointCompletions, Ch = kEndpointChat, T = kEndpointTokenize,
                     D = kEndpointDetokenize;
  static const std::map<std::string, Example> m = {
      {"model", {C, R"({"model": "fake-model"})", R"({"model": 7})"}},
      {"prompt", {C, R"({"prompt": "xy"})", R"({"prompt": ""})"}},
      {"messages", {Ch, R"({"messages": [{"role": "user", "content": "hi"}]})", R"({"messages": []})"}},
      {"tokens", {D, R"({"tokens": [5, 6]})", R"({"tokens": "x"})"}},
      {"suffix", {C, R"({"suffix": ""})", R"({"suffix": "end"})"}},
      {"echo", {C, R"({"echo": true})", R"({"echo": "yes"})"}},
      {"add_special_tokens", {C, R"({"add_special_tokens": false})", R"({"add_special_tokens": "no"})"}},
      {"truncate_prompt_tokens", {C, R"({"truncate_prompt_tokens": 1})", R"({"truncate_prompt_tokens": 0})"}},
      {"prompt_embeds", {C, "", R"({"prompt_embeds": "abc"})"}},
      {"add_generation_prompt", {Ch, R"({"add_generation_prompt": false})", R"({"add_generation_prompt": "x"})"}},
      {"continue_final_message", {Ch, R"({"continue_final_message": true, "add_generation_prompt": false})", R"({"continue_final_message": 1})"}},
      {"documents", {Ch, R"({"documents": []})", R"({"documents": "x"})"}},
      {"chat_template_kwargs", {Ch, R"({"chat_template_kwargs": {"a": 1}})", R"({"chat_template_kwargs": "x"})"}},
      {"chat_template", {Ch, "", R"({"chat_template": "{{ 1 }}"})"}},
      {"mm_processor_kwargs", {Ch, "", R"({"mm_processor_kwargs": {}})"}},
      {"tools", {Ch, R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})",
                 R"({"tools": "x"})"}},
      {"tool_choice", {Ch, R"({"tool_choice": "none"})", R"({"tool_choice": 12345})"}},
      {"parallel_tool_calls", {Ch, R"({"parallel_tool_calls": false})", R"({"parallel_tool_calls": "notabool"})"}},
      {"functions", {Ch, "", R"({"functions": [{"name": "f"}]})"}},
      {"function_call", {Ch, "", R"({"function_call": "auto"})"}},
      {"max_tokens", {C, R"({"max_tokens": 2})", R"({"max_tokens": 0})"}},
      {"max_completion_tokens", {Ch, R"({"max_completion_tokens": 2})", R"({"max_completion_tokens": 0})"}},
      {"n_predict", {C, R"({"n_predict": 2})", R"({"n_predict": 100000})"}},
      {"min_tokens", {C, R"({"min_tokens": 1})", R"({"min_tokens": -1})"}},
      {"stop", {C, R"({"stop": "zz"})", R"({"stop": ""})"}},
      {"stop_token_ids", {C, R"({"stop_token_ids": [5]})", R"({"stop_token_ids": "5"})"}},
      {"ignore_eos", {C, R"({"ignore_eos": true})", R"({"ignore_eos": "yes"})"}},
      {"include_stop_str_in_output", {C, R"({"include_stop_str_in_output": true})", R"({"include_stop_str_in_output": 1})"}},
      {"temperature", {C, R"({"temperature": 0})", R"({"temperature": 3})"}},
      {"top_p", {C, R"({"top_p": 0.5})", R"({"top_p": 0})"}},
      {"top_k", {C, R"({"top_k": 5})", R"({"top_k": -2})"}},
      {"min_p", {C, R"({"min_p": 0.1})", R"({"min_p": 2})"}},
      {"presence_penalty", {C, R"({"presence_penalty": 1})", R"({"presence_penalty": 3})"}},
      {"frequency_penalty", {C, R"({"frequency_penalty": 1})", R"({"frequency_penalty": 3})"}},
      {"repetition_penalty", {C, R"({"repetition_penalty": 1.1})", R"({"repetition_penalty": 0})"}},
      {"logit_bias", {C, R"({"logit_bias": {"5": 10}})", R"({"logit_bias": "x"})"}},
      {"allowed_token_ids", {C, R"({"allowed_token_ids": [5, 6]})", R"({"allowed_token_ids": []})"}},
      {"bad_words", {C, R"({"bad_words": []})", R"({"bad_words": ["a"]})"}},
      {"seed", {C, R"({"seed": 1})", R"({"seed": "1"})"}},
      {"n", {C, R"({"n": 2})", R"({"n": 0})"}},
      {"best_of", {C, R"({"best_of": 1})", R"({"best_of": "x"})"}},
      {"use_beam_search", {C, R"({"use_beam_search": false})", R"({"use_beam_search": true})"}},
      {"length_penalty", {C, R"({"length_penalty": 1})", R"({"length_penalty": 2})"}},
      {"logits_processors", {C, R"({"logits_processors": []})", R"({"logits_processors": ["x"]})"}},
      {"priority", {C, R"({"priority": 0})", R"({"priority": 1})"}},
      {"stream", {C, R"({"stream": false})", R"({"stream": "x"})"}},
      {"stream_options", {C, R"({"stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}})",
                          R"({"stream": true, "stream_options": {"bogus": true}})"}},
      {"logprobs", {C, R"({"logprobs": 1})", R"({"logprobs": 21})"}},
      {"top_logprobs", {Ch, R"({"logprobs": true, "top_logprobs": 2})", R"({"logprobs": true, "top_logprobs": 21})"}},
      {"prompt_logprobs", {C, R"({"prompt_logprobs": 1})", R"({"prompt_logprobs": 21})"}},
      {"return_tokens_as_token_ids", {C, R"({"return_tokens_as_token_ids": true})", R"({"return_tokens_as_token_ids": 1})"}},
      {"skip_special_tokens", {C, R"({"skip_special_tokens": false})", R"({"skip_special_tokens": 1})"}},
      {"spaces_between_special_tokens", {C, "", R"({"spaces_between_special_tokens": true})"}},
      {"return_token_strs", {T, R"({"return_token_strs": true})", R"({"return_token_strs": 1})"}},
      {"parse_special", {T, R"({"parse_special": true})", R"({"parse_special": 1})"}},
      {"response_format", {C, R"({"response_format": {"type": "text"}})", R"({"response_format": {"type": "bogus"}})"}},
      {"modalities", {Ch, R"({"modalities": ["text"]})", R"({"modalities": ["audio"]})"}},
      {"audio", {Ch, "", R"({"audio": {"voice": "x"}})"}},
      {"prediction", {Ch, "", R"({"prediction": {"type": "content", "content": "x"}})"}},
      {"reasoning_effort", {Ch, "", R"({"reasoning_effort": "low"})"}},
      {"verbosity", {Ch, "", R"({"verbosity": "low"})"}},
      {"web_search_options", {Ch, "", R"({"web_search_options": {}})"}},
      {"guided_json", {C, R"({"guided_json": {"type": "object"}})", R"({"guided_json": 5})"}},
      {"guided_regex", {C, R"({"guided_regex": "a+"})", R"({"guided_regex": "(a"})"}},
      {"guided_choice", {C, R"({"guided_choice": ["a", "b"]})", R"({"guided_choice": []})"}},
      {"guided_grammar", {C, R"({"guided_grammar": "root ::= \"a\""})", R"({"guided_grammar": "root ::= ["})"}},
      {"guided_decoding_backend", {C, R"({"guided_decoding_backend": "auto"})", R"({"guided_decoding_backend": "xgrammar"})"}},
      {"guided_whitespace_pattern", {C, R"({"guided_json": {"type": "object"}, "guided_whitespace_pattern": " ?"})", R"({"guided_whitespace_pattern": " "})"}},
      {"structured_outputs", {C, R"({"structured_outputs": {"regex": "a+"}})", R"({"structured_outputs": {"regexp": "a+"}})"}},
      {"grammar", {C, R"({"grammar": "root ::= \"a\""})", R"({"grammar": "root ::= undefined"})"}},
      {"json_schema", {C, R"({"json_schema": {"type": "object"}})", R"({"json_schema": {"type": "object", "not": {}}})"}},
      {"cache_salt", {C, R"({"cache_salt": "tenant-a"})", R"({"cache_salt": ""})"}},
      {"prompt_cache_key", {C, R"({"prompt_cache_key": "k"})", R"({"prompt_cache_key": 1})"}},
      {"cache_prompt", {C, R"({"cache_prompt": false})", R"({"cache_prompt": 1})"}},
      {"user", {C, R"({"user": "u-1"})", R"({"user": 1})"}},
      {"safety_identifier", {C, R"({"safety_identifier": "s-1"})", R"({"safety_identifier": 1})"}},
      {"request_id", {C, "", R"({"request_id": "r"})"}},
      {"store", {Ch, R"({"store": false})", R"({"store": true})"}},
      {"metadata", {Ch, R"({"metadata": {}})", R"({"metadata": {"a": "b"}})"}},
      {"service_tier", {Ch, R"({"service_tier": "auto"})", R"({"service_tier": "flex"})"}},
      {"kv_transfer_params", {C, "", R"({"kv_transfer_params": {}})"}},
      {"vllm_xargs", {C, "", R"({"vllm_xargs": {}})"}},
      {"n_probs", {C, R"({"n_probs": 0})", R"({"n_probs": 5})"}},
      {"repeat_penalty", {C, R"({"repeat_penalty": 1})", R"({"repeat_penalty": 1.1})"}},
      {"typical_p", {C, R"({"typical_p": 1})", R"({"typical_p": 0.9})"}},
      {"mirostat", {C, R"({"mirostat": 0})", R"({"mirostat": 2})"}},
      {"samplers", {C, "", R"({"samplers": ["top_k"]})"}},
      {"repeat_last_n", {C, "", R"({"repeat_last_n": 64})"}},
      {"dry_multiplier", {C, R"({"dry_multiplier": 0})", R"({"dry_multiplier": 0.8})"}},
      {"xtc_probability", {C, R"({"xtc_probability": 0})", R"({"xtc_probability": 0.5})"}},
      {"top_n_sigma", {C, R"({"top_n_sigma": -1})", R"({"top_n_sigma": 1})"}},
      {"dynatemp_range", {C, R"({"dynatemp_range": 0})", R"({"dynatemp_range": 0.5})"}},
      {"n_keep", {C, R"({"n_keep": 0})", R"({"n_keep": 10})"}},
      {"id_slot", {C, R"({"id_slot": -1})", R"({"id_slot": 1})"}},
      {"t_max_predict_ms", {C, R"({"t_max_predict_ms": 0})", R"({"t_max_predict_ms": 100})"}},
      {"post_sampling_probs", {C, R"({"post_sampling_probs": false})", R"({"post_sampling_probs": true})"}},
      {"return_token_ids", {C, R"({"return_token_ids": true})", R"({"return_token_ids": 1})"}},
  };
  return m;
}

/// The smallest valid body of an endpoint, with `fragment` merged in (it wins).
json body_for(Endpoint endpoint, const std::string& fragment) {
  json body;
  switch (endpoint) {
    case kEndpointCompletions: body = {{"prompt", "ab"}, {"max_tokens", 2}}; break;
    case kEndpointChat:
      body = {{"messages", {{{"role", "user"}, {"content", "ab"}}}}, {"max_tokens", 2}};
      break;
    case kEndpointTokenize: body = {{"prompt", "ab"}}; break;
    case kEndpointDetokenize: body = {{"tokens", {5}}}; break;
  }
  if (!fragment.empty()) body.update(json::parse(fragment));
  // max_tokens alternatives replace it.
  if (body.contains("max_completion_tokens") || body.contains("n_predict")) body.erase("max_tokens");
  return body;
}

const char* path_of(Endpoint e) {
  switch (e) {
    case kEndpointCompletions: return "/v1/completions";
    case kEndpointChat: return "/v1/chat/completions";
    case kEndpointTokenize: return "/tokenize";
    case kEndpointDetokenize: return "/detokenize";
  }
  return "";
}

TEST(RequestPolicy, EveryFieldIsHonouredOrRefusedOverHttp) {
  TestServer ts;
  for (const RequestField& f : request_fields()) {
    const std::string name(f.name);
    SCOPED_TRACE(name);
    auto it = examples().find(name);
    ASSERT_NE(it, examples().end()) << "no example for " << name << " in this test";
    const Example& ex = it->second;
    EXPECT_TRUE(f.endpoints & ex.endpoint);
    const bool must_accept = f.fate != FieldFate::kRefused || !f.neutral.empty();
    const bool must_refuse = f.fate != FieldFate::kHonoured;
    EXPECT_EQ(!ex.ok.empty(), must_accept) << "honoured values need an ok example";
    if (must_refuse) {
      EXPECT_FALSE(ex.bad.empty()) << "refused fields need a bad example";
    }
    if (!ex.ok.empty()) {
      auto r = ts.post(path_of(ex.endpoint), body_for(ex.endpoint, ex.ok));
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200) << ex.ok << " -> " << r->body;
    }
    if (!ex.bad.empty()) {
      auto r = ts.post(path_of(ex.endpoint), body_for(ex.endpoint, ex.bad));
      expect_api_error(r, 400, ex.bad_param.empty() ? name : ex.bad_param, {});
      // A refusal says why / what to use, not only "unrecognized".
      if (r && f.fate == FieldFate::kRefused) {
        EXPECT_NE(r->body.find("not supported"), std::string::npos) << r->body;
      }
    }
  }
}

TEST(RequestPolicy, FieldsOfOtherEndpointsAndTyposAreUnrecognized) {
  TestServer ts;
  const Endpoint all[] = {kEndpointCompletions, kEndpointChat, kEndpointTokenize,
                          kEndpointDetokenize};
  for (const RequestField& f : request_fields())
    for (Endpoint ep : all) {
      if (f.endpoints & ep) continue;
      const std::string name(f.name);
      json body = body_for(ep, "");
      body[name] = nullptr;  // even null: the field does not exist here
      auto r = ts.post(path_of(ep), body);
      expect_api_error(r, 400, name, {"Unrecognized request argument supplied: " + name});
    }
  // Typos get a hint; OpenAI's message prefix is kept exactly.
  auto r = ts.post("/v1/completions", {{"prompt", "a"}, {"temprature", 0}});
  expect_api_error(r, 400, "temprature",
                   {"Unrecognized request argument supplied: temprature", "temperature"});
  r = ts.post("/v1/chat/completions",
              {{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"max_tokns", 3}});
  expect_api_error(r, 400, "max_tokns", {"did you mean 'max_tokens'"});
  // Unknown keys inside stream_options and response_format are named too.
  r = ts.post("/v1/completions", {{"prompt", "a"}, {"stream", true},
                                  {"stream_options", {{"include_usage", true}, {"x", 1}}}});
  expect_api_error(r, 400, "stream_options", {"stream_options.x"});
  r = ts.post("/v1/completions",
              {{"prompt", "a"}, {"response_format", {{"type", "text"}, {"schema", {}}}}});
  expect_api_error(r, 400, "response_format", {"response_format.schema"});
}

TEST(RequestPolicy, IgnoreUnknownFieldsAcceptsThemWithAWarningAndAHeader) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  spdlog::default_logger()->sinks().push_back(sink);
  ServerConfig config;
  config.ignore_unknown_fields = true;
  {
    TestServer ts(FakeEngineOptions{}, config);
    for (int i = 0; i < 2; ++i) {
      auto r = ts.post("/v1/completions", {{"prompt", "ab"}, {"max_tokens", 2},
                                           {"vendor_x", 1}, {"temprature", 0}});
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200) << r->body;
      EXPECT_EQ(r->get_header_value("X-LLMServe-Ignored-Fields"), "temprature, vendor_x");
    }
    // Refused fields stay refused, and a clean request has no header.
    expect_api_error(ts.post("/v1/completions", {{"prompt", "ab"}, {"best_of", 3}}), 400,
                     "best_of", {"use 'n'"});
    auto r = ts.post("/v1/completions", {{"prompt", "ab"}, {"max_tokens", 2}});
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_header("X-LLMServe-Ignored-Fields"));
  }
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::find(sinks.begin(), sinks.end(), sink));
  int vendor_lines = 0, typo_lines = 0;
  for (const std::string& line : sink->last_formatted()) {
    vendor_lines += line.find("ignoring unknown request field 'vendor_x'") != std::string::npos;
    typo_lines += line.find("ignoring unknown request field 'temprature'") != std::string::npos;
  }
  EXPECT_EQ(vendor_lines, 1);  // once per name, not per request
  EXPECT_EQ(typo_lines, 1);
}

TEST(RequestPolicy, ModelRetrieveAndVersionEndpoints) {
  TestServer ts;
  auto r = ts.get("/v1/models/fake-model");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json card = json::parse(r->body);
  EXPECT_EQ(card["id"], "fake-model");
  EXPECT_EQ(card["object"], "model");
  expect_api_error(ts.get("/v1/models/other"), 404, "model", {"other"});
  r = ts.get("/version");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(json::parse(r->body)["version"].is_string());
  // An unknown path stays a clear 404.
  expect_api_error(ts.get("/v1/nothing"), 404, std::nullopt, {"no such endpoint"});
}

}  // namespace
}  // namespace llmserve::testing

namespace llmserve::testing {
namespace {

TEST(RequestPolicy, HostileBodiesAreRefusedCheaply) {
  TestServer ts;
  // 200k logit_bias entries: refused on the object's size while parsing; 4000 on the count,
  // before any entry is read.
  const auto t0 = std::chrono::steady_clock::now();
  for (int n : {200000, 4000}) {
    std::string big = R"({"prompt": "ab", "max_tokens": 1, "logit_bias": {)";
    for (int i = 0; i < n; ++i) big += (i ? ",\"" : "\"") + std::to_string(i) + "\":1";
    big += "}}";
    expect_api_error(ts.post_raw("/v1/completions", big), 400, "logit_bias",
                     {n > 4096 ? "more than 4096 keys" : "at most 300"});
  }
  // An object of 100k keys anywhere (here chat_template_kwargs on chat): a 400 before the
  // ordered re-parse of the chat path.
  std::string kw = R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {)";
  for (int i = 0; i < 100000; ++i) kw += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  kw += "}}";
  auto r = ts.post_raw("/v1/chat/completions", kw);
  expect_api_error(r, 400, "chat_template_kwargs", {"more than 4096 keys"});
  // A 1 MB unknown field name: named, cut short, without a "did you mean" search.
  const std::string name(1 << 20, 'q');
  r = ts.post("/v1/completions", {{"prompt", "ab"}, {name, 1}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_LT(r->body.size(), 1000u);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20.0) << "hostile bodies took " << s << " s";  // generous: seconds, not minutes
}

TEST(RequestPolicy, ValuesThatWouldHaveNoEffectAreRefused) {
  TestServer ts;
  // priority under fcfs (vLLM refuses it too).
  expect_api_error(ts.post("/v1/completions", {{"prompt", "ab"}, {"priority", -5}}), 400,
                   "priority", {"--scheduling-policy priority"});
  // stop_token_ids + EOS covering the vocabulary while min_tokens masks them all.
  std::vector<int32_t> all(FakeTokenizer::kVocabSize);
  for (int32_t i = 0; i < FakeTokenizer::kVocabSize; ++i) all[i] = i;
  expect_api_error(ts.post("/v1/completions", {{"prompt", "ab"}, {"min_tokens", 2},
                                               {"stop_token_ids", all}}),
                   400, "stop_token_ids", {"whole vocabulary"});
  // /tokenize: chat fields with a text prompt, parse_special with messages.
  expect_api_error(ts.post("/tokenize", {{"prompt", "ab"}, {"add_generation_prompt", true}}), 400,
                   "add_generation_prompt", {"'messages' only"});
  expect_api_error(ts.post("/tokenize", {{"messages", {{{"role", "user"}, {"content", "a"}}}},
                                         {"parse_special", true}}),
                   400, "parse_special");
  // Extra keys in a content part.
  expect_api_error(ts.post("/v1/chat/completions",
                           {{"messages", {{{"role", "user"},
                                           {"content", {{{"type", "text"}, {"text", "hi"},
                                                         {"bogus", 1}}}}}}}}),
                   400, "messages", {"bogus"});
  // return_token_ids: the ids come back.
  auto r = ts.post("/v1/completions", {{"prompt", "ab"}, {"max_tokens", 3}, {"return_token_ids", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["choices"][0]["token_ids"].size(), 3u);
  EXPECT_EQ(body["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(),
            fake_encode("ab", true));
}

TEST(RequestPolicy, IgnoreUnknownFieldsStillRefusesKnownFieldsOfOtherEndpoints) {
  ServerConfig config;
  config.ignore_unknown_fields = true;
  TestServer ts(FakeEngineOptions{}, config);
  expect_api_error(ts.post("/v1/completions", {{"prompt", "ab"}, {"max_completion_tokens", 2}}),
                   400, "max_completion_tokens", {"/v1/chat/completions"});
  // The header stays bounded with many ignored names.
  json body = {{"prompt", "ab"}, {"max_tokens", 1}};
  for (int i = 0; i < 3000; ++i) body["vendor_field_" + std::to_string(i)] = 1;
  auto r = ts.post("/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string h = r->get_header_value("X-LLMServe-Ignored-Fields");
  EXPECT_LE(h.size(), 4200u);
  EXPECT_NE(h.find("more)"), std::string::npos);
}

}  // namespace
}  // namespace llmserve::testing
