// What a model brings besides its weights: the tokenizer, the chat template and the generation
// defaults, found the way vLLM / llama.cpp find them (the --tokenizer / --generation-config
// path when given, else the model's own files).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "config/engine_config.h"
#include "models/model_file.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

/// The engine's tokenizer: --tokenizer (GGUF file, HF directory or tokenizer.json, llama2.c
/// tokenizer.bin) when given, else the model's: a GGUF file's tokenizer.ggml.* metadata or an
/// HF directory's tokenizer.json. A tokenizer larger than the model's vocabulary is an error
/// (a smaller one is fine: HF embeddings are often padded). Errors name the file: NotFound
/// (an HF directory without tokenizer.json, a .bin checkpoint without --tokenizer) and the
/// loaders' errors.
Expected<std::unique_ptr<Tokenizer>> load_model_tokenizer(const EngineConfig& config,
                                                          const ModelFile& model);

/// The Jinja chat template that goes with `path` (a GGUF file, an HF directory, or a file
/// inside one such as tokenizer.json), or nullopt when it has none:
///  - GGUF: metadata tokenizer.chat_template;
///  - HF: chat_template.jinja in the directory (transformers >= 4.43 saves it there), else
///    tokenizer_config.json "chat_template" (a string, or a list of {name, template} of
///    which "default" is taken, else the first).
/// Errors: DataLoss for an unreadable or ill-typed tokenizer_config.json / GGUF key.
Expected<std::optional<std::string>> find_chat_template(const std::string& path);

/// The template for the engine's model: --tokenizer's when that path has one, else the
/// model's own (find_chat_template), else nullopt.
Expected<std::optional<std::string>> find_model_chat_template(const EngineConfig& config,
                                                              const ModelFile& model);

/// The generation defaults the engine applies, per --generation-config (vLLM's meaning):
///  - "auto": the model's own (ModelFile::generation_config(): generation_config.json, else
///    config.json's token ids, GGUF tokenizer.ggml.eos_token_id);
///  - "vllm": no sampling defaults (SamplingParams' own), but the model's eos ids still stop
///    generation: vLLM reads generation_config.json's eos_token_id whatever the mode;
///  - a directory: its generation_config.json (sampling defaults and eos ids) replaces the
///    model's; the model's bos id stays when it names none.
/// Errors (InvalidArgument, naming the flag or file): a directory without generation_config.json
/// or a path that is not a directory, the reader's errors, eos ids outside the vocabulary.
Expected<GenerationConfig> resolve_generation_config(const std::string& mode,
                                                     const ModelFile& model);

/// The start-up log line for `g` under `mode`: where the defaults came from, the sampling
/// defaults applied (or "none"), the extra eos ids and a note when max_new_tokens is set but
/// not applied. E.g. "generation config (auto: DIR/generation_config.json): sampling defaults
/// temperature=0.6, top_p=0.9; eos ids 2, 7".
std::string describe_generation_config(const std::string& mode, const ModelFile& model,
                                       const GenerationConfig& g);

}  // namespace llmserve
