// Chat templates: ChatTemplate::parse on arbitrary source, then render it (tight limits) with a
// fixed chat context, through render() and render_chat() (continue_final_message too).
// Every failure must be an error Status; no crash, hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat_template/chat_template.h"
#include "fuzz/fuzz_util.h"

using namespace llmserve;

namespace {

RenderOptions tight() {
  RenderOptions o;
  o.now = [] {
    std::tm t{};
    t.tm_year = 124;
    t.tm_mon = 6;
    t.tm_mday = 26;
    return t;
  };
  o.max_output_bytes = 64u << 10;
  o.max_string_bytes = 64u << 10;
  o.max_list_items = 4096;
  o.max_recursion_depth = 200;
  o.max_loop_iterations = 20000;
  o.max_steps = 50000;
  return o;
}

const ChatTemplateInputs& inputs() {
  static const ChatTemplateInputs in = [] {
    ChatTemplateInputs i;
    i.messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi \u00e9 <b>"},
      {"role": "assistant", "content": "Hello!", "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": {"x": 1, "y": [true, null, 2.5]}}}]},
      {"role": "tool", "content": "42"},
      {"role": "user", "content": ["a", "b"]}])");
    i.add_generation_prompt = true;
    i.bos_token = "<s>";
    i.eos_token = "</s>";
    i.tools = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
    i.chat_template_kwargs = {{"enable_thinking", false}};
    return i;
  }();
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto tpl = ChatTemplate::parse(source);
  if (!tpl.ok()) {
    FUZZ_CHECK(!tpl.status().message().empty(), "parse error without a message");
    return 0;
  }
  const RenderOptions opt = tight();
  auto out = render_chat(*tpl, inputs(), opt);
  if (out.ok()) {
    FUZZ_CHECK(out->size() <= opt.max_output_bytes, "output %zu bytes over the limit", out->size());
  }
  ChatTemplateInputs cont = inputs();
  cont.add_generation_prompt = false;
  cont.continue_final_message = true;
  cont.messages.back()["content"] = "Hello";
  (void)render_chat(*tpl, cont, opt);
  (void)tpl->render(nlohmann::json{{"messages", nlohmann::json::array()}, {"x", 1}}, opt);
  return 0;
}
