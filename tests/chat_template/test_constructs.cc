// Per-construct checks. The bulk: jinja2_cases.json, ~130 small templates (whitespace control,
// trim_blocks/lstrip_blocks, loop variables, namespaces, macros/call/filter blocks, tests,
// filters, slicing, tojson, str/dict methods, globals, runtime errors) whose expected output or
// error text was produced by Python Jinja2 itself in transformers' environment
// (gen_jinja2_cases.py). Then API-level checks: syntax errors with line numbers, render_chat's
// context and continue_final_message.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"

namespace llmserve {
namespace {

RenderOptions fixed_time() {
  RenderOptions o;
  o.now = [] {
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 10;
    tm.tm_mday = 29;
    tm.tm_hour = 12;
    tm.tm_wday = 0;
    tm.tm_yday = 332;
    return tm;
  };
  return o;
}

Expected<std::string> render(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  auto t = ChatTemplate::parse(src);
  if (!t.ok()) return t.status();
  return t->render(ctx, fixed_time());
}

TEST(Jinja2Cases, MatchPythonJinja2) {
  std::ifstream in(std::string(CHAT_TEMPLATE_TEST_DIR) + "/jinja2_cases.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::ordered_json::parse(in);
  int passed = 0, total = 0;
  for (const auto& c : doc["cases"]) {
    ++total;
    const std::string name = c["name"].get<std::string>();
    auto r = render(c["template"].get<std::string>(), c["context"]);
    if (c.contains("expected")) {
      const std::string want = c["expected"].get<std::string>();
      EXPECT_TRUE(r.ok() && *r == want) << name << "\n  template: " << c["template"].get<std::string>()
                                        << "\n  expected: [" << want << "]\n  got:      "
                                        << (r.ok() ? "[" + *r + "]" : "error: " + r.status().message());
      passed += r.ok() && *r == want;
    } else {
      const std::string want = c["error"].get<std::string>();
      EXPECT_TRUE(!r.ok() && r.status().message() == want)
          << name << "\n  template: " << c["template"].get<std::string>() << "\n  expected error: " << want
          << "\n  got: " << (r.ok() ? "text [" + *r + "]" : "error: " + r.status().message());
      passed += !r.ok() && r.status().message() == want;
    }
  }
  std::printf("[jinja2 cases] %d/%d\n", passed, total);
}

TEST(Syntax, ErrorsNameTheLine) {
  auto t = ChatTemplate::parse("line1\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().rfind("syntax error at line 3:", 0), 0u) << t.status().message();
  t = ChatTemplate::parse("{% if x %}\nno end");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("endif"), std::string::npos) << t.status().message();
  t = ChatTemplate::parse("\n\n{% frobnicate %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "syntax error at line 3: unknown tag 'frobnicate'");
  t = ChatTemplate::parse("{{ 'unterminated }}");
  EXPECT_FALSE(t.ok());
  t = ChatTemplate::parse("{% for x in y %}{% endif %}");
  EXPECT_FALSE(t.ok());
  t = ChatTemplate::parse("{% break %}");
  EXPECT_FALSE(t.ok());
  t = ChatTemplate::parse("{{ (1, 2 }}");
  EXPECT_FALSE(t.ok());
  t = ChatTemplate::parse("{# never closed");
  EXPECT_FALSE(t.ok());
}

TEST(Render, ContextKeepsInsertionOrderWithOrderedJson) {
  auto ctx = nlohmann::ordered_json::parse(R"({"d": {"z": 1, "a": {"y": [1, 2.5, "é"]}}})");
  auto r = render("{{ d|tojson }}|{{ d|tojson(indent=2) }}", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "{\"z\": 1, \"a\": {\"y\": [1, 2.5, \"é\"]}}|{\n  \"z\": 1,\n  \"a\": {\n    \"y\": [\n      1,\n"
                "      2.5,\n      \"é\"\n    ]\n  }\n}");
}

TEST(Render, RaiseExceptionMessageIsVerbatim) {
  auto r = render("{% if true %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(Render, TemplateIsReusableAndThreadCompatible) {
  auto t = ChatTemplate::parse("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 3; ++i) {
    nlohmann::ordered_json ctx = {{"messages", nlohmann::ordered_json::array({1, 2, 3})}};
    auto r = t->render(ctx);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, "3");
  }
}

const char* kChatml =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST(RenderChat, BuildsTransformersContext) {
  auto t = ChatTemplate::parse(
      "{{ bos_token }}|{{ eos_token }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ messages|length }}|"
      "{{ enable_thinking }}|{{ custom is defined }}");
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = true;
  in.chat_template_kwargs = {{"enable_thinking", false}};
  auto r = render_chat(*t, in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<s>|</s>|None|None|True|1|False|False");
  in.chat_template_kwargs = {{"messages", 1}};
  EXPECT_FALSE(render_chat(*t, in).ok());
}

TEST(RenderChat, ContinueFinalMessage) {
  auto t = ChatTemplate::parse(kChatml);
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}])");
  in.continue_final_message = true;
  auto r = render_chat(*t, in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nThe answer is");
  // Trailing whitespace the template trims: cut after the stripped content.
  auto t2 = ChatTemplate::parse("{% for m in messages %}[{{ m.content|trim }}]{% endfor %}");
  ASSERT_TRUE(t2.ok());
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "assistant", "content": "  go on  "}])");
  r = render_chat(*t2, in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "[go on");
  // Content blocks: the last text block.
  in.messages = nlohmann::ordered_json::parse(
      R"([{"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}])");
  auto t3 = ChatTemplate::parse("{% for m in messages %}{% for c in m.content %}<{{ c.text }}>{% endfor %}{% endfor %}");
  ASSERT_TRUE(t3.ok());
  r = render_chat(*t3, in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<A><B");
  // Content not in the output, and the flag combined with add_generation_prompt: errors.
  auto t4 = ChatTemplate::parse("{% for m in messages %}x{% endfor %}");
  ASSERT_TRUE(t4.ok());
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "assistant", "content": "zzz"}])");
  r = render_chat(*t4, in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("final message does not appear"), std::string::npos);
  in.add_generation_prompt = true;
  r = render_chat(*t, in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not compatible"), std::string::npos);
}

TEST(RenderChat, StrftimeNowUsesInjectedClock) {
  auto t = ChatTemplate::parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  auto r = render_chat(*t, ChatTemplateInputs{}, fixed_time());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "29 Nov 2026");
}

TEST(RenderChat, GenerationBlockOfAssistantTrackerRendersItsBody) {
  auto r = render("a{% generation %}b{% endgeneration %}c");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "abc");
}

}  // namespace
}  // namespace llmserve
