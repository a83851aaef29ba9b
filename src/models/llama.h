// Llama architecture (Touvron et al. 2023; llama2.c run.c as the reference forward pass):
// pre-RMSNorm blocks of (GQA attention with RoPE) and (SwiGLU MLP), final RMSNorm, classifier
// (optionally tied to the token embedding). n_kv_heads <= n_heads covers MHA, GQA and MQA.
// The same block serves Mistral (without sliding window), Qwen2 (q/k/v biases, Bai et al.
// 2023), Qwen3 (per-head RMSNorm on q and k before RoPE) and Qwen3-MoE (Qwen3 attention with a
// mixture-of-experts MLP, moe.h), selected by ModelConfig flags.
#pragma once

#include <memory>

#include "models/model.h"

namespace llmserve {

Expected<std::unique_ptr<Model>> create_llama_model(const ModelFile& file,
                                                    const ModelLoadOptions& options);

}  // namespace llmserve
