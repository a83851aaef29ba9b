// Reasoning parsers, and the reasoning + tool-call chain (ChatOutputParser), on exact model
// outputs quoted from vLLM's tests/reasoning/ and llama.cpp's tests/test-chat.cpp (cited next
// to each). Expectations are this library's (reasoning_parser.h): where vLLM's differ, it is
// said. Every case is also streamed byte by byte, in every two-piece split and in random
// chunks, and must rebuild exactly the non-streamed result.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "server/tool_parsers/chat_output_parser.h"
#include "server/tool_parsers/tool_parser_registry.h"

namespace llmserve::tool_parsers {
namespace {

std::vector<std::vector<size_t>> splits(const std::string& text) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  out.push_back(every);
  for (size_t i = 1; i < text.size(); ++i) out.push_back({i});
  std::mt19937 rng(99);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> cuts;
    for (size_t at = 0;;) {
      at += 1 + rng() % 7;
      if (at >= text.size()) break;
      cuts.push_back(at);
    }
    out.push_back(cuts);
  }
  return out;
}

std::unique_ptr<ReasoningParser> reasoning(const std::string& name, ReasoningStart start) {
  auto p = make_reasoning_parser(name, {.start = start});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

void expect_reasoning(const std::string& name, const std::string& text,
                      const std::string& reasoning_content, const std::string& content,
                      ReasoningStart start = ReasoningStart::kDefault) {
  auto whole = reasoning(name, start);
  (void)whole->push(text);
  (void)whole->finish();
  EXPECT_EQ(whole->result().reasoning_content, reasoning_content) << name << ": " << text;
  EXPECT_EQ(whole->result().content, content) << name << ": " << text;
  for (const auto& cuts : splits(text)) {
    auto p = reasoning(name, start);
    ReasoningDelta joined;
    size_t at = 0;
    auto add = [&](const ReasoningDelta& d) {
      joined.reasoning_content += d.reasoning_content;
      joined.content += d.content;
    };
    for (size_t cut : cuts) {
      add(p->push(std::string_view(text).substr(at, cut - at)));
      at = cut;
    }
    add(p->push(std::string_view(text).substr(at)));
    add(p->finish());
    ASSERT_EQ(joined.reasoning_content, reasoning_content) << name << ": " << text;
    ASSERT_EQ(joined.content, content) << name << ": " << text;
  }
}

TEST(DeepSeekR1ReasoningParser, VllmCases) {
  // vLLM tests/reasoning/test_deepseekr1_reasoning_parser.py: the output starts in reasoning.
  const std::string n = "deepseek_r1";
  expect_reasoning(n, "This is a reasoning section</think>This is the rest",
                   "This is a reasoning section", "This is the rest");
  expect_reasoning(n, "This is a reasoning section</think>", "This is a reasoning section", "");
  expect_reasoning(n, "This is content", "This is content", "");  // no </think>: all reasoning
  expect_reasoning(n, "This\nThat</think>This is the rest\nThat", "This\nThat",
                   "This is the rest\nThat");
  expect_reasoning(n, "</think>This is the rest", "", "This is the rest");
  expect_reasoning(n, "<think>This is a reasoning section</think>This is the rest",
                   "This is a reasoning section", "This is the rest");
  expect_reasoning(n, "<think>This is a reasoning section</think>", "This is a reasoning section",
                   "");
  expect_reasoning(n, "<think>This\nThat</think>This is the rest\nThat", "This\nThat",
                   "This is the rest\nThat");
  expect_reasoning(n, "<think>This is a reasoning section", "This is a reasoning section", "");
  expect_reasoning(n, "", "", "");
  // NEW_LINE: whitespace around the tags is formatting (vLLM keeps "\n" before the content,
  // and streamed, before the reasoning too).
  expect_reasoning(n, "\n<think>This is a reasoning section</think>\nThis is the rest",
                   "This is a reasoning section", "This is the rest");
}

TEST(DeepSeekR1ReasoningParser, LlamaCppCases) {
  // llama.cpp tests/test-chat.cpp (DeepSeek-R1-Distill-Llama-8B / -Qwen-32B, forced open)
  expect_reasoning("deepseek_r1", "</think>Hello, world!\nWhat's up?", "",
                   "Hello, world!\nWhat's up?");
  expect_reasoning("deepseek_r1", "I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking",
                   "Hello, world!\nWhat's up?");
  // Partial tags are held back, then released as what they turned out to be.
  expect_reasoning("deepseek_r1", "a </thin b</think>c </thi", "a </thin b", "c </thi");
  expect_reasoning("deepseek_r1", "<thin", "<thin", "");
  // A prompt that closed the reasoning (thinking disabled): content unless the output opens it.
  expect_reasoning("deepseek_r1", "Plain answer", "", "Plain answer", ReasoningStart::kInContent);
}

TEST(Qwen3ReasoningParser, VllmCases) {
  // vLLM tests/reasoning/test_qwen3_reasoning_parser.py
  const std::string n = "qwen3";
  expect_reasoning(n, "<think>This is a reasoning section</think>This is the rest",
                   "This is a reasoning section", "This is the rest");
  expect_reasoning(n, "<think>This is a reasoning section</think>", "This is a reasoning section",
                   "");
  expect_reasoning(n, "<think>This is a reasoning\nsection</think>This is the rest\nThat",
                   "This is a reasoning\nsection", "This is the rest\nThat");
  expect_reasoning(n, "<think>This is a reasoning section", "This is a reasoning section", "");
  // Without <think> in the output, qwen3 is content (vLLM's parser before Qwen3.5), unless the
  // prompt opened the reasoning (Qwen3-Thinking-2507 / Qwen3.5 templates end in "<think>\n").
  expect_reasoning(n, "This is the rest", "", "This is the rest");
  expect_reasoning(n, "This is the rest", "This is the rest", "", ReasoningStart::kInReasoning);
  expect_reasoning(n, "This is a reasoning section</think>This is the rest",
                   "This is a reasoning section", "This is the rest", ReasoningStart::kInReasoning);
  // TOOL_CALL_WITH_THINK_NO_END / TOOL_CALL_NO_THINK_END: <tool_call> ends the reasoning.
  const std::string body =
      "<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n"
      "</function>\n</tool_call>";
  expect_reasoning(n, "<think>I need to read the file.\n\n" + body, "I need to read the file.\n\n",
                   body);
  expect_reasoning(n, "I need to read the file.\n\n" + body, "I need to read the file.\n\n", body,
                   ReasoningStart::kInReasoning);
  // THINKING_DISABLED cases
  expect_reasoning(n, "This is plain content", "", "This is plain content",
                   ReasoningStart::kInContent);
  expect_reasoning(n, "I need to read the file.\n\n" + body, "", "I need to read the file.\n\n" + body,
                   ReasoningStart::kInContent);
  // A <think> later in the content is content.
  expect_reasoning(n, "Answer: use <think> tags", "", "Answer: use <think> tags");
}

TEST(MistralReasoningParser, LlamaCppCases) {
  // llama.cpp test-chat.cpp (mistralai-Ministral-3-14B-Reasoning-2512)
  expect_reasoning("mistral", "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?",
                   "I'm\nthinking", "Hello, world!\nWhat's up?");
  expect_reasoning("mistral", "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?");
}

TEST(ReasoningParsers, Registry) {
  const auto names = reasoning_parser_names();
  EXPECT_EQ(names, (std::vector<std::string>{"deepseek_r1", "deepseek_v3", "mistral", "qwen3"}));
  const auto bad = make_reasoning_parser("r1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'r1'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("deepseek_r1, deepseek_v3, mistral, qwen3"),
            std::string::npos);
}

TEST(ReasoningParsers, StartFromPrompt) {
  // The generation prompts of the templates in ../shared/testdata/chat_templates:
  // DeepSeek-R1-Distill-Qwen-32B opens the reasoning, with enable_thinking=false closes it.
  EXPECT_EQ(reasoning_start_from_prompt("deepseek_r1", "<｜User｜>Hi<｜Assistant｜><think>\n"),
            ReasoningStart::kInReasoning);
  EXPECT_EQ(reasoning_start_from_prompt("deepseek_r1", "<｜User｜>Hi<｜Assistant｜><think>\n</think>"),
            ReasoningStart::kInContent);
  // Qwen3-0.6B: thinking on leaves the model to open it; off closes it in the prompt.
  EXPECT_EQ(reasoning_start_from_prompt("qwen3", "<|im_start|>user\nHi<|im_end|>\n"
                                                 "<|im_start|>assistant\n"),
            ReasoningStart::kDefault);
  EXPECT_EQ(reasoning_start_from_prompt("qwen3", "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            ReasoningStart::kInContent);
  // SmolLM3's system prompt mentions "<think> ... </think>": only the prompt's end counts.
  EXPECT_EQ(reasoning_start_from_prompt(
                "qwen3", "format: <think> Thought section </think> Solution section.<|im_end|>\n"
                         "<|im_start|>assistant\n"),
            ReasoningStart::kDefault);
  EXPECT_EQ(reasoning_start_from_prompt("no_such_parser", "<think>"), ReasoningStart::kDefault);
}

// --- the chain ------------------------------------------------------------------------------

struct ChainCase {
  std::string reasoning_parser;  // "" = none
  ReasoningStart start = ReasoningStart::kDefault;
  std::string tool_parser;       // "" = none
  std::string text;
  std::string reasoning_content;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

ChatOutputParser make_chain(const ChainCase& c) {
  std::unique_ptr<ReasoningParser> r;
  if (!c.reasoning_parser.empty()) r = reasoning(c.reasoning_parser, c.start);
  std::unique_ptr<ToolParser> t;
  if (!c.tool_parser.empty()) t = make_tool_parser(c.tool_parser, {.id_seed = 3}).value();
  return ChatOutputParser(std::move(r), std::move(t));
}

void expect_chain(const ChainCase& c) {
  auto whole = make_chain(c);
  (void)whole.push(c.text);
  (void)whole.finish();
  const ChatOutput out = whole.result();
  EXPECT_EQ(out.reasoning_content, c.reasoning_content) << c.text;
  EXPECT_EQ(out.content, c.content) << c.text;
  ASSERT_EQ(out.tool_calls.size(), c.calls.size()) << c.text;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(out.tool_calls[i].name, c.calls[i].first);
    EXPECT_EQ(out.tool_calls[i].arguments, c.calls[i].second);
  }
  EXPECT_EQ(whole.has_tool_calls(), !c.calls.empty());
  for (const auto& cuts : splits(c.text)) {
    auto p = make_chain(c);
    ChatOutput joined;
    auto add = [&](const ChatDelta& d) {
      joined.reasoning_content += d.reasoning_content;
      joined.content += d.content;
      for (const ToolCallDelta& t : d.tool_calls) {
        if (t.first()) {
          ASSERT_EQ(t.index, static_cast<int>(joined.tool_calls.size()));
          joined.tool_calls.push_back({t.index, t.id, t.name, "", false});
        }
        ASSERT_EQ(t.index, static_cast<int>(joined.tool_calls.size()) - 1);
        joined.tool_calls.back().arguments += t.arguments;
      }
    };
    size_t at = 0;
    for (size_t cut : cuts) {
      add(p.push(std::string_view(c.text).substr(at, cut - at)));
      at = cut;
    }
    add(p.push(std::string_view(c.text).substr(at)));
    add(p.finish());
    ASSERT_EQ(joined.reasoning_content, out.reasoning_content) << c.text;
    ASSERT_EQ(joined.content, out.content) << c.text;
    ASSERT_EQ(joined.tool_calls.size(), out.tool_calls.size());
    for (size_t i = 0; i < out.tool_calls.size(); ++i) {
      ASSERT_EQ(joined.tool_calls[i].id, out.tool_calls[i].id);
      ASSERT_EQ(joined.tool_calls[i].name, out.tool_calls[i].name);
      ASSERT_EQ(joined.tool_calls[i].arguments, out.tool_calls[i].arguments);
    }
  }
}

TEST(ChatOutputParser, ReasoningThenToolCalls) {
  // llama.cpp test-chat.cpp (llama-cpp-deepseek-r1.jinja): empty reasoning, then a call.
  expect_chain({"deepseek_r1", ReasoningStart::kDefault, "deepseek_v3",
                "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n"
                "```json\n{\"arg1\": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                "", "", {{"special_function", R"({"arg1": 1})"}}});
  // llama.cpp test-chat.cpp (DeepSeek-V3.1, thinking: the prompt ends in <think>)
  expect_chain({"deepseek_v3", ReasoningStart::kInReasoning, "deepseek_v31",
                "REASONING</think>CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time"
                "<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather"
                "<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                "REASONING", "CONTENT",
                {{"get_time", R"({"city": "Paris"})"}, {"get_weather", R"({"city": "Paris"})"}}});
  // llama.cpp test-chat.cpp (DeepSeek-V3.1): "REASONING</think>\nCONTENT"
  expect_chain({"deepseek_v3", ReasoningStart::kInReasoning, "deepseek_v31",
                "REASONING</think>\nCONTENT", "REASONING", "CONTENT", {}});
  // llama.cpp test-chat.cpp (Ministral-3: a fake tool-call marker in reasoning is reasoning)
  expect_chain({"mistral", ReasoningStart::kDefault, "mistral",
                "[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and "
                "more[/THINK][TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}",
                "Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more", "",
                {{"special_function", R"({"arg1": 1})"}}});
  // vLLM tests/reasoning/test_qwen3_reasoning_parser.py (TOOL_CALL_NO_THINK_END)
  expect_chain({"qwen3", ReasoningStart::kInReasoning, "qwen3_coder",
                "I need to read the file.\n\n<tool_call>\n<function=bash>\n<parameter=command>"
                "\ncat /etc/hosts\n</parameter>\n</function>\n</tool_call>",
                "I need to read the file.\n\n", "", {{"bash", R"({"command": "cat /etc/hosts"})"}}});
  // Qwen3 with its template's <think> written by the model, then a Hermes call.
  expect_chain({"qwen3", ReasoningStart::kDefault, "hermes",
                "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": "
                "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                "\nThe user wants the weather.\n", "", {{"get_weather", R"({"city": "Paris"})"}}});
  // Either parser may be absent.
  expect_chain({"", ReasoningStart::kDefault, "", "<think>x</think> y", "", "<think>x</think> y", {}});
  expect_chain({"deepseek_r1", ReasoningStart::kDefault, "", "x</think> y", "x", "y", {}});
  expect_chain({"", ReasoningStart::kDefault, "hermes",
                "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", "", "", {{"f", "{}"}}});
}

TEST(ChatOutputParser, OpenAiJsonShapes) {
  ChatOutputParser p(nullptr, make_tool_parser("hermes", {.id_seed = 3}).value());
  ChatDelta d = p.push("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  const nlohmann::json first = to_openai_json(d.tool_calls[0]);
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["id"].get<std::string>().substr(0, 5), "call_");
  EXPECT_EQ(first["function"]["name"], "f");
  EXPECT_EQ(first["function"]["arguments"], "{\"a\": 1");
  d = p.push("}}</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(to_openai_json(d.tool_calls[0]),
            nlohmann::json::parse(R"({"index": 0, "function": {"arguments": "}"}})"));
  (void)p.finish();
  const ChatOutput out = p.result();
  ASSERT_EQ(out.tool_calls.size(), 1u);
  const nlohmann::json msg = to_openai_json(out.tool_calls[0]);
  EXPECT_EQ(msg["type"], "function");
  EXPECT_EQ(msg["function"]["arguments"], "{\"a\": 1}");
  EXPECT_EQ(msg["id"], first["id"]);
  EXPECT_FALSE(msg.contains("index"));
}

TEST(ChatOutputParser, InReasoning) {
  ChatOutputParser p(reasoning("qwen3", ReasoningStart::kDefault), nullptr);
  EXPECT_FALSE(p.in_reasoning());
  (void)p.push("<think>hm");
  EXPECT_TRUE(p.in_reasoning());
  (void)p.push("</think>ok");
  EXPECT_FALSE(p.in_reasoning());
  ChatOutputParser r1(reasoning("deepseek_r1", ReasoningStart::kDefault), nullptr);
  EXPECT_TRUE(r1.in_reasoning());
}

}  // namespace
}  // namespace llmserve::tool_parsers
