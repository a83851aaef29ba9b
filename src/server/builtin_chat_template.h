// Which chat template the server renders /v1/chat/completions with, and the built-in one used
// when the model ships none.
//
// Built-in template (Jinja): BOS, then every message as "<role>: <content>\n" in order, and
// when add_generation_prompt is true "assistant:" so the model continues as the assistant:
//   [{system, "Be brief."}, {user, "Hi"}]  ->  "<s>system: Be brief.\nuser: Hi\nassistant:"
#pragma once

#include <optional>
#include <string>

#include "chat_template/chat_template.h"
#include "common/status.h"

namespace llmserve {

class LLMEngine;

/// The built-in template's Jinja source.
extern const char* const kBuiltinChatTemplate;

/// The template to serve with, in vLLM's order: `override_source` (--chat-template: a file
/// path, or the template text itself when no such file exists and it contains "{"), else the
/// model's own (LLMEngine::chat_template()), else the built-in one. `origin` receives where it
/// came from (for the start-up log). Errors: InvalidArgument for a missing file or a template
/// that does not parse (the syntax error, with its line).
Expected<ChatTemplate> resolve_chat_template(const std::string& override_source,
                                             const LLMEngine& engine, std::string* origin);

/// The same resolution with the model's template given directly (nullopt = it ships none), for
/// callers without an engine (render-chat --model).
Expected<ChatTemplate> resolve_chat_template(const std::string& override_source,
                                             const std::optional<std::string>& model_template,
                                             std::string* origin);

}  // namespace llmserve
