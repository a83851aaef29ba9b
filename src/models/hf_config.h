// Hugging Face model directories: config.json -> ModelConfig, generation_config.json ->
// GenerationConfig, and the mapping between HF tensor names (model.layers.N.self_attn.q_proj.
// weight, ...) and the GGUF names the models use (blk.N.attn_q.weight, ...).
// Key names and defaults follow transformers' LlamaConfig, MistralConfig, Qwen2Config,
// Qwen3Config and DeepseekV2Config.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "config/model_config.h"
#include "models/model_file.h"

namespace llmserve {

/// Parses `dir`/config.json. Architectures: LlamaForCausalLM / "llama", MistralForCausalLM /
/// "mistral" (loaded as llama; a sliding_window below max_position_embeddings caps the
/// context at the window, recorded in ModelConfig::max_position_embeddings), Qwen2ForCausalLM,
/// Qwen3ForCausalLM, Qwen2/Qwen3-MoE, Mixtral, Phi-3, DeepseekV2/V3ForCausalLM,
/// Gemma2ForCausalLM, Gemma3ForCausalLM (text). HF checkpoints store Q/K in
/// rotate-half order (DeepSeek-V2: adjacent pairs, as its modeling code de-interleaves).
/// vocab_size / weight_dtype are left for the caller to check against the tensors.
/// Errors (one line, naming `dir`/config.json and the key): InvalidArgument for invalid JSON,
/// a missing required key, a wrong type or inconsistent values; Unimplemented for an unknown
/// architecture, MoE layers, an activation other than silu, mlp_bias, or a rope_scaling type
/// other than linear / llama3 / default.
Expected<ModelConfig> read_hf_config(const std::string& dir);

/// Reads `dir`/generation_config.json when present (eos_token_id may be an int or a list;
/// temperature, top_p, min_p, top_k, repetition_penalty, max_new_tokens), else the token ids of
/// config.json.
/// Errors: InvalidArgument for invalid JSON or wrong types, naming the file and key.
Expected<GenerationConfig> read_hf_generation_config(const std::string& dir);

/// GGUF name for an HF tensor name, or nullopt for tensors the models do not use
/// (e.g. rotary_emb.inv_freq). "model.layers.3.mlp.down_proj.weight" -> "blk.3.ffn_down.weight".
/// `architecture` (ModelConfig's) matters for Gemma, whose post_attention_layernorm is the norm
/// after attention (blk.N.post_attention_norm), not the one before the MLP.
std::optional<std::string> gguf_name_for_hf(std::string_view hf_name, std::string_view architecture = {});

/// The inverse, for error messages: "blk.3.ffn_down.weight" -> "model.layers.3.mlp.down_proj.
/// weight"; nullopt if the name has no HF counterpart.
std::optional<std::string> hf_name_for_gguf(std::string_view gguf_name, std::string_view architecture = {});

}  // namespace llmserve
