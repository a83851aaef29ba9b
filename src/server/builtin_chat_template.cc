#include "server/builtin_chat_template.h"

namespace llmserve {

std::string render_builtin_chat_template(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt) {
  std::string text;
  for (const ChatMessage& m : messages) {
    text += m.role;
    text += ": ";
    text += m.content;
    text += '\n';
  }
  if (add_generation_prompt) text += "assistant:";
  return text;
}

}  // namespace llmserve
