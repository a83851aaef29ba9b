#include "chat_template/chat_template.h"

#include "chat_template/ast.h"
#include "chat_template/interpreter.h"

namespace llmserve {

namespace {
constexpr int kMaxNesting = 200;  // parser: nested blocks / expression levels / chained operators
}

Expected<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  try {
    t.tpl_ = jinja::parse_template(source, kMaxNesting);
  } catch (const jinja::TemplateError& e) {
    return InvalidArgument("{}", e.message);
  }
  t.source_ = std::make_shared<const std::string>(source);
  return t;
}

namespace {
template <typename J>
Expected<std::string> render_impl(const jinja::Template& tpl, const J& context, const RenderOptions& options) {
  if (!context.is_object()) return InvalidArgument("template context must be a JSON object");
  try {
    jinja::Interpreter in(options);
    return in.render(tpl, jinja::from_json(context));
  } catch (const jinja::TemplateError& e) {
    return InvalidArgument("{}", e.message);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("template rendering ran out of memory");
  }
}
}  // namespace

Expected<std::string> ChatTemplate::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!tpl_) return InvalidArgument("chat template not parsed");
  return render_impl(*tpl_, context, options);
}
Expected<std::string> ChatTemplate::render(const nlohmann::json& context, const RenderOptions& options) const {
  if (!tpl_) return InvalidArgument("chat template not parsed");
  return render_impl(*tpl_, context, options);
}

Expected<std::string> render_chat(const ChatTemplate& tpl, const ChatTemplateInputs& inputs, const RenderOptions& options) {
  if (inputs.continue_final_message && inputs.add_generation_prompt)
    return InvalidArgument(
        "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you "
        "want the model to continue the final message, and add_generation_prompt when you want to add a header "
        "that will prompt it to start a new assistant message instead.");
  if (!inputs.messages.is_array()) return InvalidArgument("messages must be a list");
  if (!inputs.chat_template_kwargs.is_null() && !inputs.chat_template_kwargs.is_object())
    return InvalidArgument("chat_template_kwargs must be an object");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = inputs.messages;
  ctx["tools"] = inputs.tools;
  ctx["documents"] = inputs.documents;
  ctx["add_generation_prompt"] = inputs.add_generation_prompt;
  ctx["bos_token"] = inputs.bos_token;
  ctx["eos_token"] = inputs.eos_token;
  if (inputs.chat_template_kwargs.is_object()) {
    for (auto it = inputs.chat_template_kwargs.begin(); it != inputs.chat_template_kwargs.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
        return InvalidArgument("chat_template_kwargs may not set '{}'", k);
      ctx[k] = it.value();
    }
  }
  auto rendered = tpl.render(ctx, options);
  if (!rendered.ok() || !inputs.continue_final_message) return rendered;

  // transformers' apply_chat_template(continue_final_message=True).
  if (inputs.messages.empty()) return InvalidArgument("continue_final_message is set but there are no messages");
  const auto& last = inputs.messages.back();
  if (!last.is_object() || !last.contains("content")) return InvalidArgument("continue_final_message is set but the final message has no content");
  std::string final_message;
  const auto& content = last["content"];
  if (content.is_array()) {
    bool found = false;
    for (auto it = content.rbegin(); it != content.rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_message = (*it)["text"].get<std::string>();
        found = true;
        break;
      }
    }
    if (!found) return InvalidArgument("continue_final_message is set but we could not find any text to continue in the final message!");
  } else if (content.is_string()) {
    final_message = content.get<std::string>();
  } else {
    return InvalidArgument("continue_final_message is set but the final message content is not a string");
  }
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t b = 0, e = final_message.size();
  while (b < e && is_space(final_message[b])) ++b;
  while (e > b && is_space(final_message[e - 1])) --e;
  const std::string stripped = final_message.substr(b, e - b);
  const std::string lstripped = final_message.substr(b);
  std::string text = std::move(rendered).value();
  const size_t loc = text.rfind(stripped);
  if (loc == std::string::npos)
    return InvalidArgument(
        "continue_final_message is set but the final message does not appear in the chat after applying the chat "
        "template! This can happen if the chat template deletes portions of the final message. Please verify the "
        "chat template outputs the final message in your chat at the end of the chat template.");
  if (text.compare(loc, lstripped.size(), final_message) == 0 && text.size() >= loc + lstripped.size())
    text.resize(loc + lstripped.size());
  else
    text.resize(loc + stripped.size());
  return text;
}

}  // namespace llmserve
