// Every case of ../shared/testdata/chat_templates/reference_renderings.json (eight real model
// templates rendered by Python Jinja2 3.1 in transformers' environment) must render
// byte-identical to `expected`, or fail with exactly `error` (the template's raise_exception).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"

namespace llmserve {
namespace {

const std::string kDir = std::string(LLMSERVE_SHARED_DIR) + "/testdata/chat_templates/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RenderOptions fixed_time() {
  RenderOptions o;
  o.now = [] {
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 10;
    tm.tm_mday = 29;
    tm.tm_hour = 12;
    tm.tm_wday = 0;  // Sunday
    tm.tm_yday = 332;
    return tm;
  };
  return o;
}

TEST(ReferenceRenderings, EveryCaseMatchesJinja2) {
  std::ifstream in(kDir + "reference_renderings.json");
  ASSERT_TRUE(in) << "missing " << kDir;
  const auto doc = nlohmann::ordered_json::parse(in);
  const auto& cases = doc["cases"];
  ASSERT_GT(cases.size(), 0u);
  std::map<std::string, std::pair<int, int>> per_template;  // passed, total
  std::map<std::string, ChatTemplate> templates;
  for (const auto& c : cases) {
    const std::string name = c["template"].get<std::string>();
    if (!templates.count(name)) {
      auto t = ChatTemplate::parse(slurp(kDir + name + ".jinja"));
      ASSERT_TRUE(t.ok()) << name << ": " << t.status().message();
      templates.emplace(name, *t);
    }
    ChatTemplateInputs inputs;
    inputs.messages = c["messages"];
    inputs.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    inputs.bos_token = c["bos_token"].get<std::string>();
    inputs.eos_token = c["eos_token"].get<std::string>();
    auto r = render_chat(templates.at(name), inputs, fixed_time());
    const std::string label = name + " / " + c["conversation"].get<std::string>() +
                              (inputs.add_generation_prompt ? " / gen" : " / nogen");
    bool ok;
    if (c.contains("error")) {
      ok = !r.ok() && r.status().message() == c["error"].get<std::string>();
      EXPECT_TRUE(ok) << label << ": expected error '" << c["error"].get<std::string>() << "', got "
                      << (r.ok() ? "text: " + *r : "error: " + r.status().message());
    } else {
      ok = r.ok() && *r == c["expected"].get<std::string>();
      EXPECT_TRUE(ok) << label << "\n--- expected ---\n" << c["expected"].get<std::string>() << "\n--- got ---\n"
                      << (r.ok() ? *r : "error: " + r.status().message());
    }
    auto& [pass, total] = per_template[name];
    pass += ok;
    ++total;
  }
  for (const auto& [name, pt] : per_template)
    std::printf("[reference] %-45s %d/%d\n", name.c_str(), pt.first, pt.second);
}


// The same eight templates with tools, tool calls (dict and string arguments), tool results,
// reasoning content, odd whitespace and chat_template_kwargs, as Python Jinja2 renders them
// (model_template_cases.json, written by gen_jinja2_cases.py).
TEST(ModelTemplateCases, ToolsToolCallsAndKwargsMatchJinja2) {
  std::ifstream in(std::string(CHAT_TEMPLATE_TEST_DIR) + "/model_template_cases.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::ordered_json::parse(in);
  std::map<std::string, std::pair<int, int>> per_template;
  std::map<std::string, ChatTemplate> templates;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["template"].get<std::string>();
    if (!templates.count(name)) {
      auto t = ChatTemplate::parse(slurp(kDir + name + ".jinja"));
      ASSERT_TRUE(t.ok()) << name << ": " << t.status().message();
      templates.emplace(name, *t);
    }
    ChatTemplateInputs inputs;
    inputs.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    inputs.bos_token = "<s>";
    inputs.eos_token = "</s>";
    inputs.chat_template_kwargs = c["chat_template_kwargs"];
    if (c["tools"].get<bool>()) inputs.tools = doc["tools"];
    inputs.messages = doc["conversations"][c["conversation"].get<std::string>()];
    auto r = render_chat(templates.at(name), inputs, fixed_time());
    const std::string label = name + " / " + c["conversation"].get<std::string>() + " / " + c["chat_template_kwargs"].dump() +
                              (inputs.add_generation_prompt ? " / gen" : " / nogen");
    bool ok;
    if (c.contains("error")) {
      ok = !r.ok() && r.status().message() == c["error"].get<std::string>();
      EXPECT_TRUE(ok) << label << ": expected error '" << c["error"].get<std::string>() << "', got "
                      << (r.ok() ? "text: " + *r : "error: " + r.status().message());
    } else {
      ok = r.ok() && *r == c["expected"].get<std::string>();
      EXPECT_TRUE(ok) << label << "\n--- expected ---\n" << c["expected"].get<std::string>() << "\n--- got ---\n"
                      << (r.ok() ? *r : "error: " + r.status().message());
    }
    auto& [pass, total] = per_template[name];
    pass += ok;
    ++total;
  }
  for (const auto& [name, pt] : per_template)
    std::printf("[tools/kwargs] %-45s %d/%d\n", name.c_str(), pt.first, pt.second);
}

}  // namespace
}  // namespace llmserve
