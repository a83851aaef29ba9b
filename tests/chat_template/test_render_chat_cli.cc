// `llmserve render-chat` through the binary: exact stdout (no added newline), errors on stderr
// with exit 1, both messages-file shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../cli/cli_runner.h"
#include "../models/gguf_rewrite.h"

namespace llmserve {
namespace {

using testing::run_llmserve;

std::string quote(const std::string& s) { return "'" + s + "'"; }
const std::string kDir = std::string(LLMSERVE_SHARED_DIR) + "/testdata/chat_templates/";

std::string write(const std::string& name, const std::string& content) {
  const std::string path = testing::temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(RenderChatCli, MatchesReferenceCases) {
  std::ifstream in(kDir + "reference_renderings.json");
  const auto doc = nlohmann::ordered_json::parse(in);
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    // One case with and one without a generation prompt per template, plus every error case.
    const std::string conv = c["conversation"].get<std::string>();
    if (conv != "multi_turn" && conv != "system_user") continue;
    const std::string msgs = write("m.json", c["messages"].dump());
    std::string args = "render-chat --chat-template " + quote(kDir + c["template"].get<std::string>() + ".jinja") +
                       " --messages-file " + quote(msgs) + " --bos-token " + quote(c["bos_token"].get<std::string>()) +
                       " --eos-token " + quote(c["eos_token"].get<std::string>());
    if (c["add_generation_prompt"].get<bool>()) args += " --add-generation-prompt";
    auto r = run_llmserve(args);
    if (c.contains("error")) {
      EXPECT_EQ(r.exit_code, 1);
      EXPECT_EQ(r.out, "");
      EXPECT_EQ(r.err, "error: " + c["error"].get<std::string>() + "\n");
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, c["expected"].get<std::string>()) << c["template"] << " " << conv;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 32);
}

TEST(RenderChatCli, MessagesObjectToolsKwargsAndNow) {
  const std::string tpl = write("t.jinja",
                                "{{ messages[0].content }}|{{ tools|length }}|{{ enable_thinking }}|"
                                "{{ strftime_now('%Y-%m-%d') }}\n");
  const std::string msgs = write("m2.json", R"({"messages": [{"role": "user", "content": "hé"}], "tools": [{"a": 1}]})");
  auto r = run_llmserve("render-chat --chat-template " + quote(tpl) + " --messages-file " + quote(msgs) +
                        " --chat-template-kwargs '{\"enable_thinking\": false}' --now '2026-11-29 12:00:00'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hé|1|False|2026-11-29");  // the template's trailing newline is dropped, nothing added
}

TEST(RenderChatCli, ContinueFinalMessage) {
  const std::string tpl = write("c.jinja", "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}");
  const std::string msgs = write("m3.json", R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "partial"}])");
  auto r = run_llmserve("render-chat --chat-template " + quote(tpl) + " --messages-file " + quote(msgs) +
                        " --continue-final-message");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<user>q</s><assistant>partial");
}

TEST(RenderChatCli, TemplateTextAndTheModelsOwnTemplate) {
  const std::string msgs = write("m7.json", R"([{"role": "user", "content": "x"}])");
  const std::string m = " --messages-file " + quote(msgs);
  // --chat-template takes the template text itself, as serve --chat-template does.
  auto r = run_llmserve("render-chat --chat-template '{% for m in messages %}[{{ m.role }}:{{ "
                        "m.content }}]{% endfor %}'" + m);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[user:x]");

  // --model: a GGUF's tokenizer.chat_template, with its BOS/EOS pieces as bos_token/eos_token.
  auto src = GgufFile::open(std::string(LLMSERVE_SHARED_DIR) +
                            "/models/stories260K/stories260K.gguf");
  ASSERT_TRUE(src.ok()) << src.status().message();
  const std::string tpl_gguf = testing::temp_dir() + "/with_template.gguf";
  testing::rewrite_gguf(*src, tpl_gguf, testing::Rewrite::kF32,
                        {{"tokenizer.chat_template",
                          GgufValue{GgufType::kString,
                                    std::string("{{ bos_token }}{% for m in messages %}<{{ "
                                                "m.role }}>{{ m.content }}{% endfor %}{{ "
                                                "eos_token }}")}}});
  r = run_llmserve("render-chat --model " + quote(tpl_gguf) + m);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><user>x</s>");
  r = run_llmserve("render-chat --model " + quote(tpl_gguf) + " --bos-token B --eos-token ''" + m);
  EXPECT_EQ(r.out, "B<user>x");  // given tokens win, an empty one too
  r = run_llmserve("render-chat --model " + quote(tpl_gguf) + " --chat-template 'T{{ bos_token "
                   "}}'" + m);
  EXPECT_EQ(r.out, "T<s>");  // --chat-template wins over the model's, as in serve
  // A model without a template gets serve's built-in one.
  r = run_llmserve("render-chat --model " + quote(src->path()) + " --add-generation-prompt" + m);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>user: x\nassistant:");

  // An HF directory: chat_template.jinja beside config.json (tokenizer from --tokenizer, as
  // serve takes it for a directory without tokenizer.json).
  const std::string synth = std::string(LLMSERVE_SHARED_DIR) + "/testdata/models/synthetic/";
  const std::filesystem::path hf = testing::temp_dir() + "/hf_with_template";
  std::filesystem::create_directories(hf);
  std::filesystem::copy_file(synth + "llama-gqa/hf/config.json", hf / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::error_code ec;
  std::filesystem::create_symlink(synth + "llama-gqa/hf/model.safetensors",
                                  hf / "model.safetensors", ec);
  std::ofstream(hf / "chat_template.jinja")
      << "{% for m in messages %}{{ m.content }}|{% endfor %}";
  r = run_llmserve("render-chat --model " + quote(hf.string()) + " --tokenizer " +
                   quote(synth + "llama-gqa/model.gguf") + m);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "x|");
}

TEST(RenderChatCli, Errors) {
  const std::string msgs = write("m4.json", R"([{"role": "user", "content": "x"}])");
  const std::string bad = write("bad.jinja", "ok\n{% if %}");
  auto r = run_llmserve("render-chat --chat-template " + quote(bad) + " --messages-file " + quote(msgs));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error: " + bad + ": syntax error at line 2:", 0), 0u) << r.err;
  r = run_llmserve("render-chat --chat-template /nonexistent.jinja --messages-file " + quote(msgs));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: --chat-template /nonexistent.jinja: no such file\n");
  const std::string notjson = write("m5.json", "[{");
  const std::string tpl = write("t2.jinja", "x");
  r = run_llmserve("render-chat --chat-template " + quote(tpl) + " --messages-file " + quote(notjson));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos);
  const std::string notlist = write("m6.json", R"({"role": "user"})");
  r = run_llmserve("render-chat --chat-template " + quote(tpl) + " --messages-file " + quote(notlist));
  EXPECT_EQ(r.exit_code, 1);
  const std::string raiser = write("r.jinja", "{{ raise_exception('nope') }}");
  r = run_llmserve("render-chat --chat-template " + quote(raiser) + " --messages-file " + quote(msgs));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: nope\n");
  EXPECT_EQ(r.out, "");
  // Neither --chat-template nor --model: the built-in template, as serve's last resort.
  r = run_llmserve("render-chat --messages-file " + quote(msgs));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": "), std::string::npos) << r.out;
  r = run_llmserve("render-chat --messages-file /nonexistent.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.json"), std::string::npos) << r.err;
  r = run_llmserve("render-chat --chat-template x.jinja --messages-file " + quote(msgs));
  EXPECT_EQ(r.err, "error: --chat-template x.jinja: no such file\n");
  r = run_llmserve("render-chat --chat-template " + quote(tpl) + " --tokenizer t.gguf "
                   "--messages-file " + quote(msgs));
  EXPECT_EQ(r.err, "error: --tokenizer needs --model (it picks the model's tokenizer)\n");
  r = run_llmserve("render-chat --model /nonexistent.gguf --messages-file " + quote(msgs));
  EXPECT_EQ(r.err, "error: /nonexistent.gguf: no such model file\n");
}

}  // namespace
}  // namespace llmserve
