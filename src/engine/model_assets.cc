#include "engine/model_assets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "weights/gguf.h"
#include "weights/mapped_file.h"

namespace llmserve {
namespace {

namespace fs = std::filesystem;

Status check_vocab(const Tokenizer& t, const ModelFile& model, const std::string& source) {
  if (t.vocab_size() > model.config().vocab_size)
    return DataLoss("{}: the tokenizer has {} tokens but the model's vocabulary has {}", source,
                    t.vocab_size(), model.config().vocab_size);
  return Status::Ok();
}

Expected<std::string> read_text(const fs::path& p) { return read_text_file(p.string()); }

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_model_tokenizer(const EngineConfig& config,
                                                          const ModelFile& model) {
  std::unique_ptr<Tokenizer> t;
  std::string source;
  if (!config.tokenizer_path.empty()) {
    source = config.tokenizer_path;
    TokenizerLoadOptions opt;
    opt.llama2c_vocab_size = model.config().vocab_size;
    LLMS_ASSIGN_OR_RETURN(t, load_tokenizer_from_path(config.tokenizer_path, opt));
  } else if (model.gguf() != nullptr) {
    source = model.path();
    LLMS_ASSIGN_OR_RETURN(t, load_tokenizer_from_gguf(*model.gguf()));
  } else if (model.format() == ModelFile::Format::kHfDir) {
    if (model.tokenizer_json_path().empty())
      return NotFound("{}: the directory has no tokenizer.json; pass --tokenizer (a GGUF file, "
                      "an HF directory or a llama2.c tokenizer.bin)", model.path());
    source = model.tokenizer_json_path();
    LLMS_ASSIGN_OR_RETURN(t, load_tokenizer_from_path(model.path()));
  } else {
    return InvalidArgument("{}: llama2.c checkpoints carry no vocabulary; pass --tokenizer "
                           "tokenizer.bin", model.path());
  }
  LLMS_RETURN_IF_ERROR(check_vocab(*t, model, source));
  return t;
}

Expected<std::optional<std::string>> find_chat_template(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && GgufFile::has_magic(path)) {
    LLMS_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
    if (!g.has_key("tokenizer.chat_template")) return std::optional<std::string>();
    LLMS_ASSIGN_OR_RETURN(std::string tpl, g.get_string("tokenizer.chat_template"));
    return std::optional<std::string>(std::move(tpl));
  }
  const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
    LLMS_ASSIGN_OR_RETURN(std::string tpl, read_text(dir / "chat_template.jinja"));
    return std::optional<std::string>(std::move(tpl));
  }
  const fs::path cfg_path = dir / "tokenizer_config.json";
  if (!fs::is_regular_file(cfg_path, ec)) return std::optional<std::string>();
  LLMS_ASSIGN_OR_RETURN(std::string text, read_text(cfg_path));
  const nlohmann::json cfg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object())
    return DataLoss("{}: invalid JSON", cfg_path.string());
  if (!cfg.contains("chat_template") || cfg["chat_template"].is_null())
    return std::optional<std::string>();
  const nlohmann::json& ct = cfg["chat_template"];
  if (ct.is_string()) return std::optional<std::string>(ct.get<std::string>());
  if (ct.is_array() && !ct.empty()) {
    const nlohmann::json* chosen = nullptr;
    for (const nlohmann::json& e : ct) {
      if (!e.is_object() || !e.contains("template") || !e["template"].is_string())
        return DataLoss("{}: \"chat_template\" list entries must be {{\"name\", \"template\"}}",
                        cfg_path.string());
      if (chosen == nullptr || (e.contains("name") && e["name"] == "default")) chosen = &e;
    }
    return std::optional<std::string>((*chosen)["template"].get<std::string>());
  }
  return DataLoss("{}: \"chat_template\" must be a string or a list of {{name, template}}",
                  cfg_path.string());
}

Expected<std::optional<std::string>> find_model_chat_template(const EngineConfig& config,
                                                              const ModelFile& model) {
  if (!config.tokenizer_path.empty()) {
    LLMS_ASSIGN_OR_RETURN(std::optional<std::string> tpl,
                          find_chat_template(config.tokenizer_path));
    if (tpl) return tpl;
  }
  if (model.format() == ModelFile::Format::kLlama2c) return std::optional<std::string>();
  return find_chat_template(model.path());
}

}  // namespace llmserve
