// llmserve render-chat: renders a conversation with a Jinja chat template exactly as
// transformers' apply_chat_template(tokenize=False) would, printing the text to stdout with
// nothing added (no trailing newline). The template is chosen as `serve` chooses it:
// --chat-template (a file, or the template text), else the model's (--model: a GGUF file or
// an HF directory; its tokenizer also gives bos_token / eos_token), else the built-in one.
// Template errors (syntax, raise_exception, runtime) print "error: <message>" to stderr and
// exit 1.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "cli/commands.h"
#include "engine/model_assets.h"
#include "models/model_file.h"
#include "server/builtin_chat_template.h"
#include "tokenizer/tokenizer.h"

#include "weights/mapped_file.h"

namespace llmserve::cli {
namespace {

/// Regular files only, bounded (a directory, FIFO or /dev/zero is an error, not a hang).
Expected<std::string> read_file(const std::string& path) { return read_text_file(path); }

Expected<nlohmann::ordered_json> read_json(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(std::string text, read_file(path));
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("'{}' is not valid JSON: {}", path, e.what());
  }
}

}  // namespace

RenderChatCommand::RenderChatCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("render-chat",
                            "Render a conversation with a Jinja chat template (as transformers' "
                            "apply_chat_template) and print the text");
  cmd_->add_option("--chat-template", template_source_,
                   "Jinja chat template: a file, or the template text (as serve --chat-template; "
                   "default: the --model's)");
  cmd_->add_option("--model", model_path_,
                   "Take the chat template (unless --chat-template) and bos_token / eos_token "
                   "(unless given) from this model, as serve does: a GGUF file or a Hugging Face "
                   "directory (weights are not loaded)");
  cmd_->add_option("--tokenizer", tokenizer_path_,
                   "With --model: the tokenizer (and template) serve --tokenizer would use");
  cmd_->add_option("--messages-file", messages_path_,
                   "JSON list of messages, or an object with a \"messages\" list (and optionally \"tools\")")
      ->required();
  cmd_->add_flag("--add-generation-prompt", add_generation_prompt_, "Append the assistant turn header");
  cmd_->add_flag("--continue-final-message", continue_final_message_,
                 "Cut the text after the final message's content so the model continues it");
  bos_opt_ = cmd_->add_option("--bos-token", bos_token_,
                              "bos_token variable (default: the --model's BOS piece, else empty)");
  eos_opt_ = cmd_->add_option("--eos-token", eos_token_,
                              "eos_token variable (default: the --model's EOS piece, else empty)");
  cmd_->add_option("--tools-file", tools_path_, "JSON list of tool schemas (the `tools` variable)");
  cmd_->add_option("--chat-template-kwargs", kwargs_json_,
                   "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  cmd_->add_option("--now", now_, "Fixed time for strftime_now, \"YYYY-MM-DD HH:MM:SS\" (default: local time)");
}

Status RenderChatCommand::read_model(std::optional<std::string>* model_template) {
  EngineConfig config;  // the two fields the engine's template and tokenizer lookup read
  config.model_path = model_path_;
  config.tokenizer_path = tokenizer_path_;
  // Opening maps the checkpoint and reads its headers and metadata; no weight is read.
  LLMS_ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> file, ModelFile::open(model_path_));
  LLMS_ASSIGN_OR_RETURN(*model_template, find_model_chat_template(config, *file));
  if (bos_opt_->count() > 0 && eos_opt_->count() > 0) return Status::Ok();
  LLMS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, load_model_tokenizer(config, *file));
  if (bos_opt_->count() == 0 && tok->bos_id() >= 0) bos_token_ = tok->piece(tok->bos_id());
  if (eos_opt_->count() == 0 && tok->eos_id() >= 0) eos_token_ = tok->piece(tok->eos_id());
  return Status::Ok();
}

int RenderChatCommand::run() {
  if (cmd_->count("--chat-template") > 0 && template_source_.empty())
    return fail(InvalidArgument("--chat-template must not be empty (leave the flag out for the "
                                "--model's template, or the built-in one)"));
  // Without --chat-template or --model: the built-in template (serve's last resort).
  if (!tokenizer_path_.empty() && model_path_.empty())
    return fail(InvalidArgument("--tokenizer needs --model (it picks the model's tokenizer)"));
  std::optional<std::string> model_template;
  if (!model_path_.empty()) {
    if (Status st = read_model(&model_template); !st.ok()) return fail(st);
  }
  auto doc = read_json(messages_path_);
  if (!doc.ok()) return fail(doc.status());
  auto tpl = resolve_chat_template(template_source_, model_template, nullptr);
  if (!tpl.ok()) return fail(tpl.status());

  ChatTemplateInputs inputs;
  if (doc->is_array()) {
    inputs.messages = *doc;
  } else if (doc->is_object() && doc->contains("messages") && (*doc)["messages"].is_array()) {
    inputs.messages = (*doc)["messages"];
    if (doc->contains("tools")) inputs.tools = (*doc)["tools"];
    if (doc->contains("documents")) inputs.documents = (*doc)["documents"];
  } else {
    return fail(InvalidArgument("'{}' must hold a JSON list of messages or an object with a \"messages\" list",
                                messages_path_));
  }
  if (!tools_path_.empty()) {
    auto tools = read_json(tools_path_);
    if (!tools.ok()) return fail(tools.status());
    inputs.tools = *tools;
  }
  if (!kwargs_json_.empty()) {
    try {
      inputs.chat_template_kwargs = nlohmann::ordered_json::parse(kwargs_json_);
    } catch (const nlohmann::json::exception& e) {
      return fail(InvalidArgument("--chat-template-kwargs is not valid JSON: {}", e.what()));
    }
    if (!inputs.chat_template_kwargs.is_object())
      return fail(InvalidArgument("--chat-template-kwargs must be a JSON object"));
  }
  inputs.add_generation_prompt = add_generation_prompt_;
  inputs.continue_final_message = continue_final_message_;
  inputs.bos_token = bos_token_;
  inputs.eos_token = eos_token_;

  RenderOptions options;
  if (!now_.empty()) {
    std::tm tm{};
    if (std::sscanf(now_.c_str(), "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec) != 6)
      return fail(InvalidArgument("--now must look like \"2026-11-29 12:00:00\""));
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    std::tm norm = tm;
    std::mktime(&norm);  // fills tm_wday / tm_yday
    options.now = [norm] { return norm; };
  }
  auto text = render_chat(*tpl, inputs, options);
  if (!text.ok()) return fail(text.status());
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace llmserve::cli
