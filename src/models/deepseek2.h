// DeepSeek-V2 architecture ("deepseek2"; DeepSeek-AI 2024, arXiv:2405.04434): llama-style
// pre-RMSNorm blocks whose attention is Multi-head Latent Attention (MLA, paper sec. 2.1):
// keys and values of all heads are reconstructed from one low-rank latent c_kv
// (kv_lora_rank values) plus one decoupled RoPE key k_rope shared by every head
// (qk_rope_head_dim values), and only [c_kv | k_rope] is cached per token and layer.
// The query is projected directly (q_lora_rank == 0, DeepSeek-V2-Lite) or through a low-rank
// bottleneck with its own RMSNorm. Only dense SwiGLU MLP layers are supported (no MoE).
#pragma once

#include <memory>

#include "models/model.h"

namespace llmserve {

/// Builds a DeepSeek-V2 model from `file` (GGUF "deepseek2" names; HF
/// DeepseekV2ForCausalLM directories are mapped to them by ModelFile). Accepts either the
/// split attn_k_b / attn_v_b tensors (recent llama.cpp) or the unsplit attn_kv_b (HF
/// kv_b_proj, older GGUFs). `file` must outlive the model (weights are borrowed).
/// Errors, one line naming the file and the tensor: NotFound (missing tensor), DataLoss
/// (shape differs from the config), Unimplemented (MoE layers present).
Expected<std::unique_ptr<Model>> create_deepseek2_model(const ModelFile& file,
                                                        const ModelLoadOptions& options);

}  // namespace llmserve
