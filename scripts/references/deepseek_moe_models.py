#!/usr/bin/python3
"""Independent float64 NumPy references for three tiny random-weight DeepSeek mixture-of-experts
models with multi-head latent attention (MLA).

Three models, one folder each under tests/models/data/ (found from this script's own path, so it
can be run from anywhere):

  deepseek2moe-tiny  transformers DeepseekV2ForCausalLM (deepseek_v2), DeepSeek-V2-Lite's shape
                     scaled down: no q LoRA (direct q_proj), softmax router, greedy top-2 of 8,
                     not renormalised, routed_scaling_factor 2.0, two shared experts (one
                     ungated SwiGLU of width 2 * 32), layer 0 dense; GGUF arch `deepseek2`
  deepseek3-tiny     transformers DeepseekV3ForCausalLM (deepseek_v3): q LoRA (q_a_proj ->
                     q_a_layernorm -> q_b_proj), sigmoid router with e_score_correction_bias,
                     noaux_tc group-limited top-4 of 16 (4 groups, 2 kept), renormalised,
                     routed_scaling_factor 2.5, one shared expert, layer 0 dense; GGUF arch
                     `deepseek2` with blk.N.exp_probs_b.bias
  deepseek2-yarn-tiny deepseek2moe-tiny's config (same dims, MoE and all) with DeepSeek's YaRN:
                     max_position_embeddings 256, rope_scaling {type yarn, factor 4,
                     original_max_position_embeddings 64, beta_fast 32, beta_slow 1, mscale
                     0.707, mscale_all_dim 0.707} (DeepSeek-V2-Lite's values but factor and
                     original), so that `long` (160) runs past the original 64; GGUF arch
                     `deepseek2` with rope.scaling.* and yarn_log_multiplier (see below)

What it writes in each folder (as scripts/references/tiny_models.py does for its models):

  hf/config.json            Hugging Face config
  hf/model.safetensors      the weights, float32, Hugging Face tensor names (per-expert
                            mlp.experts.E.{gate,up,down}_proj.weight, as the checkpoints are)
  model.gguf                the same weights as a GGUF v3 file laid out as llama.cpp's converter
                            (conversion/deepseek.py DeepseekV2Model) writes DeepSeek-V2/V3 (all
                            tensors F32, alignment 32; kv_b_proj split into attn_k_b / attn_v_b;
                            MLA written as MQA: head_count_kv 1), with the tokenizer.* metadata of
                            the 512-piece stories260K vocabulary copied in so that llama.cpp can
                            load it
  numpy_logits_short.npy    float32 logits [T, 512] for every position of the `short` (24) and
  numpy_logits_long.npy     `long` (160) token sequences of
                            ../shared/testdata/models/synthetic/sequences.json (relative to the
                            repository root)
  shape.json                the hyperparameters, the seed, the routing margins and the GGUF
                            tensor shapes
(README.md in each folder is written by hand from this script's output; the
llamacpp_logits_*.npy files come from scripts/references/llamacpp_reference.sh.)

How to run (system Python with Debian's python3-numpy; nothing else needed):

  /usr/bin/python3 scripts/references/deepseek_moe_models.py                (all three models)
  /usr/bin/python3 scripts/references/deepseek_moe_models.py --model deepseek3
      (one of deepseek2, deepseek3, deepseek2yarn, all)
  /usr/bin/python3 scripts/references/deepseek_moe_models.py --model deepseek2 \\
          --llamacpp-lite-copy /tmp/dsv2-q0
      additionally writes /tmp/dsv2-q0/deepseek2moe-tiny/model.gguf (with --model deepseek2yarn
      /tmp/dsv2-q0/deepseek2-yarn-tiny/model.gguf; the models without q LoRA): model.gguf with
      ONE extra key, deepseek2.attention.q_lora_rank = 0 (u32), and nothing else changed. llama.cpp's
      deepseek2 loader requires that key unless the model has 26 or 27 layers (its "lite"
      check); the converter does not write it for q_lora_rank null. With 0, llama.cpp loads
      attn_q as DeepSeek-V2-Lite's. Only for making llama.cpp's reference; not committed:
        OUT_DIR=/tmp/dsv2-q0-out scripts/references/llamacpp_reference.sh \\
            /tmp/dsv2-q0/deepseek2moe-tiny      (or /tmp/dsv2-q0/deepseek2-yarn-tiny)

It is self-contained apart from the generic file helpers of tiny_models.py (safetensors and
GGUF readers/writers, the tokenizer metadata copy, RMSNorm / SiLU / sigmoid, ggml's RoPE): pure
NumPy, float64 compute, and it shares no code with the engine (llmserve). Weights are drawn with
np.random.default_rng(seed) (std-1 embeddings, 1/sqrt(fan_in) matrices, norms 1 + 0.1 N(0,1),
the V3 e_score_correction_bias 0.25 + 0.05 N(0,1): the common offset changes no routing
decision and keeps every sigmoid + bias > 0), rounded to float32 for storage, and the forward
pass uses exactly those float32 values promoted to float64; the logits are cast to float32 at
the end. Seeds are tried from 1 upwards until the routing is robust on both sequences: the gap
between the k-th and (k+1)-th selection value (V2: softmax probability; V3: bias-corrected
sigmoid score among the experts of the kept groups) is >= 1e-3 at every MoE layer and token, for
V3 also the gap between the topk_group-th and the next group score, and every V3 selection value
is > 0 (see below); every expert is chosen by some token in each MoE layer on `long`; and the
top-1 logit leads the top-2 by >= 2e-3 at every position. Rerunning reproduces every file byte
for byte.

Self-checks after writing: the GGUF and safetensors files are read back and every tensor is
asserted equal to the generated one (GGUF expert stacks equal the HF per-expert tensors;
re-joining attn_k_b / attn_v_b gives back kv_b_proj); the metadata is read back with its types;
and a second, independent forward pass that reads only the GGUF (llama.cpp's graph: absorbed MLA
with attn_k_b / attn_v_b, one shared RoPE key head, ggml NORM RoPE over rope.dimension_count,
kq_scale 1/sqrt(key_length_mla), routing from expert_gating_func / exp_probs_b /
expert_group_count / expert_weights_norm / expert_weights_scale) must reproduce the Hugging Face
forward's logits to 1e-9 with the same argmax. A table of what the usual mistakes do to the
logits is printed.

For deepseek2-yarn-tiny also: the YaRN numbers are printed (corr dims, inv_freq, _mscale,
softmax scale); the same weights without rope_scaling must change the `long` logits by > 1e-2
(asserted; also printed: transformers' own DeepseekV2Attention scale, see below); q.k of the
YaRN RoPE in transformers' complex form and in modeling_deepseek.py's de-interleave +
rotate-half form must equal ggml rope_yarn set up from the GGUF metadata alone (llama.cpp's
freq_scale, corr dims, ext_factor, attn_factor) to 1e-12 on positions 0..159. The GGUF holds
yarn_log_multiplier = 0.1 * mscale_all_dim as f32 (0.07069999724626541), so the mscale_all_dim
llama.cpp recovers is 0.7069999724626541, not 0.707: the softmax-scale factor differs by
-7.0e-9 relative, which moves the logits by about 2.5e-8. The GGUF-only forward is therefore
compared (to 1e-9, same argmax and experts) with the HF forward run with mscale = mscale_all_dim
= that recovered value, and that HF forward with the committed (0.707) logits (< 1e-6, same
argmax; printed). The mistake table adds YaRN's: rope.scaling ignored, the softmax scale
without mscale^2, yarn_log_multiplier without the / 0.1, the key missing, ext_factor 0, and the
corr dims from context_length (256) instead of original_context_length (64), which here gives
the same dims [0, 2] and so is NOT caught by this model.

Sources of the semantics:
  * transformers models/deepseek_v2/modeling_deepseek_v2.py:
    - DeepseekV2Attention: q = q_proj(x) (q_lora_rank null) or q_b_proj(q_a_layernorm(q_a_proj(
      x))), viewed [T, H, qk_nope + qk_rope], split q_nope, q_pe; compressed_kv =
      kv_a_proj_with_mqa(x) [T, kv_lora_rank + qk_rope], split c, k_pe; kv =
      kv_b_proj(kv_a_layernorm(c)) viewed [T, H, qk_nope + v_head_dim], split k_nope, value;
      k_pe is one head [T, 1, qk_rope] shared by all heads; apply_rotary_emb: view_as_complex of
      adjacent pairs (x[2i], x[2i+1]) times freqs_cis = exp(i pos inv_freq_i), inv_freq =
      theta^(-arange(0, d, 2) / d) with d = head_dim = qk_rope_head_dim (DeepseekV2Config sets
      head_dim = qk_rope_head_dim); query = cat(q_nope, q_pe), key = cat(k_nope, k_pe expanded);
      scaling = (qk_nope + qk_rope)^-0.5; causal softmax; o_proj.
      No biases (attention_bias false).
    - DeepseekV2RotaryEmbedding with rope_scaling (deepseek2-yarn-tiny): inv_freq and
      attention_scaling from modeling_rope_utils._compute_yarn_parameters, freqs_cis *=
      attention_scaling. NOTE: transformers' DeepseekV2Attention keeps scaling = (qk_nope +
      qk_rope)^-0.5 under YaRN (no mscale_all_dim term; its DeepseekV3Attention has it). The
      reference here follows DeepSeek's own code (below), as llama.cpp, vLLM and SGLang do;
      transformers' reading is printed (max|diff| 0.94 short / 1.19 long, argmaxes flip).
    - DeepseekV2Moe: router_logits = gate(x) in float32 (float64 here); softmax; topk_method
      "greedy": top-k of the probabilities; topk_weight *= routed_scaling_factor. NOTE: this
      transformers class ignores norm_topk_prob (DeepSeek's own remote modeling_deepseek.py
      normalises INSTEAD of scaling when norm_topk_prob, and llama.cpp normalises AND scales);
      norm_topk_prob is false here, where all three agree. Routed output = sum_k w_k *
      expert_k(x), plus shared_experts(x) (a DeepseekV2MLP of moe_intermediate_size *
      n_shared_experts, no gate). A layer is MoE when layer_idx >= first_k_dense_replace (the
      remote code also requires layer_idx % moe_layer_freq == 0; moe_layer_freq is 1 here), dense
      DeepseekV2MLP of intermediate_size otherwise. RMSNorm x * rsqrt(mean(x^2) + eps) * w.
  * DeepSeek's remote modeling_deepseek.py (deepseek-ai/DeepSeek-V2-Lite on the Hub; the
    reference for deepseek2-yarn-tiny's YaRN):
    - DeepseekV2YarnRotaryEmbedding._set_cos_sin_cache, dim = qk_rope_head_dim: freq_extra =
      1 / base^(arange(0, dim, 2) / dim); freq_inter = 1 / (factor * base^(arange(0, dim, 2) /
      dim)); low, high = yarn_find_correction_range(beta_fast, beta_slow, dim, base,
      original_max_position_embeddings): yarn_find_correction_dim(r) = dim ln(orig / (r 2 pi)) /
      (2 ln base), low = max(floor(dim(beta_fast)), 0), high = min(ceil(dim(beta_slow)), dim - 1);
      inv_freq_mask = 1 - yarn_linear_ramp_mask(low, high, dim // 2) (clamp((arange(n) - min) /
      (max - min), 0, 1), max += 0.001 if min == max); inv_freq = freq_inter (1 - mask) +
      freq_extra mask; cos / sin times _mscale = yarn_get_mscale(factor, mscale) /
      yarn_get_mscale(factor, mscale_all_dim), yarn_get_mscale(s, m) = 1 if s <= 1 else 0.1 m
      ln(s) + 1. (transformers' _compute_yarn_parameters computes the same inv_freq and, with
      mscale and mscale_all_dim both set, the same attention factor; the versions that take
      factor = max_position_embeddings / original agree: 256 / 64 = 4.)
      Here: corr dims -0.497 .. 1.008 -> low 0, high 2; mask [1, 0.5, 0, 0]; inv_freq [1,
      0.0625, 0.0025, 0.00025] (pair 0 extrapolated, pair 1 half, pairs 2-3 / 4); _mscale 1.
    - apply_rotary_pos_emb: q / k de-interleaved (view(d/2, 2).transpose) then rotate-half: the
      same q.k as adjacent-pair rotation (checked).
    - DeepseekV2Attention: softmax_scale = q_head_dim^-0.5, times mscale * mscale with mscale =
      yarn_get_mscale(factor, mscale_all_dim) when rope_scaling has a nonzero mscale_all_dim:
      here 24^-0.5 * 1.0980110113^2 = 0.2460978219.
  * transformers models/deepseek_v3/modeling_deepseek_v3.py:
    - DeepseekV3Attention: the same MLA; RoPE by apply_rotary_pos_emb_interleave when
      config.rope_interleave (true, the default, written in config.json): q.view(..., d/2,
      2).transpose(-1, -2).reshape(..., d) (de-interleave) then rotate-half with emb = cat(freqs,
      freqs). That equals rotating the adjacent pairs and permuting the output dims the same way
      for q and k, so q.k is that of adjacent-pair rotation (ggml NORM). With rope_interleave
      false transformers would apply rotate-half to the raw dims (NEOX pairs) instead; llama.cpp
      always uses NORM for deepseek2.
    - DeepseekV3TopkRouter: scores = sigmoid(x @ weight.T) (float32 in HF); scores_for_choice =
      scores + e_score_correction_bias; group_scores = sum of the top-2 scores_for_choice in
      each of n_group contiguous groups of E / n_group experts; top topk_group groups kept,
      the other experts' scores_for_choice set to 0.0 (masked_fill); top-k of that; weights =
      the UNBIASED scores gathered at the chosen experts; if norm_topk_prob: weights /= (sum +
      1e-20); weights *= routed_scaling_factor. Here every scores_for_choice value is > 0
      (asserted), so masking with 0.0 selects the same experts as llama.cpp's -inf.
    - DeepseekV3MoE: routed sum plus shared_experts (DeepseekV3MLP of moe_intermediate_size *
      n_shared_experts); MoE when layer_idx >= first_k_dense_replace.
    - Decoder layer (both): h = x + attn(input_layernorm(x)); out = h +
      mlp(post_attention_layernorm(h)); final model.norm, untied lm_head.
  * llama.cpp (peer checkout): conversion/deepseek.py DeepseekV2Model (registered for
    DeepseekV2ForCausalLM and DeepseekV3ForCausalLM), conversion/base.py
    TextModel.set_gguf_parameters, src/models/deepseek2.cpp, src/llama-model.cpp,
    src/llama-graph.cpp build_moe_ffn, src/llama-arch.cpp:
    - metadata, in the converter's order: block_count, context_length, embedding_length,
      feed_forward_length (intermediate_size), attention.head_count, attention.head_count_kv =
      1 (the converter sets num_key_value_heads = 1: "MLA converts into MQA"),
      rope.freq_base, attention.layer_norm_rms_epsilon, expert_count, expert_used_count,
      expert_group_count (n_group), expert_group_used_count (topk_group), expert_gating_func
      (scoring_func: softmax 1, sigmoid 2), general.file_type, leading_dense_block_count
      (first_k_dense_replace), vocab_size, attention.q_lora_rank (only when not null),
      attention.kv_lora_rank, attention.key_length = kv_lora_rank + qk_rope, attention.
      value_length = kv_lora_rank, attention.key_length_mla = qk_nope + qk_rope, attention.
      value_length_mla = v_head_dim, expert_feed_forward_length (moe_intermediate_size),
      expert_shared_count, expert_weights_scale (f32), expert_weights_norm (bool, only when
      true), rope.dimension_count (qk_rope_head_dim). No rope.scaling keys for rope_scaling
      null. For rope_type yarn (the converter's TextModel.__init__ copies "type" to
      "rope_type"), TextModel.set_gguf_parameters writes, right after head_count_kv:
      rope.scaling.type "yarn", rope.scaling.factor (f32), rope.scaling.original_context_length
      (u32), rope.scaling.yarn_ext_factor / yarn_attn_factor only for extrapolation_factor /
      attention_factor / attn_factor in the config (absent here), rope.scaling.yarn_beta_fast and
      yarn_beta_slow (f32) when the config has them (it has: written); and DeepseekV2Model
      .set_gguf_parameters, after rope.dimension_count, rope.scaling.yarn_log_multiplier = 0.1 *
      mscale_all_dim (f32) when mscale_all_dim is not None ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]).
      mscale itself is not written.
    - YaRN as llama.cpp reads it (yarn_llamacpp_deepseek2 below; llama-model.cpp,
      models/deepseek2.cpp, llama-context.cpp, ggml.c ggml_rope_yarn_corr_dims, ggml-cpu
      rope_yarn): freq_scale 1/4, ext_factor 1, corr dims [0, 2] (the same as transformers'),
      rope_yarn_log_mul = yarn_log_multiplier / 0.1; yarn_attn_factor = get_mscale(4, m) /
      get_mscale(4, m) / (1 + 0.1 ln 4) (m = mscale_all_dim for both: llama.cpp assumes mscale ==
      mscale_all_dim for deepseek2), so cos / sin * attn_factor * (1 + 0.1 ln 4) = 1; kq_scale =
      (attn_factor (1 + 0.1 ln 4) (1 + 0.1 m ln 4))^2 / sqrt(24) = mscale(4, m)^2 / sqrt(24).
      That equals DeepSeek's reading exactly here. It would differ (1) where mscale !=
      mscale_all_dim (llama.cpp cannot express the _mscale ratio: the GGUF has no mscale key),
      (2) by the f32 rounding of 0.1 * mscale_all_dim (-7e-9 relative on the scale here), and
      (3) where beta_fast / beta_slow are not 32 / 1: llama.cpp's deepseek2 never reads the
      yarn_beta_* keys (hparams defaults 32 / 1; only grok reads them).
    - tensors: token_embd, output_norm, output, blk.N.attn_norm, attn_q (no q LoRA) or attn_q_a,
      attn_q_a_norm, attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_k_b, attn_v_b, attn_output,
      ffn_norm; dense layers ffn_gate, ffn_up, ffn_down; MoE layers ffn_gate_inp,
      exp_probs_b.bias (V3), ffn_gate_exps, ffn_up_exps, ffn_down_exps (experts stacked
      outermost), ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp. kv_b_proj [H * (nope + v), L]
      is viewed [H, nope + v, L] and split: attn_k_b = the first nope rows of each head,
      transposed, numpy [H, L, nope] (GGUF {nope, L, H}); attn_v_b = the other v rows, numpy
      [H, v, L] (GGUF {L, v, H}); llama-model.cpp creates exactly these shapes.
    - graph (MLA path, is_mla: key_length_mla and value_length_mla present): q_nope absorbed
      through attn_k_b into the latent space, Q = [q_nope_absorbed (L), rope(q_pe)], K =
      [kv_a_norm(c) (L), rope(k_pe)] (one KV head), V = kv_a_norm(c), kq_scale =
      1/sqrt(key_length_mla), each head's output multiplied by attn_v_b; RoPE ggml NORM
      (llama_model_rope_type for deepseek2), n_rot = rope.dimension_count.
    - build_moe_ffn: probs = softmax or sigmoid of the router logits; selection = probs +
      exp_probs_b when present; if expert_group_count > 1: group score = sum of the top-2
      selection values per group, top expert_group_used_count groups, the rest -inf; top-k
      (argsort); weights = probs (unbiased) at the chosen experts; if expert_weights_norm:
      weights /= clamp(sum, 6.103515625e-5); if expert_weights_scale is not 0 or 1: weights *=
      it. Shared experts: build_ffn SwiGLU, added unweighted. With n_group 1 (V2) no group step.
    - the deepseek2 loader reads attention.q_lora_rank unconditionally unless n_layer is 26 or
      27 (or 48 with a 128256 vocabulary): a 3-layer V2 file without it is refused.
    - the YaRN model's llama.cpp logits (through the q_lora_rank = 0 copy, as deepseek2moe-tiny's)
      agree with the NumPy ones to 1.9e-6 (short) / 1.4e-6 (long), same argmax.
  * File formats: see tiny_models.py (GGUF v3 per ggml docs/gguf.md; safetensors).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_models import (  # noqa: E402  (generic helpers only: files, norms, ggml RoPE)
    DATA_DIR, GGUF_ALIGNMENT, MIN_ARGMAX_MARGIN, MIN_ROUTER_GAP, REPO_ROOT, SEQUENCES,
    T_BOOL, T_FLOAT32, T_STRING, T_UINT32, TOKENIZER_GGUF, read_gguf, read_safetensors,
    rms_norm, rope_ggml, sigmoid, silu, tokenizer_kvs_raw, write_gguf, write_safetensors)

# --------------------------------------------------------------------------
# Configs (modelled on DeepSeek-V2-Lite's / DeepSeek-V3's config.json, scaled down)
# --------------------------------------------------------------------------

DEEPSEEK2_CONFIG = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_shared_experts": 2,
    "n_routed_experts": 8,
    "routed_scaling_factor": 2.0,
    "kv_lora_rank": 32,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "qk_nope_head_dim": 16,
    "topk_method": "greedy",
    "n_group": 1,
    "topk_group": 1,
    "num_experts_per_tok": 2,
    "moe_layer_freq": 1,
    "first_k_dense_replace": 1,
    "norm_topk_prob": False,
    "scoring_func": "softmax",
    "hidden_act": "silu",
    "max_position_embeddings": 512,
    "initializer_range": 0.02,
    "rms_norm_eps": 1e-6,
    "use_cache": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "torch_dtype": "float32",
}

DEEPSEEK3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_shared_experts": 1,
    "n_routed_experts": 16,
    "routed_scaling_factor": 2.5,
    "kv_lora_rank": 32,
    "q_lora_rank": 24,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "qk_nope_head_dim": 16,
    "topk_method": "noaux_tc",
    "n_group": 4,
    "topk_group": 2,
    "num_experts_per_tok": 4,
    "moe_layer_freq": 1,
    "first_k_dense_replace": 1,
    "norm_topk_prob": True,
    "scoring_func": "sigmoid",
    "rope_interleave": True,
    "hidden_act": "silu",
    "max_position_embeddings": 512,
    "initializer_range": 0.02,
    "rms_norm_eps": 1e-6,
    "use_cache": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "torch_dtype": "float32",
}

# deepseek2moe-tiny with DeepSeek's YaRN: DeepSeek-V2-Lite's rope_scaling (its keys, in its
# config.json's order, its beta_fast / beta_slow / mscale / mscale_all_dim) but factor 4 from an
# original context of 64, so that the `long` sequence (160) runs past it and the correction
# range falls inside the 4 frequency pairs of qk_rope_head_dim 8. max_position_embeddings =
# factor * original (transformers versions that re-derive factor from that ratio agree).
DEEPSEEK2YARN_CONFIG = dict(DEEPSEEK2_CONFIG)
DEEPSEEK2YARN_CONFIG["max_position_embeddings"] = 256
DEEPSEEK2YARN_CONFIG["rope_scaling"] = {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 4.0,
    "mscale": 0.707,
    "mscale_all_dim": 0.707,
    "original_max_position_embeddings": 64,
    "type": "yarn",
}

# name -> (output folder, HF config)
MODELS = {
    "deepseek2": ("deepseek2moe-tiny", DEEPSEEK2_CONFIG),
    "deepseek3": ("deepseek3-tiny", DEEPSEEK3_CONFIG),
    "deepseek2yarn": ("deepseek2-yarn-tiny", DEEPSEEK2YARN_CONFIG),
}
ARCH = "deepseek2"
# e_score_correction_bias ~ BIAS_OFFSET + BIAS_STD N(0, 1). The common offset changes neither
# the group choice nor the top-k (every expert's selection value moves by the same amount, each
# group score by twice it) nor the weights (they are the unbiased scores); it keeps every
# selection value sigmoid + bias > 0, so that transformers' 0.0 masking of the dropped groups
# and llama.cpp's -inf pick the same experts. Without it (zero-mean 0.05 N(0, 1)) about 95% of
# the seeds have some value <= 0 on these sequences.
BIAS_OFFSET = 0.25
BIAS_STD = 0.05
# 16 experts, top-4 of the 8 in the 2 kept groups, and a group-score gap too: about 1 seed in
# 400 passes, so search further than tiny_models.py's MAX_SEED.
MAX_SEED_DS = 5000


def hparams(cfg):
    mt = cfg["model_type"]
    assert mt in ("deepseek_v2", "deepseek_v3"), mt
    assert not cfg.get("attention_bias", False)
    assert cfg.get("moe_layer_freq", 1) == 1
    h = {
        "v3": mt == "deepseek_v3",
        "d": cfg["hidden_size"],
        "n_layers": cfg["num_hidden_layers"],
        "nh": cfg["num_attention_heads"],
        "nope": cfg["qk_nope_head_dim"],
        "rope": cfg["qk_rope_head_dim"],
        "v": cfg["v_head_dim"],
        "kv_lora": cfg["kv_lora_rank"],
        "q_lora": cfg.get("q_lora_rank"),
        "ffn": cfg["intermediate_size"],
        "first_dense": cfg.get("first_k_dense_replace", 0),
        "n_experts": cfg["n_routed_experts"],
        "k": cfg["num_experts_per_tok"],
        "expert_ffn": cfg["moe_intermediate_size"],
        "n_shared": cfg["n_shared_experts"],
        "scale": float(cfg["routed_scaling_factor"]),
        "norm_topk": bool(cfg.get("norm_topk_prob", False)),
        "scoring": cfg["scoring_func"],
        "topk_method": cfg["topk_method"],
        "n_group": cfg.get("n_group") or 1,
        "topk_group": cfg.get("topk_group") or 1,
        "vocab": cfg["vocab_size"],
        "eps": cfg["rms_norm_eps"],
        "theta": cfg["rope_theta"],
        "tie": cfg.get("tie_word_embeddings", False),
    }
    h["yarn"] = None if cfg.get("rope_scaling") is None else deepseek_yarn(cfg, h["rope"], h["theta"])
    h["shared_ffn"] = h["expert_ffn"] * h["n_shared"]
    if h["v3"]:
        assert h["scoring"] == "sigmoid" and h["topk_method"] == "noaux_tc"
        assert cfg.get("rope_interleave", True) is True
    else:
        # transformers' DeepseekV2Moe: softmax always; greedy (n_group unused); ignores
        # norm_topk_prob (see the module docstring): only the false case is unambiguous.
        assert h["scoring"] == "softmax" and h["topk_method"] == "greedy" and not h["norm_topk"]
        assert h["n_group"] == 1 and h["topk_group"] == 1
    return h


def yarn_get_mscale(scale, mscale=1.0):
    """modeling_deepseek.py yarn_get_mscale (transformers' get_mscale)."""
    import math
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def deepseek_yarn(cfg, dim, base):
    """DeepSeek's YaRN in float64: modeling_deepseek.py DeepseekV2YarnRotaryEmbedding
    ._set_cos_sin_cache (= transformers' _compute_yarn_parameters with mscale / mscale_all_dim)
    and the DeepseekV2Attention softmax scale. dim = qk_rope_head_dim. Returns inv_freq [dim/2],
    the cos/sin factor (_mscale), the softmax-scale factor mscale(factor, mscale_all_dim)^2 and
    the intermediate values."""
    import math
    rs = cfg["rope_scaling"]
    assert rs.get("rope_type", rs.get("type")) == "yarn", rs
    assert set(rs) <= {"type", "rope_type", "factor", "original_max_position_embeddings",
                       "beta_fast", "beta_slow", "mscale", "mscale_all_dim"}, rs
    factor = float(rs["factor"])
    orig = rs["original_max_position_embeddings"]
    # transformers versions that set factor = max_position_embeddings / original get the same.
    assert cfg["max_position_embeddings"] / orig == factor, (cfg["max_position_embeddings"], orig, factor)
    beta_fast, beta_slow = rs.get("beta_fast", 32), rs.get("beta_slow", 1)
    mscale, mscale_all_dim = rs.get("mscale", 1), rs.get("mscale_all_dim", 0)
    find_dim = lambda n_rot: (dim * math.log(orig / (n_rot * 2 * math.pi))) / (2 * math.log(base))
    low = max(math.floor(find_dim(beta_fast)), 0)                # yarn_find_correction_range
    high = min(math.ceil(find_dim(beta_slow)), dim - 1)
    hi = high + 0.001 if low == high else high                    # yarn_linear_ramp_mask
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (hi - low), 0.0, 1.0)
    inv_freq_mask = 1.0 - ramp
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    freq_extra, freq_inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    inv_freq_y = freq_inter * (1.0 - inv_freq_mask) + freq_extra * inv_freq_mask
    rope_mscale = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
    softmax_factor = yarn_get_mscale(factor, mscale_all_dim) ** 2 if mscale_all_dim else 1.0
    return {"factor": factor, "original": orig, "beta_fast": beta_fast, "beta_slow": beta_slow,
            "mscale": mscale, "mscale_all_dim": mscale_all_dim,
            "corr_dim_fast": find_dim(beta_fast), "corr_dim_slow": find_dim(beta_slow),
            "low": low, "high": high, "inv_freq_mask": inv_freq_mask,
            "freq_extra": freq_extra, "freq_inter": freq_inter, "inv_freq": inv_freq_y,
            "rope_mscale": rope_mscale, "softmax_factor": softmax_factor,
            "mscale_kq": yarn_get_mscale(factor, mscale_all_dim)}


def is_moe_layer(h, i):
    return i >= h["first_dense"]


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

def make_weights(cfg, seed):
    """HF-named float32 weights, drawn in a fixed order from default_rng(seed)."""
    h = hparams(cfg)
    rng = np.random.default_rng(seed)
    d, nh = h["d"], h["nh"]
    qk = h["nope"] + h["rope"]

    def mat(rows, cols, std=None):
        s = 1.0 / np.sqrt(cols) if std is None else std
        return (rng.standard_normal((rows, cols)) * s).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(h["vocab"], d, std=1.0)}
    for i in range(h["n_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        w[p + "input_layernorm.weight"] = norm(d)
        if h["q_lora"] is None:
            w[a + "q_proj.weight"] = mat(nh * qk, d)
        else:
            w[a + "q_a_proj.weight"] = mat(h["q_lora"], d)
            w[a + "q_a_layernorm.weight"] = norm(h["q_lora"])
            w[a + "q_b_proj.weight"] = mat(nh * qk, h["q_lora"])
        w[a + "kv_a_proj_with_mqa.weight"] = mat(h["kv_lora"] + h["rope"], d)
        w[a + "kv_a_layernorm.weight"] = norm(h["kv_lora"])
        w[a + "kv_b_proj.weight"] = mat(nh * (h["nope"] + h["v"]), h["kv_lora"])
        w[a + "o_proj.weight"] = mat(d, nh * h["v"])
        w[p + "post_attention_layernorm.weight"] = norm(d)
        m = p + "mlp."
        if not is_moe_layer(h, i):
            w[m + "gate_proj.weight"] = mat(h["ffn"], d)
            w[m + "up_proj.weight"] = mat(h["ffn"], d)
            w[m + "down_proj.weight"] = mat(d, h["ffn"])
            continue
        w[m + "gate.weight"] = mat(h["n_experts"], d)
        if h["v3"]:
            w[m + "gate.e_score_correction_bias"] = (
                BIAS_OFFSET + BIAS_STD * rng.standard_normal(h["n_experts"])).astype(np.float32)
        for e in range(h["n_experts"]):
            w[m + f"experts.{e}.gate_proj.weight"] = mat(h["expert_ffn"], d)
            w[m + f"experts.{e}.up_proj.weight"] = mat(h["expert_ffn"], d)
            w[m + f"experts.{e}.down_proj.weight"] = mat(d, h["expert_ffn"])
        w[m + "shared_experts.gate_proj.weight"] = mat(h["shared_ffn"], d)
        w[m + "shared_experts.up_proj.weight"] = mat(h["shared_ffn"], d)
        w[m + "shared_experts.down_proj.weight"] = mat(d, h["shared_ffn"])
    w["model.norm.weight"] = norm(d)
    w["lm_head.weight"] = mat(h["vocab"], d, std=1.0 / np.sqrt(d))
    return w


# --------------------------------------------------------------------------
# Hugging Face forward pass (float64)
# --------------------------------------------------------------------------

def inv_freq(theta, dim):
    return 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))


def rope_v2_complex(x, positions, theta, yarn=None):
    """transformers DeepseekV2 apply_rotary_emb: view_as_complex of adjacent pairs times
    freqs_cis = polar(1, pos * inv_freq). x: [T, heads, d]. yarn: deepseek_yarn() or None; with
    it inv_freq is YaRN's and freqs_cis is multiplied by its _mscale (attention_scaling)."""
    d = x.shape[-1]
    freqs = inv_freq(theta, d) if yarn is None else yarn["inv_freq"]
    ang = positions.astype(np.float64)[:, None] * freqs[None, :]                 # [T, d/2]
    xc = x[..., 0::2] + 1j * x[..., 1::2]
    out = xc * np.exp(1j * ang)[:, None, :]
    if yarn is not None:
        out = out * yarn["rope_mscale"]
    r = np.empty_like(x)
    r[..., 0::2], r[..., 1::2] = out.real, out.imag
    return r


def rope_v3_interleave(x, positions, theta, yarn=None):
    """transformers DeepseekV3 apply_rotary_pos_emb_interleave: de-interleave (view(d/2, 2)
    .transpose) then rotate-half with emb = cat(freqs, freqs). x: [T, heads, d]. Also DeepSeek's
    own modeling_deepseek.py apply_rotary_pos_emb (V2 and V3: the same de-interleave), whose
    DeepseekV2YarnRotaryEmbedding multiplies cos / sin by _mscale (yarn: deepseek_yarn())."""
    d = x.shape[-1]
    x = x.reshape(*x.shape[:-1], d // 2, 2).swapaxes(-1, -2).reshape(x.shape)
    freqs = positions.astype(np.float64)[:, None] * (
        inv_freq(theta, d) if yarn is None else yarn["inv_freq"])[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    if yarn is not None:
        cos, sin = cos * yarn["rope_mscale"], sin * yarn["rope_mscale"]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + rot * sin


def causal_softmax(scores):
    """scores [H, T, S=T] -> causal softmax probabilities."""
    T = scores.shape[-1]
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)
    scores = np.where(mask[None], -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    return p / p.sum(axis=-1, keepdims=True)


def mla_attention_hf(x, W, p, h, native_v2_scale=False):
    """DeepseekV2Attention / DeepseekV3Attention, unabsorbed. x: [T, d] (input_layernorm'ed).
    native_v2_scale: transformers' own DeepseekV2Attention, which leaves the softmax scale at
    (nope + rope)^-0.5 under YaRN (only for the comparison printed for deepseek2-yarn-tiny)."""
    T = x.shape[0]
    nh, nope, rope, vd, L = h["nh"], h["nope"], h["rope"], h["v"], h["kv_lora"]
    f = lambda n: W[p + "self_attn." + n].astype(np.float64)
    if h["q_lora"] is None:
        q = x @ f("q_proj.weight").T
    else:
        q = rms_norm(x @ f("q_a_proj.weight").T, W[p + "self_attn.q_a_layernorm.weight"], h["eps"])
        q = q @ f("q_b_proj.weight").T
    q = q.reshape(T, nh, nope + rope)
    q_nope, q_pe = q[..., :nope], q[..., nope:]
    ckv = x @ f("kv_a_proj_with_mqa.weight").T                      # [T, L + rope]
    c, k_pe = ckv[:, :L], ckv[:, L:].reshape(T, 1, rope)
    kv = (rms_norm(c, W[p + "self_attn.kv_a_layernorm.weight"], h["eps"])
          @ f("kv_b_proj.weight").T).reshape(T, nh, nope + vd)
    k_nope, value = kv[..., :nope], kv[..., nope:]
    pos = np.arange(T)
    rope_fn = rope_v3_interleave if h["v3"] else rope_v2_complex
    y = h["yarn"]
    q_pe, k_pe = rope_fn(q_pe, pos, h["theta"], y), rope_fn(k_pe, pos, h["theta"], y)
    query = np.concatenate([q_nope, q_pe], axis=-1)                           # [T, H, 24]
    key = np.concatenate([k_nope, np.broadcast_to(k_pe, (T, nh, rope))], axis=-1)
    scale = (nope + rope) ** -0.5
    if y is not None and not native_v2_scale:
        scale = scale * y["softmax_factor"]     # DeepseekV2Attention: * mscale(mscale_all_dim)^2
    scores = np.einsum("thd,shd->hts", query, key) * scale
    probs = causal_softmax(scores)
    out = np.einsum("hts,shd->thd", probs, value).reshape(T, nh * vd)
    return out @ f("o_proj.weight").T


def swiglu(x, gate_w, up_w, down_w):
    g = x @ gate_w.astype(np.float64).T
    u = x @ up_w.astype(np.float64).T
    return (silu(g) * u) @ down_w.astype(np.float64).T


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def route_hf(x, W, p, h, stats):
    """DeepseekV2Moe.route_tokens_to_experts (softmax, greedy) or DeepseekV3TopkRouter
    (sigmoid, noaux_tc). Returns (top [T, k], weights [T, k])."""
    k, E = h["k"], h["n_experts"]
    logits = x @ W[p + "mlp.gate.weight"].astype(np.float64).T                 # [T, E]
    T = logits.shape[0]
    st = {}
    if not h["v3"]:
        scores = softmax(logits)
        order = np.argsort(-scores, axis=-1, kind="stable")    # ties: lower expert id first
        top = order[:, :k]
        w = np.take_along_axis(scores, top, axis=-1)
        s = np.take_along_axis(scores, order, axis=-1)
        st["gap"] = s[:, k - 1] - s[:, k]
    else:
        scores = sigmoid(logits)
        choice = scores + W[p + "mlp.gate.e_score_correction_bias"].astype(np.float64)[None, :]
        st["min_choice"] = float(choice.min())
        ng, tg = h["n_group"], h["topk_group"]
        per = E // ng
        gsc = np.sort(choice.reshape(T, ng, per), axis=-1)[..., -2:].sum(axis=-1)   # [T, ng]
        gorder = np.argsort(-gsc, axis=-1, kind="stable")
        gs = np.take_along_axis(gsc, gorder, axis=-1)
        st["group_gap"] = gs[:, tg - 1] - gs[:, tg]
        keep = np.zeros((T, ng), dtype=bool)
        np.put_along_axis(keep, gorder[:, :tg], True, axis=-1)
        emask = np.repeat(keep, per, axis=1)                                      # [T, E]
        # transformers masks with 0.0; equal to -inf (llama.cpp) while every choice is > 0.
        masked = np.where(emask, choice, 0.0)
        order = np.argsort(-masked, axis=-1, kind="stable")
        top = order[:, :k]
        s = np.take_along_axis(masked, order, axis=-1)
        st["gap"] = s[:, k - 1] - s[:, k]
        st["kept_groups"] = gorder[:, :tg]
        w = np.take_along_axis(scores, top, axis=-1)      # unbiased scores
        if h["norm_topk"]:
            w = w / (w.sum(axis=-1, keepdims=True) + 1e-20)
    w = w * h["scale"]
    st["top"] = top
    stats.append(st)
    return top, w


def mix_experts(x, top, w, expert_fn, ne):
    out = np.zeros_like(x)
    for e in range(ne):
        rows, slot = np.nonzero(top == e)
        if rows.size:
            out[rows] += w[rows, slot][:, None] * expert_fn(e, x[rows])
    return out


def moe_hf(x, W, p, h, stats):
    top, w = route_hf(x, W, p, h, stats)
    m = p + "mlp."
    out = mix_experts(x, top, w, lambda e, xs: swiglu(
        xs, W[m + f"experts.{e}.gate_proj.weight"], W[m + f"experts.{e}.up_proj.weight"],
        W[m + f"experts.{e}.down_proj.weight"]), h["n_experts"])
    return out + swiglu(x, W[m + "shared_experts.gate_proj.weight"],
                        W[m + "shared_experts.up_proj.weight"],
                        W[m + "shared_experts.down_proj.weight"])


def forward(W, cfg, tokens, stats=None, native_v2_scale=False):
    """Float64 logits [T, vocab]; stats (list) gets one entry per MoE layer. native_v2_scale:
    see mla_attention_hf."""
    stats = [] if stats is None else stats
    h = hparams(cfg)
    eps = h["eps"]
    x = W["model.embed_tokens.weight"].astype(np.float64)[np.asarray(tokens, dtype=np.int64)]
    for i in range(h["n_layers"]):
        p = f"model.layers.{i}."
        x = x + mla_attention_hf(rms_norm(x, W[p + "input_layernorm.weight"], eps), W, p, h,
                                 native_v2_scale)
        y = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if is_moe_layer(h, i):
            x = x + moe_hf(y, W, p, h, stats)
        else:
            x = x + swiglu(y, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"],
                           W[p + "mlp.down_proj.weight"])
    x = rms_norm(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].astype(np.float64).T


# --------------------------------------------------------------------------
# GGUF layout (llama.cpp's converter)
# --------------------------------------------------------------------------

def split_kv_b(kv_b, h):
    """conversion/deepseek.py: kv_b.view(H, nope + v, L), split [nope, v] on dim 1, k_b
    transposed (1, 2). Returns (k_b [H, L, nope], v_b [H, v, L])."""
    kvb = kv_b.reshape(h["nh"], h["nope"] + h["v"], h["kv_lora"])
    k_b = np.ascontiguousarray(kvb[:, :h["nope"], :].transpose(0, 2, 1))
    v_b = np.ascontiguousarray(kvb[:, h["nope"]:, :])
    return k_b, v_b


def hf_to_gguf_tensors(W, cfg):
    h = hparams(cfg)
    g = {"token_embd.weight": W["model.embed_tokens.weight"]}
    for i in range(h["n_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        a = p + "self_attn."
        g[b + "attn_norm.weight"] = W[p + "input_layernorm.weight"]
        if h["q_lora"] is None:
            g[b + "attn_q.weight"] = W[a + "q_proj.weight"]
        else:
            g[b + "attn_q_a.weight"] = W[a + "q_a_proj.weight"]
            g[b + "attn_q_a_norm.weight"] = W[a + "q_a_layernorm.weight"]
            g[b + "attn_q_b.weight"] = W[a + "q_b_proj.weight"]
        g[b + "attn_kv_a_mqa.weight"] = W[a + "kv_a_proj_with_mqa.weight"]
        g[b + "attn_kv_a_norm.weight"] = W[a + "kv_a_layernorm.weight"]
        g[b + "attn_k_b.weight"], g[b + "attn_v_b.weight"] = split_kv_b(W[a + "kv_b_proj.weight"], h)
        g[b + "attn_output.weight"] = W[a + "o_proj.weight"]
        g[b + "ffn_norm.weight"] = W[p + "post_attention_layernorm.weight"]
        m = p + "mlp."
        if not is_moe_layer(h, i):
            for gn, hn in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
                g[b + gn + ".weight"] = W[m + hn + ".weight"]
            continue
        g[b + "ffn_gate_inp.weight"] = W[m + "gate.weight"]
        if h["v3"]:
            g[b + "exp_probs_b.bias"] = W[m + "gate.e_score_correction_bias"]
        for gn, hn in (("ffn_gate_exps", "gate_proj"), ("ffn_up_exps", "up_proj"),
                       ("ffn_down_exps", "down_proj")):
            g[b + gn + ".weight"] = np.stack(
                [W[m + f"experts.{e}.{hn}.weight"] for e in range(h["n_experts"])])
        for gn, hn in (("ffn_gate_shexp", "gate_proj"), ("ffn_up_shexp", "up_proj"),
                       ("ffn_down_shexp", "down_proj")):
            g[b + gn + ".weight"] = W[m + "shared_experts." + hn + ".weight"]
    g["output_norm.weight"] = W["model.norm.weight"]
    g["output.weight"] = W["lm_head.weight"]
    return g


def gguf_metadata(cfg, name, extra_q_lora_zero=False):
    """The keys conversion/base.py TextModel.set_gguf_parameters + conversion/deepseek.py
    DeepseekV2Model.set_gguf_parameters write, in that order (a key written twice, as
    expert_count, keeps its first position, as the gguf writer's dict does)."""
    h = hparams(cfg)
    a = ARCH
    u32 = lambda x: (T_UINT32, int(x))
    f32 = lambda x: (T_FLOAT32, float(x))
    kv = [
        ("general.architecture", (T_STRING, a)),
        ("general.name", (T_STRING, name)),
        ("general.alignment", u32(GGUF_ALIGNMENT)),
        (f"{a}.block_count", u32(h["n_layers"])),
        (f"{a}.context_length", u32(cfg["max_position_embeddings"])),
        (f"{a}.embedding_length", u32(h["d"])),
        (f"{a}.feed_forward_length", u32(h["ffn"])),
        (f"{a}.attention.head_count", u32(h["nh"])),
        (f"{a}.attention.head_count_kv", u32(1)),      # MLA written as MQA
    ]
    y = h["yarn"]
    if y is not None:
        # TextModel.set_gguf_parameters for rope_type "yarn" (the converter copies "type" to
        # "rope_type"): type, factor, original_context_length, then yarn_ext_factor /
        # yarn_attn_factor (absent: no extrapolation_factor / attention_factor / attn_factor in
        # the config), yarn_beta_fast, yarn_beta_slow (present in the config: written).
        kv += [
            (f"{a}.rope.scaling.type", (T_STRING, "yarn")),
            (f"{a}.rope.scaling.factor", f32(y["factor"])),
            (f"{a}.rope.scaling.original_context_length", u32(y["original"])),
            (f"{a}.rope.scaling.yarn_beta_fast", f32(y["beta_fast"])),
            (f"{a}.rope.scaling.yarn_beta_slow", f32(y["beta_slow"])),
        ]
    kv += [
        (f"{a}.rope.freq_base", f32(h["theta"])),
        (f"{a}.attention.layer_norm_rms_epsilon", f32(h["eps"])),
        (f"{a}.expert_count", u32(h["n_experts"])),
        (f"{a}.expert_used_count", u32(h["k"])),
        (f"{a}.expert_group_count", u32(h["n_group"])),
        (f"{a}.expert_group_used_count", u32(h["topk_group"])),
        (f"{a}.expert_gating_func", u32({"softmax": 1, "sigmoid": 2}[h["scoring"]])),
        ("general.file_type", u32(0)),                 # LLAMA_FTYPE_ALL_F32
        (f"{a}.leading_dense_block_count", u32(h["first_dense"])),
        (f"{a}.vocab_size", u32(h["vocab"])),
    ]
    if h["q_lora"] is not None:
        kv += [(f"{a}.attention.q_lora_rank", u32(h["q_lora"]))]
    elif extra_q_lora_zero:
        kv += [(f"{a}.attention.q_lora_rank", u32(0))]   # only in the llama.cpp copy
    kv += [
        (f"{a}.attention.kv_lora_rank", u32(h["kv_lora"])),
        (f"{a}.attention.key_length", u32(h["kv_lora"] + h["rope"])),
        (f"{a}.attention.value_length", u32(h["kv_lora"])),
        (f"{a}.attention.key_length_mla", u32(h["nope"] + h["rope"])),
        (f"{a}.attention.value_length_mla", u32(h["v"])),
        (f"{a}.expert_feed_forward_length", u32(h["expert_ffn"])),
        (f"{a}.expert_shared_count", u32(h["n_shared"])),
        (f"{a}.expert_weights_scale", f32(h["scale"])),
    ]
    if h["norm_topk"]:
        kv += [(f"{a}.expert_weights_norm", (T_BOOL, True))]
    kv += [
        (f"{a}.rope.dimension_count", u32(h["rope"])),
    ]
    if y is not None and "mscale_all_dim" in cfg["rope_scaling"]:   # "is not None" there
        # DeepseekV2Model.set_gguf_parameters [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]: 0.1 * mscale_all_dim
        kv += [(f"{a}.rope.scaling.yarn_log_multiplier", f32(0.1 * y["mscale_all_dim"]))]
    kv += [
        ("tokenizer.ggml.bos_token_id", u32(cfg["bos_token_id"])),
        ("tokenizer.ggml.eos_token_id", u32(cfg["eos_token_id"])),
    ]
    return kv


# --------------------------------------------------------------------------
# GGUF forward pass (float64): llama.cpp's reading of the file
# --------------------------------------------------------------------------

def yarn_llamacpp_deepseek2(meta, n_rot, theta, mistake=None):
    """llama.cpp's YaRN for deepseek2 from the GGUF metadata alone, in float64 (None unless
    rope.scaling.type is yarn): the ggml_rope_ext arguments (freq_scale, corr_dims, ext_factor,
    and the mscale rope_yarn multiplies cos / sin by) and the MLA graph's kq_scale factor.
      llama-model.cpp load_hparams: rope.scaling.type, rope_freq_scale_train = 1 / factor,
        n_ctx_orig_yarn = original_context_length (else context_length), rope_attn_factor =
        rope.scaling.attn_factor (else 1); yarn_beta_fast / yarn_beta_slow are NOT read for
        deepseek2 (only grok reads them): hparams defaults 32 / 1.
      models/deepseek2.cpp load_arch_hparams: rope_yarn_log_mul = yarn_log_multiplier / 0.1
        [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX] (i.e. mscale_all_dim again).
      llama-context.cpp: ext_factor = 1 for yarn; with rope_yarn_log_mul != 0, mscale = 1, or
        mscale_all_dims itself when that is not 1 (deepseek2 special case: it assumes mscale ==
        mscale_all_dim, as V2-Lite's config has); yarn_attn_factor = get_mscale(factor, mscale) /
        get_mscale(factor, mscale_all_dims) / (1 + 0.1 ln factor) * rope_attn_factor (without the
        key: get_mscale(factor, 1) / (1 + 0.1 ln factor)).
      ggml.c ggml_rope_yarn_corr_dims: [max(0, floor(corr_dim(beta_fast))), min(n_rot - 1,
        ceil(corr_dim(beta_slow)))], corr_dim(r) = n_rot ln(n_ctx_orig / (2 pi r)) / (2 ln base).
      ggml-cpu rope_yarn: theta = theta_interp (1 - ramp) + theta_extrap ramp, ramp = (1 -
        clamp((i0/2 - lo) / max(0.001, hi - lo), 0, 1)) * ext_factor; cos / sin * attn_factor *
        (1 + 0.1 ln(1 / freq_scale)).
      models/deepseek2.cpp graph: attn_factor_org = attn_factor * (1 + 0.1 ln(1 / freq_scale));
        mscale = attn_factor_org * (1 + 0.1 rope_yarn_log_mul ln(1 / freq_scale)); kq_scale =
        mscale^2 / sqrt(key_length_mla).
    mistake: one of YARN_MISTAKES or None."""
    import math
    a = meta["general.architecture"]
    if meta.get(f"{a}.rope.scaling.type", "linear") != "yarn" or mistake == "no_yarn":
        return None
    factor = meta.get(f"{a}.rope.scaling.factor", 0.0)
    freq_scale = 1.0 if factor == 0.0 else 1.0 / factor
    n_ctx_orig = meta.get(f"{a}.rope.scaling.original_context_length", meta[f"{a}.context_length"])
    if mistake == "orig_ctx_from_context_length":
        n_ctx_orig = meta[f"{a}.context_length"]
    beta_fast, beta_slow = 32.0, 1.0            # llama_hparams defaults; the keys are not read
    ext_factor = 0.0 if mistake == "no_ramp" else 1.0
    rope_attn_factor = meta.get(f"{a}.rope.scaling.attn_factor", 1.0)
    log_mul = meta.get(f"{a}.rope.scaling.yarn_log_multiplier", 0.0)
    if f"{a}.rope.scaling.yarn_log_multiplier" in meta and mistake != "log_mul_unfixed":
        log_mul = log_mul / 0.1
    if mistake == "no_log_mul":
        log_mul = 0.0
    f = 1.0 / freq_scale
    get_mscale = lambda scale, ms: 1.0 if scale <= 1.0 else 0.1 * ms * math.log(scale) + 1.0
    if log_mul != 0.0:
        mscale = log_mul if log_mul != 1.0 else 1.0
        attn_factor = get_mscale(f, mscale) / get_mscale(f, log_mul)
    else:
        attn_factor = get_mscale(f, 1.0)
    if ext_factor != 0.0:
        attn_factor *= 1.0 / (1.0 + 0.1 * math.log(f))
    attn_factor *= rope_attn_factor
    corr_dim = lambda n_r: n_rot * math.log(n_ctx_orig / (n_r * 2 * math.pi)) / (2 * math.log(theta))
    lo = max(0.0, math.floor(corr_dim(beta_fast)))
    hi = min(n_rot - 1.0, float(math.ceil(corr_dim(beta_slow))))
    rope_ms = attn_factor
    if ext_factor != 0.0:
        rope_ms *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    attn_factor_org = attn_factor * (1.0 + 0.1 * math.log(1.0 / freq_scale))
    kq_ms = attn_factor_org * (1.0 + 0.1 * log_mul * math.log(1.0 / freq_scale))
    if mistake == "no_kq_mscale":
        kq_ms = 1.0
    return {"freq_scale": freq_scale, "corr_dims": (lo, hi), "ext_factor": ext_factor,
            "mscale": rope_ms, "kq_mscale": kq_ms, "attn_factor": attn_factor,
            "n_ctx_orig": n_ctx_orig, "rope_yarn_log_mul": log_mul}


def forward_gguf(meta, G, tokens, stats=None, mistake=None):
    """Logits [T, vocab] from the GGUF tensors and metadata only, as src/models/deepseek2.cpp
    (MLA path) and build_moe_ffn compute. mistake: None or one of MISTAKES (for the table)."""
    a = meta["general.architecture"]
    assert a == ARCH
    m = lambda key, default=None: meta.get(f"{a}.{key}", default)
    d, nh = m("embedding_length"), m("attention.head_count")
    assert m("attention.head_count_kv") == 1
    L = m("attention.kv_lora_rank")
    n_rot = m("rope.dimension_count")
    k_mla, v_mla = m("attention.key_length_mla"), m("attention.value_length_mla")
    assert m("attention.key_length") == L + n_rot and m("attention.value_length") == L
    nope = k_mla - n_rot
    eps, theta = m("attention.layer_norm_rms_epsilon"), m("rope.freq_base")
    n_dense = m("leading_dense_block_count", 0)
    ne, k = m("expert_count"), m("expert_used_count")
    n_groups, n_group_used = m("expert_group_count", 0), m("expert_group_used_count", 0)
    gating = m("expert_gating_func", 1)
    w_norm = m("expert_weights_norm", False)
    w_scale = m("expert_weights_scale", 0.0)
    n_shexp = m("expert_shared_count")
    kq_scale = 1.0 / np.sqrt(L + n_rot if mistake == "kq_scale_key_length" else k_mla)
    yarn = yarn_llamacpp_deepseek2(meta, n_rot, theta, mistake)
    if yarn is not None:
        kq_scale = yarn["kq_mscale"] * yarn["kq_mscale"] * kq_scale
    stats = [] if stats is None else stats
    f = lambda n: G[n].astype(np.float64)
    tokens = np.asarray(tokens, dtype=np.int64)
    T = tokens.size
    pos = np.arange(T)
    neox = mistake == "neox_rope"
    x = f("token_embd.weight")[tokens]
    for il in range(m("block_count")):
        b = f"blk.{il}."
        cur = rms_norm(x, G[b + "attn_norm.weight"], eps)
        if b + "attn_q.weight" in G:        # is_lite: wq present
            q = cur @ f(b + "attn_q.weight").T
        else:
            q = rms_norm(cur @ f(b + "attn_q_a.weight").T, G[b + "attn_q_a_norm.weight"], eps)
            q = q @ f(b + "attn_q_b.weight").T
        q = q.reshape(T, nh, k_mla)
        q_nope, q_pe = q[..., :nope], q[..., nope:]
        kv_cmpr_pe = cur @ f(b + "attn_kv_a_mqa.weight").T              # [T, L + n_rot]
        kv_cmpr, k_pe = kv_cmpr_pe[:, :L], kv_cmpr_pe[:, L:].reshape(T, 1, n_rot)
        q_pe = rope_ggml(q_pe, pos, theta, n_rot, neox, yarn)
        k_pe = rope_ggml(k_pe, pos, theta, n_rot, neox, yarn)
        kv_cmpr = rms_norm(kv_cmpr, G[b + "attn_kv_a_norm.weight"], eps)
        k_b, v_b = f(b + "attn_k_b.weight"), f(b + "attn_v_b.weight")    # [H, L, nope], [H, v, L]
        assert k_b.shape == (nh, L, nope) and v_b.shape == (nh, v_mla, L)
        if mistake == "k_b_untransposed":
            k_b = k_b.reshape(nh, nope, L).transpose(0, 2, 1)
        # absorbed: q_nope_absorbed[t, h, l] = sum_n k_b[h, l, n] q_nope[t, h, n]
        q_abs = np.einsum("hln,thn->thl", k_b, q_nope)
        Q = np.concatenate([q_abs, q_pe], axis=-1)                            # [T, H, L + rope]
        K = np.concatenate([kv_cmpr, k_pe[:, 0, :]], axis=-1)                 # [T, L + rope]
        scores = np.einsum("thd,sd->hts", Q, K) * kq_scale
        probs = causal_softmax(scores)
        lat = np.einsum("hts,sl->thl", probs, kv_cmpr)                        # [T, H, L]
        out = np.einsum("hjl,thl->thj", v_b, lat).reshape(T, nh * v_mla)
        x = x + out @ f(b + "attn_output.weight").T
        cur = rms_norm(x, G[b + "ffn_norm.weight"], eps)
        if il < n_dense:
            x = x + swiglu(cur, G[b + "ffn_gate.weight"], G[b + "ffn_up.weight"], G[b + "ffn_down.weight"])
            continue
        # build_moe_ffn
        logits = cur @ f(b + "ffn_gate_inp.weight").T                         # [T, E]
        if gating == 1:
            probs_e = softmax(logits)
        else:
            assert gating == 2, gating
            probs_e = sigmoid(logits)
        sel = probs_e
        if b + "exp_probs_b.bias" in G and mistake != "no_bias":
            sel = probs_e + f(b + "exp_probs_b.bias")[None, :]
        if n_groups > 1 and mistake != "no_groups":
            per = ne // n_groups
            grp = sel.reshape(T, n_groups, per)
            if mistake == "group_max":
                gsc = grp.max(axis=-1)
            else:
                gsc = np.sort(grp, axis=-1)[..., -2:].sum(axis=-1)
            gtop = np.argsort(-gsc, axis=-1, kind="stable")[:, :n_group_used]
            keep = np.zeros((T, n_groups), dtype=bool)
            np.put_along_axis(keep, gtop, True, axis=-1)
            sel = np.where(np.repeat(keep, per, axis=1), sel, -np.inf)
        top = np.argsort(-sel, axis=-1, kind="stable")[:, :k]
        src = sel if mistake == "biased_weights" else probs_e
        w = np.take_along_axis(src, top, axis=-1)
        if (w_norm and mistake != "no_norm") or mistake == "norm":
            w = w / np.maximum(w.sum(axis=-1, keepdims=True), 6.103515625e-5)
        if w_scale != 0.0 and w_scale != 1.0 and mistake != "no_scale":
            w = w * w_scale
        stats.append({"top": top})
        ge, ue, de = (G[b + n + ".weight"] for n in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"))
        assert ge.shape[0] == ne
        moe_out = mix_experts(cur, top, w, lambda e, xs: swiglu(xs, ge[e], ue[e], de[e]), ne)
        assert G[b + "ffn_gate_shexp.weight"].shape[0] == n_shexp * m("expert_feed_forward_length")
        if mistake != "no_shared":
            moe_out = moe_out + swiglu(cur, G[b + "ffn_gate_shexp.weight"], G[b + "ffn_up_shexp.weight"],
                                       G[b + "ffn_down_shexp.weight"])
        x = x + moe_out
    x = rms_norm(x, G["output_norm.weight"], eps)
    return x @ f("output.weight").T


MISTAKES = {
    "neox_rope": "NEOX RoPE pairs (i, i + rope/2) instead of adjacent pairs (NORM)",
    "kq_scale_key_length": "softmax scale 1/sqrt(key_length = kv_lora_rank + rope) instead of 1/sqrt(key_length_mla)",
    "k_b_untransposed": "attn_k_b read as [H, nope, L] (the converter's transpose forgotten)",
    "no_scale": "expert_weights_scale ignored",
    "norm": "top-k weights renormalised although expert_weights_norm is absent",
    "no_norm": "expert_weights_norm ignored",
    "no_bias": "exp_probs_b ignored for the selection",
    "biased_weights": "weights taken from the bias-corrected selection scores",
    "no_groups": "group limit ignored (top-k over all experts)",
    "group_max": "group score = max instead of the sum of the top 2",
    "no_shared": "shared experts left out",
    # deepseek2-yarn-tiny only (YARN_MISTAKES)
    "no_yarn": "rope.scaling keys ignored (plain RoPE, plain softmax scale)",
    "no_kq_mscale": "softmax scale without mscale(factor, mscale_all_dim)^2 (transformers' own DeepseekV2Attention)",
    "log_mul_unfixed": "yarn_log_multiplier (0.1 * mscale_all_dim) taken as mscale_all_dim (no / 0.1)",
    "no_log_mul": "yarn_log_multiplier missing (llama.cpp's generic YaRN: cos / sin and the kq mscale both 1 + 0.1 ln 4)",
    "orig_ctx_from_context_length": "correction dims from context_length (256) instead of original_context_length (64)",
    "no_ramp": "ext_factor 0: every pair interpolated (linear scaling by 1/factor), no YaRN ramp",
}
YARN_MISTAKES = ("no_yarn", "no_kq_mscale", "log_mul_unfixed", "no_log_mul",
                 "orig_ctx_from_context_length", "no_ramp")


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def evaluate_seed(cfg, seed, seqs):
    h = hparams(cfg)
    W = make_weights(cfg, seed)
    logits, stats = {}, {}
    for name, toks in seqs.items():
        st = []
        logits[name] = forward(W, cfg, toks, st)
        stats[name] = st
    all_st = [s for st in stats.values() for s in st]
    r = {
        "min_gap": min(float(s["gap"].min()) for s in all_st),
        "counts": [np.bincount(s["top"].ravel(), minlength=h["n_experts"]) for s in stats["long"]],
        "margin": min(float(np.min(np.diff(np.sort(lg, axis=1)[:, -2:], axis=1))) for lg in logits.values()),
    }
    r["all_used"] = all((c > 0).all() for c in r["counts"])
    if h["v3"]:
        r["min_group_gap"] = min(float(s["group_gap"].min()) for s in all_st)
        r["min_choice"] = min(s["min_choice"] for s in all_st)
    return W, logits, stats, r


def accept(h, r):
    why = []
    if r["margin"] < MIN_ARGMAX_MARGIN:
        why.append(f"argmax margin {r['margin']:.2e} < {MIN_ARGMAX_MARGIN:g}")
    if r["min_gap"] < MIN_ROUTER_GAP:
        why.append(f"min router gap {r['min_gap']:.2e} < {MIN_ROUTER_GAP:g}")
    if h["v3"]:
        if r["min_group_gap"] < MIN_ROUTER_GAP:
            why.append(f"min group-score gap {r['min_group_gap']:.2e} < {MIN_ROUTER_GAP:g}")
        if r["min_choice"] <= 0.0:
            why.append(f"a selection value sigmoid + bias <= 0 ({r['min_choice']:.2e})")
    if not r["all_used"]:
        why.append("an expert unused on `long`")
    return why


def shape_json(model, cfg, seed, r, G):
    h = hparams(cfg)
    s = {
        "name": MODELS[model][0], "arch": ARCH, "hf_model_type": cfg["model_type"],
        "hf_architecture": cfg["architectures"][0], "seed": seed,
        "vocab": h["vocab"], "dim": h["d"], "n_layers": h["n_layers"], "n_heads": h["nh"],
        "hf_n_kv_heads": cfg["num_key_value_heads"], "gguf_head_count_kv": 1,
        "q_lora_rank": h["q_lora"], "kv_lora_rank": h["kv_lora"],
        "qk_nope_head_dim": h["nope"], "qk_rope_head_dim": h["rope"], "v_head_dim": h["v"],
        "softmax_scale": (h["nope"] + h["rope"]) ** -0.5,
        "rope": "adjacent pairs (x[2i], x[2i+1]) of the qk_rope dims (ggml NORM); k_pe one head shared by all heads",
        "rope_theta": h["theta"],
        "rope_inv_freq": [float(v) for v in inv_freq(h["theta"], h["rope"])],
        "ffn": h["ffn"], "first_k_dense_replace": h["first_dense"],
        "n_experts": h["n_experts"], "n_experts_used": h["k"], "expert_ffn": h["expert_ffn"],
        "n_shared_experts": h["n_shared"], "shared_expert_ffn": h["shared_ffn"],
        "scoring_func": h["scoring"], "topk_method": h["topk_method"],
        "n_group": h["n_group"], "topk_group": h["topk_group"],
        "norm_topk_prob": h["norm_topk"], "routed_scaling_factor": h["scale"],
        "ctx": cfg["max_position_embeddings"], "eps": h["eps"],
        "tie_word_embeddings": h["tie"],
        "min_router_gap": r["min_gap"],
    }
    if h["v3"]:
        s["e_score_correction_bias"] = f"{BIAS_OFFSET} + {BIAS_STD} N(0, 1)"
        s["min_group_score_gap"] = r["min_group_gap"]
        s["min_selection_value"] = r["min_choice"]
    y = h["yarn"]
    if y is not None:
        # the values used: softmax_scale and rope_inv_freq above are the unscaled ones
        s["rope_scaling"] = cfg["rope_scaling"]
        s["yarn"] = {
            "dim": h["rope"],
            "corr_dim_beta_fast": y["corr_dim_fast"], "corr_dim_beta_slow": y["corr_dim_slow"],
            "low": y["low"], "high": y["high"],
            "inv_freq_extrapolation_mask": [float(v) for v in y["inv_freq_mask"]],
            "rope_inv_freq": [float(v) for v in y["inv_freq"]],
            "rope_cos_sin_mscale": y["rope_mscale"],
            "mscale_mscale_all_dim": y["mscale_kq"],
            "softmax_scale_factor": y["softmax_factor"],
            "softmax_scale": (h["nope"] + h["rope"]) ** -0.5 * y["softmax_factor"],
            "gguf_yarn_log_multiplier_f32": float(np.float32(0.1 * y["mscale_all_dim"])),
        }
        s["max_abs_diff_without_yarn"] = r["no_yarn_diff"]
    s["min_argmax_margin"] = r["margin"]
    s["gguf_tensors"] = {n: list(t.shape) for n, t in G.items()}
    return s


def mistake_table(meta, RG, logits, seqs, h):
    for key, what in MISTAKES.items():
        if key in ("no_bias", "biased_weights", "no_groups", "group_max", "no_norm") and not h["v3"]:
            continue
        if key == "norm" and h["norm_topk"]:
            continue
        if key in YARN_MISTAKES and h["yarn"] is None:
            continue
        out = []
        for name in ("short", "long"):
            lg = forward_gguf(meta, RG, seqs[name], mistake=key)
            ref = logits[name]
            out.append(f"{name} {np.abs(lg - ref).max():.3f} ({int((lg.argmax(-1) != ref.argmax(-1)).sum())} argmax)")
        print(f"mistake {what}: max|diff| " + ", ".join(out))


def generate(model, seqs, lite_copy=None):
    out_name, cfg = MODELS[model]
    out_dir = DATA_DIR / out_name
    h = hparams(cfg)
    print(f"== {out_name} ({cfg['architectures'][0]}, GGUF {ARCH})")
    for seed in range(1, MAX_SEED_DS + 1):
        W, logits, stats, r = evaluate_seed(cfg, seed, seqs)
        why = accept(h, r)
        if not why:
            break
        print(f"seed {seed}: rejected ({'; '.join(why)})")
    else:
        sys.exit(f"{out_name}: no acceptable seed found")
    msg = (f"seed {seed}: accepted; min router gap (k-th minus (k+1)-th selection value) "
           f"{r['min_gap']:.4e}")
    if h["v3"]:
        msg += (f", min group-score gap (topk_group-th minus next) {r['min_group_gap']:.4e}, "
                f"min selection value sigmoid + bias {r['min_choice']:.4e}")
    print(msg + f", min argmax margin (top-1 minus top-2 logit) {r['margin']:.4e}")
    for name, lg in logits.items():
        print(f"logits {name:5s}: T={lg.shape[0]} range {lg.min():.4f} .. {lg.max():.4f}")
    for i, c in enumerate(r["counts"]):
        print(f"MoE layer {h['first_dense'] + i} tokens per expert on `long` (k={h['k']}): {c.tolist()}")
    if h["v3"]:
        for i, st in enumerate(stats["long"]):
            gc = np.bincount(st["kept_groups"].ravel(), minlength=h["n_group"])
            print(f"MoE layer {h['first_dense'] + i} tokens per kept group on `long` "
                  f"(topk_group={h['topk_group']}): {gc.tolist()}")
        # 0.0 masking (transformers) and -inf masking (llama.cpp) pick the same experts.
        assert r["min_choice"] > 0.0
    y = h["yarn"]
    if y is not None:
        print(f"YaRN (DeepSeek): dim {h['rope']}, factor {y['factor']:g}, original context "
              f"{y['original']}, corr dims {y['corr_dim_fast']:.4f} (beta_fast {y['beta_fast']}) .. "
              f"{y['corr_dim_slow']:.4f} (beta_slow {y['beta_slow']}) -> low {y['low']}, high {y['high']}")
        print(f"  inv_freq_mask (1 = extrapolated) {np.round(y['inv_freq_mask'], 6).tolist()}")
        print(f"  freq_extra {[f'{v:.8g}' for v in y['freq_extra']]}")
        print(f"  inv_freq   {[f'{v:.8g}' for v in y['inv_freq']]}")
        print(f"  cos/sin _mscale = mscale({y['factor']:g}, {y['mscale']}) / mscale({y['factor']:g}, "
              f"{y['mscale_all_dim']}) = {y['rope_mscale']!r}; softmax scale = 24^-0.5 * "
              f"mscale({y['factor']:g}, {y['mscale_all_dim']})^2 = {(h['nope'] + h['rope']) ** -0.5:.10f} * "
              f"{y['mscale_kq']:.10f}^2 = {(h['nope'] + h['rope']) ** -0.5 * y['softmax_factor']:.10f}")
        # YaRN matters: the same weights without rope_scaling, and with transformers' own
        # DeepseekV2Attention (no mscale^2 on the softmax scale).
        cfg_plain = dict(cfg, rope_scaling=None)
        r["no_yarn_diff"] = 0.0
        for name, toks in seqs.items():
            plain = forward(W, cfg_plain, toks)
            native = forward(W, cfg, toks, native_v2_scale=True)
            d_plain = float(np.abs(plain - logits[name]).max())
            d_native = float(np.abs(native - logits[name]).max())
            print(f"  {name:5s}: max|diff| without rope_scaling {d_plain:.4f} "
                  f"({int((plain.argmax(-1) != logits[name].argmax(-1)).sum())} argmax); with "
                  f"transformers' DeepseekV2Attention scale (no mscale^2) {d_native:.4f} "
                  f"({int((native.argmax(-1) != logits[name].argmax(-1)).sum())} argmax)")
            if name == "long":
                r["no_yarn_diff"] = d_plain
                assert d_plain > 1e-2, d_plain

    (out_dir / "hf").mkdir(parents=True, exist_ok=True)
    (out_dir / "hf" / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_safetensors(out_dir / "hf" / "model.safetensors", W)
    G = hf_to_gguf_tensors(W, cfg)
    kvs = gguf_metadata(cfg, out_name)
    tok = tokenizer_kvs_raw(TOKENIZER_GGUF, {k for k, _ in kvs})
    write_gguf(out_dir / "model.gguf", kvs, G, tok)
    for name, lg in logits.items():
        np.save(out_dir / f"numpy_logits_{name}.npy", lg.astype(np.float32))
    (out_dir / "shape.json").write_text(json.dumps(shape_json(model, cfg, seed, r, G), indent=1) + "\n")

    # Self-checks: read everything back.
    meta, RG = read_gguf(out_dir / "model.gguf")
    assert list(RG) == list(G), sorted(set(RG) ^ set(G))
    for n, t in G.items():
        assert RG[n].shape == t.shape and np.array_equal(RG[n], t), n
    for key, (typ, val) in kvs:
        assert meta["__types__"][key] == typ, key
        assert meta[key] == (float(np.float32(val)) if typ == T_FLOAT32 else val), key
    assert meta["tokenizer.ggml.model"] == "llama" and len(meta["tokenizer.ggml.tokens"]) == h["vocab"]
    for i in range(h["n_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        # attn_k_b / attn_v_b re-joined per head give back kv_b_proj.
        kb, vb = RG[b + "attn_k_b.weight"], RG[b + "attn_v_b.weight"]
        assert kb.shape == (h["nh"], h["kv_lora"], h["nope"]) and vb.shape == (h["nh"], h["v"], h["kv_lora"])
        joined = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1).reshape(-1, h["kv_lora"])
        assert np.array_equal(joined, W[p + "self_attn.kv_b_proj.weight"]), i
        if is_moe_layer(h, i):
            for gg, hn in (("ffn_gate_exps", "gate_proj"), ("ffn_up_exps", "up_proj"), ("ffn_down_exps", "down_proj")):
                for e in range(h["n_experts"]):
                    assert np.array_equal(RG[f"{b}{gg}.weight"][e], W[f"{p}mlp.experts.{e}.{hn}.weight"])
            assert (b + "exp_probs_b.bias" in RG) == h["v3"]
        else:
            assert b + "ffn_gate_inp.weight" not in RG and b + "ffn_gate.weight" in RG
    RS = read_safetensors(out_dir / "hf" / "model.safetensors")
    assert set(RS) == set(W)
    for n, t in W.items():
        assert RS[n].shape == t.shape and np.array_equal(RS[n], t), n
    assert json.loads((out_dir / "hf" / "config.json").read_text()) == cfg
    for name, lg in logits.items():
        assert np.array_equal(np.load(out_dir / f"numpy_logits_{name}.npy"), lg.astype(np.float32))
    # The three RoPE forms (V2 complex, V3 de-interleave + rotate-half, ggml NORM) give the same
    # q.k for every pair of positions.
    rng = np.random.default_rng(0)
    qa, ka = rng.standard_normal((160, 2, h["rope"])), rng.standard_normal((160, 1, h["rope"]))
    posr = np.arange(160)
    dots = {nm: np.einsum("thd,sgd->ths", fn(qa, posr, h["theta"]), fn(ka, posr, h["theta"]))
            for nm, fn in (("v2", rope_v2_complex), ("v3", rope_v3_interleave),
                           ("ggml", lambda x, p_, t: rope_ggml(x, p_, t, h["rope"], False)))}
    rd = max(float(np.abs(dots["v2"] - dots["ggml"]).max()), float(np.abs(dots["v3"] - dots["ggml"]).max()))
    assert rd < 1e-12, rd
    print(f"RoPE: q.k of transformers' V2 complex / V3 interleave forms vs ggml NORM on positions 0..159: "
          f"max|diff| {rd:.1e}")
    gguf_ref, gguf_ref_stats = logits, stats
    if y is not None:
        # The same with YaRN: transformers' complex form and modeling_deepseek.py's de-interleave
        # + rotate-half (both with YaRN's inv_freq and _mscale) vs ggml rope_yarn set up from the
        # GGUF metadata alone as llama.cpp does.
        yg = yarn_llamacpp_deepseek2(meta, h["rope"], meta[f"{ARCH}.rope.freq_base"])
        assert yg["corr_dims"] == (float(y["low"]), float(y["high"])) and yg["n_ctx_orig"] == y["original"]
        dots = {nm: np.einsum("thd,sgd->ths", fn(qa, posr), fn(ka, posr))
                for nm, fn in (("v2", lambda x, p_: rope_v2_complex(x, p_, h["theta"], y)),
                               ("remote", lambda x, p_: rope_v3_interleave(x, p_, h["theta"], y)),
                               ("ggml", lambda x, p_: rope_ggml(x, p_, h["theta"], h["rope"], False, yg)))}
        rd = max(float(np.abs(dots["v2"] - dots["ggml"]).max()),
                 float(np.abs(dots["remote"] - dots["ggml"]).max()))
        assert rd < 1e-12, rd
        print(f"YaRN RoPE: q.k of transformers' V2 complex / modeling_deepseek.py forms vs ggml rope_yarn "
              f"(freq_scale {yg['freq_scale']:g}, corr dims {yg['corr_dims']}, ext_factor {yg['ext_factor']:g}, "
              f"attn_factor {yg['attn_factor']:.10f}, cos/sin x {yg['mscale']!r}) on positions 0..159: "
              f"max|diff| {rd:.1e}")
        # The GGUF holds 0.1 * mscale_all_dim as f32, and llama.cpp takes mscale = mscale_all_dim
        # from it: compare the GGUF forward with the HF forward of exactly that value (to 1e-9),
        # and show what the f32 rounding alone does to the logits.
        m_file = float(meta[f"{ARCH}.rope.scaling.yarn_log_multiplier"]) / 0.1
        assert yg["rope_yarn_log_mul"] == m_file
        cfg_f = dict(cfg, rope_scaling=dict(cfg["rope_scaling"], mscale=m_file, mscale_all_dim=m_file))
        yf = hparams(cfg_f)["yarn"]
        print(f"GGUF yarn_log_multiplier f32 {meta[f'{ARCH}.rope.scaling.yarn_log_multiplier']!r} -> "
              f"mscale_all_dim {m_file!r} (config {y['mscale_all_dim']}): llama.cpp kq mscale "
              f"{yg['kq_mscale']!r} vs HF mscale({y['factor']:g}, {y['mscale_all_dim']}) {y['mscale_kq']!r}; "
              f"softmax scale factor {yg['kq_mscale'] ** 2!r} vs {y['softmax_factor']!r} "
              f"(relative {yg['kq_mscale'] ** 2 / y['softmax_factor'] - 1:.2e})")
        assert abs(yg["kq_mscale"] - yf["mscale_kq"]) < 1e-15 and abs(yg["mscale"] - 1.0) < 1e-15
        gguf_ref, gguf_ref_stats = {}, {}
        for name, toks in seqs.items():
            gguf_ref_stats[name] = []
            gguf_ref[name] = forward(W, cfg_f, toks, gguf_ref_stats[name])
            dr = float(np.abs(gguf_ref[name] - logits[name]).max())
            assert dr < 1e-6 and (gguf_ref[name].argmax(-1) == logits[name].argmax(-1)).all(), (name, dr)
            print(f"  HF forward with that mscale_all_dim vs the reference (0.707) on {name:5s}: max|diff| {dr:.2e}")
    # An independent forward over the GGUF alone (llama.cpp's reading) gives the same logits
    # and the same experts.
    for name, toks in seqs.items():
        gst = []
        lg = forward_gguf(meta, RG, toks, gst)
        diff = float(np.abs(lg - gguf_ref[name]).max())
        assert diff < 1e-9 and (lg.argmax(-1) == logits[name].argmax(-1)).all(), (name, diff)
        for s1, s2 in zip(gst, gguf_ref_stats[name]):
            assert np.array_equal(np.sort(s1["top"], axis=-1), np.sort(s2["top"], axis=-1))
        for s1, s2 in zip(gst, stats[name]):
            assert np.array_equal(np.sort(s1["top"], axis=-1), np.sort(s2["top"], axis=-1))
        print(f"GGUF forward (absorbed MLA, ggml NORM RoPE{', YaRN' if y is not None else ''}, "
              f"build_moe_ffn routing) on {name:5s}: max|diff| vs HF forward "
              f"{diff:.2e}{' (mscale_all_dim as in the GGUF)' if y is not None else ''}, same experts")
    mistake_table(meta, RG, logits, seqs, h)
    print(f"self-check passed: {len(G)} GGUF tensors and {len(W)} safetensors tensors read back equal")
    for p in sorted(out_dir.rglob("*")):
        if p.is_file():
            print(f"  {p.relative_to(REPO_ROOT)}: {p.stat().st_size} bytes")

    if lite_copy is not None and h["q_lora"] is None:
        dest = Path(lite_copy) / out_name
        dest.mkdir(parents=True, exist_ok=True)
        kvs0 = gguf_metadata(cfg, out_name, extra_q_lora_zero=True)
        assert len(kvs0) == len(kvs) + 1
        write_gguf(dest / "model.gguf", kvs0, G, tok)
        m0, G0 = read_gguf(dest / "model.gguf")
        assert m0[f"{ARCH}.attention.q_lora_rank"] == 0 and list(G0) == list(G)
        assert all(np.array_equal(G0[n], G[n]) for n in G)
        lg0 = forward_gguf(m0, G0, seqs["long"])
        assert np.abs(lg0 - gguf_ref["long"]).max() < 1e-9
        print(f"llama.cpp copy (model.gguf + {ARCH}.attention.q_lora_rank = 0): {dest / 'model.gguf'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=list(MODELS) + ["all"], default="all",
                    help="which model to generate (default: all)")
    ap.add_argument("--llamacpp-lite-copy", metavar="DIR",
                    help="also write DIR/<folder>/model.gguf with q_lora_rank = 0 added, for llama.cpp "
                         "(the models without q LoRA: deepseek2moe-tiny, deepseek2-yarn-tiny)")
    args = ap.parse_args()
    all_seqs = json.loads(SEQUENCES.read_text())
    seqs = {"short": all_seqs["short"], "long": all_seqs["long"]}
    assert len(seqs["short"]) == 24 and len(seqs["long"]) == 160
    for model in (MODELS if args.model == "all" else [args.model]):
        generate(model, seqs, args.llamacpp_lite_copy)


if __name__ == "__main__":
    main()
