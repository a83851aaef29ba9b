// The built-in chat template used while models carry no chat template of their own.
//
// Rendering: every message becomes "<role>: <content>\n" in order, and when
// add_generation_prompt is true the text ends with "assistant:" so the model continues as the
// assistant. Example:
//   [{system, "Be brief."}, {user, "Hi"}]  ->  "system: Be brief.\nuser: Hi\nassistant:"
// The server tokenizes the result with BOS. When tokenizer/ gains real (Jinja) chat templates
// the server should prefer the model's template and fall back to this one.
#pragma once

#include <string>
#include <vector>

#include "server/protocol.h"

namespace llmserve {

/// Renders `messages` with the built-in template described above.
std::string render_builtin_chat_template(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt);

}  // namespace llmserve
