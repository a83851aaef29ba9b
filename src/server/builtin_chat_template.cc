#include "server/builtin_chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/llm_engine.h"

namespace llmserve {

const char* const kBuiltinChatTemplate =
    "{{ bos_token }}{% for message in messages %}{{ message['role'] }}: "
    "{{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

Expected<ChatTemplate> resolve_chat_template(const std::string& override_source,
                                             const LLMEngine& engine, std::string* origin) {
  return resolve_chat_template(override_source, engine.chat_template(), origin);
}

Expected<ChatTemplate> resolve_chat_template(const std::string& override_source,
                                             const std::optional<std::string>& model_template,
                                             std::string* origin) {
  std::string source, from;
  std::error_code ec;
  if (!override_source.empty()) {
    if (std::filesystem::is_regular_file(override_source, ec)) {
      std::ifstream in(override_source, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      source = ss.str();
      from = override_source;
    } else if (override_source.find('{') != std::string::npos) {
      source = override_source;
      from = "--chat-template (inline)";
    } else if (std::filesystem::exists(override_source, ec)) {
      return InvalidArgument("--chat-template {}: not a regular file", override_source);
    } else {
      return InvalidArgument("--chat-template {}: no such file", override_source);
    }
  } else if (model_template) {
    source = *model_template;
    from = "the model's chat template";
  } else {
    source = kBuiltinChatTemplate;
    from = "the built-in chat template (the model ships none)";
  }
  Expected<ChatTemplate> tpl = ChatTemplate::parse(source);
  if (!tpl.ok()) return InvalidArgument("{}: {}", from, tpl.status().message());
  if (origin != nullptr) *origin = from;
  return tpl;
}

}  // namespace llmserve
