// Unit tests of the server's pure parts: request parsing, errors, SSE, chat template, metrics.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/builtin_chat_template.h"
#include "server/metrics.h"
#include "server/protocol.h"
#include "server/responses.h"
#include "server/sse.h"

namespace llmserve {
namespace {

using nlohmann::json;

TEST(Protocol, PromptShapes) {
  CompletionRequest a;
  ASSERT_FALSE(parse_completion_request(json{{"prompt", "hi"}}, &a));
  EXPECT_EQ(a.prompt_text, "hi");

  CompletionRequest b;
  ASSERT_FALSE(parse_completion_request(json{{"prompt", {5, 6, 7}}}, &b));
  EXPECT_FALSE(b.prompt_text);
  EXPECT_EQ(b.prompt_token_ids, (std::vector<int32_t>{5, 6, 7}));

  CompletionRequest c;
  ASSERT_FALSE(parse_completion_request(json{{"prompt", {"one"}}}, &c));
  EXPECT_EQ(c.prompt_text, "one");

  CompletionRequest d;
  ASSERT_FALSE(parse_completion_request(json::parse(R"({"prompt": [[9, 8]]})"), &d));
  EXPECT_EQ(d.prompt_token_ids, (std::vector<int32_t>{9, 8}));

  CompletionRequest e;
  auto err = parse_completion_request(json{{"prompt", {"a", "b", "c"}}}, &e);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->http_status, 400);
  EXPECT_EQ(err->param, "prompt");
  EXPECT_NE(err->message.find("3 prompts"), std::string::npos) << err->message;
}

TEST(Protocol, OptionsAndDefaults) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion_request(
      json::parse(R"({"prompt": "x", "max_tokens": 7, "temperature": 0, "top_p": 0.5,
                      "top_k": 3, "seed": 42, "stop": "END", "stop_token_ids": [4, 5],
                      "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true}, "user": "u",
                      "some_future_field": {"x": 1}})"),
      &r));
  EXPECT_EQ(r.options.max_tokens, 7);
  EXPECT_EQ(r.options.params.temperature, 0.0f);
  EXPECT_EQ(r.options.params.top_p, 0.5f);
  EXPECT_EQ(r.options.params.top_k, 3);
  EXPECT_EQ(r.options.params.seed, 42u);
  EXPECT_EQ(r.options.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.options.params.stop_token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(r.options.params.ignore_eos);
  EXPECT_TRUE(r.options.stream);
  EXPECT_TRUE(r.options.include_usage);

  CompletionRequest d;  // nulls mean defaults
  ASSERT_FALSE(parse_completion_request(
      json::parse(R"({"prompt": "x", "max_tokens": null, "temperature": null, "stop": null})"),
      &d));
  EXPECT_FALSE(d.options.max_tokens);
  EXPECT_EQ(d.options.params.temperature, SamplingParams{}.temperature);
  EXPECT_TRUE(d.options.params.stop.empty());
  EXPECT_FALSE(d.options.stream);
}

TEST(Protocol, TypeErrorsNameFieldAndValue) {
  CompletionRequest r;
  auto err = parse_completion_request(json{{"prompt", "x"}, {"max_tokens", "abc"}}, &r);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "max_tokens");
  EXPECT_NE(err->message.find("\"abc\""), std::string::npos) << err->message;

  CompletionRequest r2;
  err = parse_completion_request(json{{"prompt", {1, 2.5}}}, &r2);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "prompt");
  EXPECT_NE(err->message.find("prompt[1]"), std::string::npos) << err->message;
}

TEST(Protocol, EchoUserAndApiRanges) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion_request(
      json::parse(R"({"prompt": "x", "echo": true, "user": "u-1", "top_k": 5,
                      "temperature": 2})"),
      &r));
  EXPECT_TRUE(r.options.echo);
  EXPECT_EQ(r.options.user, "u-1");
  EXPECT_TRUE(r.options.top_k_sent);
  EXPECT_EQ(r.options.params.temperature, 2.0f);
  EXPECT_EQ(r.options.params.prompt_logprobs, -1);  // echo alone needs no prompt logprobs
  CompletionRequest with_lp;
  ASSERT_FALSE(parse_completion_request(
      json::parse(R"({"prompt": "x", "echo": true, "logprobs": 3})"), &with_lp));
  EXPECT_EQ(with_lp.options.params.prompt_logprobs, 3);  // echo + logprobs: the prompt's too
  CompletionRequest plain;
  ASSERT_FALSE(parse_completion_request(json{{"prompt", "x"}}, &plain));
  EXPECT_FALSE(plain.options.echo);
  EXPECT_FALSE(plain.options.user);
  EXPECT_FALSE(plain.options.top_k_sent);

  struct Bad {
    const char* body;
    const char* param;
    const char* message_has;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"({"prompt": "x", "echo": "true"})", "echo", "echo"},
           {R"({"prompt": "x", "user": 7})", "user", "user"},
           {R"({"prompt": ""})", "prompt", "empty"},
           {R"({"prompt": [""]})", "prompt", "empty"},
           {R"({"prompt": "x", "temperature": 2.0001})", "temperature", "2.0001"},
           {R"({"prompt": "x", "temperature": -0.5})", "temperature", "-0.5"},
           {R"({"prompt": "x", "temperature": 1e300})", "temperature", "1e+300"},
           {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
            "stream_options", "include_usage"},
       }) {
    CompletionRequest out;
    auto err = parse_completion_request(json::parse(b.body), &out);
    ASSERT_TRUE(err) << b.body;
    EXPECT_EQ(err->http_status, 400);
    EXPECT_EQ(err->param, b.param) << b.body;
    EXPECT_NE(err->message.find(b.message_has), std::string::npos) << err->message;
  }
}

TEST(Protocol, JsonNumberOverflowNamesItsTopLevelField) {
  json body;
  auto err = parse_json_object(R"({"prompt": "x", "temperature": 1e400})", &body);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "temperature");
  err = parse_json_object(R"({"prompt": "x", "logit_bias": {"5": -1e999}, "n": 1})", &body);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "logit_bias");
  err = parse_json_object(R"([1e400])", &body);
  ASSERT_TRUE(err);
  EXPECT_FALSE(err->param);
  err = parse_json_object("{\"prompt\": \"\xff\"}", &body);  // invalid UTF-8
  ASSERT_TRUE(err);
  EXPECT_FALSE(err->param);
  EXPECT_NE(err->message.find("UTF-8"), std::string::npos) << err->message;
  EXPECT_FALSE(parse_json_object(R"({"prompt": "x", "temperature": 1e300})", &body));
}

TEST(Protocol, ChatMessages) {
  ChatCompletionRequest r;
  ASSERT_FALSE(parse_chat_request(
      json::parse(R"({"messages": [{"role": "system", "content": "S"},
                                   {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                {"type": "text", "text": "b"}]},
                                   {"role": "assistant", "content": null}],
                      "max_tokens": 3, "max_completion_tokens": 9,
                      "add_generation_prompt": false})"),
      &r));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.options.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_FALSE(r.add_generation_prompt);

  ChatCompletionRequest bad;
  auto err = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"), &bad);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "messages");
  EXPECT_NE(err->message.find("image_url"), std::string::npos) << err->message;
}

TEST(ApiError, FromStatusInfersParam) {
  ApiError e = api_error_from_status(InvalidArgument("top_p must be in (0, 1], got 1.5"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "top_p");
  e = api_error_from_status(InvalidArgument("stop_token_ids: token id 9 is outside"));
  EXPECT_EQ(e.param, "stop_token_ids");
  e = api_error_from_status(InvalidArgument("stopped early"));
  EXPECT_FALSE(e.param);
  e = api_error_from_status(ResourceExhausted("prompt has 300 tokens"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_FALSE(e.param);
  e = api_error_from_status(Status(StatusCode::kInternal, "boom"));
  EXPECT_EQ(e.http_status, 500);
  const json j = bad_request("m", "p").to_json();
  EXPECT_EQ(j, json::parse(R"({"error": {"message": "m", "type": "BadRequestError",
                                          "param": "p", "code": 400}})"));
}

TEST(Sse, EventFormatAndParserAcrossSplits) {
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  const std::string stream =
      std::string("data: {\"x\":1}\n\n: keep-alive\n\nevent: e\r\ndata: two\r\ndata: lines\r\n\r\n") +
      std::string(kSseDone);
  for (size_t split = 0; split <= stream.size(); ++split) {
    SseParser p;
    std::vector<std::string> got = p.feed(stream.substr(0, split));
    for (auto& s : p.feed(stream.substr(split))) got.push_back(s);
    ASSERT_EQ(got, (std::vector<std::string>{"{\"x\":1}", "two\nlines", "[DONE]"}))
        << "split at " << split;
  }
}

TEST(ChatTemplate, Builtin) {
  auto tpl = ChatTemplate::parse(kBuiltinChatTemplate);
  ASSERT_TRUE(tpl.ok()) << tpl.status().message();
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  in.bos_token = "<s>";
  in.add_generation_prompt = true;
  EXPECT_EQ(*render_chat(*tpl, in), "<s>system: Be brief.\nuser: Hi\nassistant:");
  in.add_generation_prompt = false;
  EXPECT_EQ(*render_chat(*tpl, in), "<s>system: Be brief.\nuser: Hi\n");
}

TEST(Responses, ShapesAndIds) {
  ResponseMeta meta{ApiKind::kChat, make_response_id(ApiKind::kChat), 123, "m"};
  EXPECT_EQ(meta.id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(meta.id.size(), 9u + 32u);
  EXPECT_NE(make_response_id(ApiKind::kCompletion), make_response_id(ApiKind::kCompletion));
  json full = full_response(meta, "hey", FinishReason::kLength, Usage{3, 2});
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "hey");
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(full["usage"]["total_tokens"], 5);
  json chunk = delta_chunk(meta, "", FinishReason::kStop, false);
  EXPECT_EQ(chunk["choices"][0]["delta"], json::object());
  EXPECT_FALSE(chunk.contains("usage"));
  EXPECT_TRUE(delta_chunk(meta, "x", FinishReason::kNone, true)["usage"].is_null());
  EXPECT_TRUE(delta_chunk(meta, "x", FinishReason::kNone, true)["choices"][0]["finish_reason"]
                  .is_null());
}

TEST(Metrics, HistogramIsCumulative) {
  Histogram h({0.001, 0.005, 1.0});
  for (double v : {0.0005, 0.001, 0.003, 7.0}) h.observe(v);
  std::string out;
  h.render("t", "model_name=\"m\"", &out);
  EXPECT_EQ(out.substr(0, out.find("t_sum")),
            "t_bucket{model_name=\"m\",le=\"0.001\"} 2\n"
            "t_bucket{model_name=\"m\",le=\"0.005\"} 3\n"
            "t_bucket{model_name=\"m\",le=\"1.0\"} 3\n"
            "t_bucket{model_name=\"m\",le=\"+Inf\"} 4\n");
  EXPECT_NE(out.find("t_count{model_name=\"m\"} 4\n"), std::string::npos) << out;
  EXPECT_NEAR(h.sum(), 7.0045, 1e-12);
  EXPECT_NE(out.find("t_sum{model_name=\"m\"} 7.004"), std::string::npos) << out;
  EXPECT_EQ(prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, RecordsTimingOfFinishedRequests) {
  ServerMetrics m;
  RequestOutput out;
  out.finished = true;
  out.finish_reason = FinishReason::kLength;
  out.timing.arrival_time = 100.0;
  out.timing.first_token_time = 100.03;  // TTFT 0.03 -> first bucket 0.04
  out.timing.finished_time = 101.2;      // e2e 1.2 -> first bucket 1.5
  m.record_finished(out);
  m.record_abort();
  EngineStats stats;
  stats.num_running = 2;
  stats.kv_cache_usage = 0.25;
  const std::string page = m.render(stats, "m");
  auto has = [&](const std::string& line) {
    return page.find(line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(has("# TYPE vllm:num_requests_running gauge")) << page;
  EXPECT_TRUE(has("vllm:num_requests_running{model_name=\"m\"} 2.0")) << page;
  EXPECT_TRUE(has("vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25")) << page;
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.02\"} 0"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.04\"} 1"));
  EXPECT_TRUE(has("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"1.0\"} 0"));
  EXPECT_TRUE(has("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"1.5\"} 1"));
  EXPECT_TRUE(has("vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 1"));
  EXPECT_TRUE(has("vllm:request_success_total{model_name=\"m\",finished_reason=\"length\"} 1.0"));
  EXPECT_TRUE(has("vllm:request_success_total{model_name=\"m\",finished_reason=\"abort\"} 1.0"));
}

}  // namespace
}  // namespace llmserve

namespace llmserve {
namespace {

TEST(Protocol, DeeplyNestedBodiesAreRejectedNotCrashing) {
  nlohmann::json out;
  const std::string deep = "{\"prompt\":\"hi\",\"stop\":" + std::string(100000, '[') +
                           std::string(100000, ']') + "}";
  auto err = parse_json_object(deep, &out);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->http_status, 400);
  EXPECT_NE(err->message.find("deeper"), std::string::npos);
  // Brackets inside strings do not count; moderate nesting is fine.
  const std::string ok = "{\"prompt\":\"" + std::string(1000, '[') + "\",\"x\":[[[[1]]]]}";
  EXPECT_FALSE(parse_json_object(ok, &out).has_value());
}

}  // namespace
}  // namespace llmserve

namespace llmserve {
namespace {

TEST(Protocol, PriorityFieldIsReadAndTypeChecked) {
  CompletionRequest req;
  ASSERT_FALSE(parse_completion_request(nlohmann::json{{"prompt", "x"}, {"priority", -3}}, &req));
  EXPECT_EQ(req.options.priority, -3);
  CompletionRequest bad;
  auto err = parse_completion_request(nlohmann::json{{"prompt", "x"}, {"priority", "high"}}, &bad);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "priority");
}

}  // namespace
}  // namespace llmserve
