// Gemma 2 and Gemma 3 text models (Gemma Team 2024, "Gemma 2: Improving Open Language Models
// at a Practical Size", arXiv:2408.00118; "Gemma 3 Technical Report", arXiv:2503.19786;
// transformers' modeling_gemma2.py / modeling_gemma3.py are the reference semantics, llama.cpp's
// src/models/gemma2.cpp / gemma3.cpp read the same GGUF files):
//   h = embed(tokens) * sqrt(dim)
//   per layer: h += post_attention_norm(attn(attn_norm(h)))
//              h += post_ffw_norm(down(gelu_tanh(gate(x)) * up(x))),  x = ffn_norm(h)
//   logits = final_logit_softcapping(classifier(output_norm(h)))   (classifier tied to embed)
// RMSNorm weights are 1 + w (as GGUF stores them; ModelFile adds 1 for a Hugging Face
// directory). Attention: GQA with an explicit head_dim, RoPE rotate-half, scale
// 1/sqrt(query_pre_attn_scalar), Gemma 2's score soft-capping, interleaved sliding-window
// layers (Gemma 2 every other layer, Gemma 3 five of six), Gemma 3's per-head q/k RMSNorm and
// its sliding layers' own RoPE base (rope_local_base_freq, unscaled).
#pragma once

#include <memory>

#include "models/model.h"

namespace llmserve {

/// Builds a "gemma2" or "gemma3" model. Errors name the file and the tensor (missing, wrong
/// shape or dtype, or a tensor the architecture does not use).
Expected<std::unique_ptr<Model>> create_gemma_model(const ModelFile& file, const ModelLoadOptions& options);

}  // namespace llmserve
