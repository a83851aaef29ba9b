#include "engine/model_assets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/hf_config.h"
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

Expected<GenerationConfig> resolve_generation_config(const std::string& mode,
                                                     const ModelFile& model) {
  GenerationConfig g = model.generation_config();
  if (mode == "auto") return g;
  if (mode == "vllm") {
    GenerationConfig eos_only;
    eos_only.eos_token_ids = g.eos_token_ids;
    eos_only.bos_token_id = g.bos_token_id;
    return eos_only;
  }
  std::error_code ec;
  if (!fs::is_directory(mode, ec))
    return InvalidArgument("--generation-config {}: not auto, vllm or a directory", mode);
  if (!fs::is_regular_file(fs::path(mode) / "generation_config.json", ec))
    return InvalidArgument("--generation-config {}: the directory has no generation_config.json",
                           mode);
  LLMS_ASSIGN_OR_RETURN(GenerationConfig dir, read_hf_generation_config(mode));
  for (int32_t id : dir.eos_token_ids)
    if (id >= model.config().vocab_size)
      return InvalidArgument("--generation-config {}: eos_token_id {} is outside the vocabulary "
                             "(vocab_size {})", mode, id, model.config().vocab_size);
  if (dir.bos_token_id < 0) dir.bos_token_id = g.bos_token_id;
  return dir;
}

std::string describe_generation_config(const std::string& mode, const ModelFile& model,
                                       const GenerationConfig& g) {
  std::string source = mode;
  if (mode == "auto" && model.format() == ModelFile::Format::kHfDir) {
    const fs::path gen = fs::path(model.path()) / "generation_config.json";
    std::error_code ec;
    source += fs::exists(gen, ec) ? ": " + gen.string() : ": no generation_config.json";
  } else if (mode != "auto" && mode != "vllm") {
    source = (fs::path(mode) / "generation_config.json").string();
  }
  std::vector<std::string> d;
  if (g.temperature) d.push_back(fmt::format("temperature={}", *g.temperature));
  if (g.top_p) d.push_back(fmt::format("top_p={}", *g.top_p));
  if (g.top_k && *g.top_k > 0) d.push_back(fmt::format("top_k={}", *g.top_k));
  if (g.min_p) d.push_back(fmt::format("min_p={}", *g.min_p));
  if (g.repetition_penalty)
    d.push_back(fmt::format("repetition_penalty={}", *g.repetition_penalty));
  std::string line = fmt::format("generation config ({}): sampling defaults {}", source,
                                 d.empty() ? "none" : fmt::format("{}", fmt::join(d, ", ")));
  if (mode == "vllm") line += " (--generation-config vllm)";
  line += g.eos_token_ids.empty() ? "; no eos ids"
                                  : fmt::format("; eos ids {}", fmt::join(g.eos_token_ids, ", "));
  if (g.max_new_tokens)
    line += fmt::format("; max_new_tokens={} (the default max_tokens, capped by the context's "
                        "room)", *g.max_new_tokens);
  return line;
}

}  // namespace llmserve
