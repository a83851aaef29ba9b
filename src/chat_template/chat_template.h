// Chat templates: a Jinja2 interpreter for the Hugging Face `chat_template` strings that
// models ship in tokenizer_config.json / GGUF `tokenizer.chat_template`.
//
// Semantics follow Jinja2 3.1 (https://jinja.palletsprojects.com/en/3.1.x/templates/) in the
// environment transformers' apply_chat_template builds
// (https://huggingface.co/docs/transformers/main/en/chat_templating):
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
// extension, `tojson` = json.dumps(ensure_ascii=False) keeping dict order, and the globals
// raise_exception(msg) and strftime_now(fmt). What is and is not supported: docs/chat_templates.md.
//
// Rendering is bounded (RenderOptions): a hostile template gets an error, never a hang or a
// crash. Errors are one-line Status messages: "syntax error at line N: ..." from parse(),
// the template's own text verbatim from raise_exception(msg), otherwise Jinja-like runtime
// messages (e.g. "'dict object' has no attribute 'x'").
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace llmserve {

namespace jinja {
struct Template;
}

/// Limits and environment of one render.
struct RenderOptions {
  /// Wall-clock time for strftime_now(); default: the local time now. Tests inject a fixed time.
  std::function<std::tm()> now;
  size_t max_output_bytes = 16u << 20;     // rendered text (and any captured block / macro output)
  size_t max_string_bytes = 16u << 20;     // any single string value
  size_t max_list_items = 1u << 20;        // any single list (range() is capped at 100000 as in Jinja's sandbox)
  int max_recursion_depth = 500;           // nested statements + expression levels + macro calls
  uint64_t max_loop_iterations = 500000;   // all for-loop iterations of one render
  uint64_t max_steps = 1000000;            // statements, iterations, macro calls, filters and tests of one render
};

/// A parsed template; cheap to copy (the syntax tree is shared and immutable).
class ChatTemplate {
 public:
  /// Parses Jinja source. Errors: InvalidArgument "syntax error at line N: ...".
  static Expected<ChatTemplate> parse(const std::string& source);

  /// Renders with `context` (a JSON object whose keys become template variables; objects keep
  /// their key order with ordered_json). Errors: InvalidArgument with the template's message.
  Expected<std::string> render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
  Expected<std::string> render(const nlohmann::json& context, const RenderOptions& options = {}) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const jinja::Template> tpl_;
  std::shared_ptr<const std::string> source_;
};

/// The inputs of transformers' apply_chat_template(..., tokenize=False).
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, ...}]
  bool add_generation_prompt = false;
  /// Render without a generation prompt and cut the text right after the final message's
  /// content, so the model continues that message (transformers' continue_final_message).
  bool continue_final_message = false;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json tools = nullptr;      // list of tool schemas, or null
  nlohmann::ordered_json documents = nullptr;  // list of documents, or null
  /// Extra template variables (vLLM's chat_template_kwargs, e.g. {"enable_thinking": false}).
  /// They may override bos_token/eos_token but not messages, tools, documents or
  /// add_generation_prompt (InvalidArgument).
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

/// Builds the context the way apply_chat_template does (messages, tools, documents,
/// add_generation_prompt, bos_token, eos_token, then the kwargs) and renders it; with
/// continue_final_message, applies transformers' truncation (errors if add_generation_prompt
/// is also set or the final message's content does not appear in the rendered text).
Expected<std::string> render_chat(const ChatTemplate& tpl, const ChatTemplateInputs& inputs,
                                  const RenderOptions& options = {});

}  // namespace llmserve
