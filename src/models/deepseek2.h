// DeepSeek-V2 architecture ("deepseek2"; DeepSeek-AI 2024, arXiv:2405.04434): llama-style
// pre-RMSNorm blocks whose attention is Multi-head Latent Attention (MLA, paper sec. 2.1):
// keys and values of all heads are reconstructed from one low-rank latent c_kv
// (kv_lora_rank values) plus one decoupled RoPE key k_rope shared by every head
// (qk_rope_head_dim values), and only [c_kv | k_rope] is cached per token and layer.
// The query is projected directly (q_lora_rank == 0, DeepSeek-V2-Lite) or through a low-rank
// bottleneck with its own RMSNorm. The MLP is a dense SwiGLU in the first
// n_dense_leading_layers layers and a mixture of experts after them (DeepSeekMoE, paper
// sec. 2.2: fine-grained routed experts plus ungated shared experts; DeepSeek-V3's sigmoid
// router with a selection bias and group-limited routing, models/moe_router.h). DeepSeek-V3
// files (GGUF deepseek2, HF DeepseekV3ForCausalLM) load through the same model.
#pragma once

#include <memory>

#include "models/model.h"

namespace llmserve {

/// Builds a DeepSeek-V2 model from `file` (GGUF "deepseek2" names; HF
/// DeepseekV2ForCausalLM / DeepseekV3ForCausalLM directories are mapped to them by ModelFile). Accepts either the
/// split attn_k_b / attn_v_b tensors (recent llama.cpp) or the unsplit attn_kv_b (HF
/// kv_b_proj, older GGUFs). `file` must outlive the model (weights are borrowed).
/// Errors, one line naming the file and the tensor: NotFound (missing tensor), DataLoss
/// (shape differs from the config), InvalidArgument (MoE tensors in a dense layer).
Expected<std::unique_ptr<Model>> create_deepseek2_model(const ModelFile& file,
                                                        const ModelLoadOptions& options);

}  // namespace llmserve
