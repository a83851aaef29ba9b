#!/usr/bin/python3
"""Independent float64 NumPy references for tiny random-weight models (three mixture-of-experts
models, a dense Qwen3 with YaRN RoPE scaling, a dense Phi-3 with partial rotary and two dense
sliding-window-attention models).

Seven models, one folder each under tests/models/data/ (found from this script's own path,
so it can be run from anywhere):

  qwen3moe-tiny    transformers Qwen3MoeForCausalLM (qwen3_moe); GGUF arch `qwen3moe`
  qwen2moe-tiny    transformers Qwen2MoeForCausalLM (qwen2_moe); GGUF arch `qwen2moe`
  mixtral-tiny     transformers MixtralForCausalLM (mixtral);    GGUF arch `llama`
  qwen3-yarn-tiny  transformers Qwen3ForCausalLM (qwen3), dense, rope_scaling YaRN
                   (factor 4, original context 64); GGUF arch `qwen3` with the
                   rope.scaling.* keys
  phi3-tiny        transformers Phi3ForCausalLM (phi3), dense, partial_rotary_factor 0.75
                   (RoPE on 12 of the 16 head dims, as Phi-4-mini), fused qkv_proj and
                   gate_up_proj; GGUF arch `phi3` (attn_qkv, fused ffn_up)
  mistral-swa-tiny transformers MistralForCausalLM (mistral), dense, sliding_window 40 on
                   every layer; GGUF arch `llama` (Q/K rows permuted) plus
                   llama.attention.sliding_window = 40
  qwen2-swa-tiny   transformers Qwen2ForCausalLM (qwen2), dense, q/k/v biases, 3 layers,
                   use_sliding_window true, sliding_window 16, max_window_layers 1 (layer 0
                   full attention, layers 1 and 2 slide); Hugging Face directory only, NO
                   GGUF (a qwen2 GGUF has no per-layer sliding pattern: see HF_ONLY)

What it writes in each folder:

  hf/config.json            Hugging Face config
  hf/model.safetensors      the weights, float32, Hugging Face tensor names
  model.gguf                the same weights as a GGUF v3 file laid out as llama.cpp's
                            converter writes that architecture (all tensors F32, alignment
                            32), with the tokenizer.* metadata of the 512-piece stories260K
                            vocabulary copied in so that llama.cpp can load it (not for
                            qwen2-swa-tiny)
  numpy_logits_short.npy    float32 logits [T, 512] for every position of the
  numpy_logits_long.npy     `short` (24) and `long` (160) token sequences of
                            ../shared/testdata/models/synthetic/sequences.json
                            (relative to the repository root)
  shape.json                the hyperparameters and the seed used
(README.md in each folder is written by hand from this script's output.)

How to run (system Python with Debian's python3-numpy; nothing else needed):

  /usr/bin/python3 scripts/references/tiny_models.py                  (all seven)
  /usr/bin/python3 scripts/references/tiny_models.py --model qwen2moe (one of
      qwen3moe, qwen2moe, mixtral, qwen3yarn, phi3, mistralswa, qwen2swa, all)
  /usr/bin/python3 scripts/references/tiny_models.py --crosscheck-dense
      (first runs the shared attention / RMSNorm / dense-SwiGLU code, both the Hugging Face
       forward and the GGUF forward below, on the dense models qwen3-qknorm, qwen2-gqa-bias
       and llama-gqa in ../shared/testdata/models/synthetic and compares with the NumPy and
       llama.cpp logits stored there; for llama-gqa it also checks this file's Q/K row
       permutation against the attn_q / attn_k stored in its GGUF)

It is self-contained: pure NumPy, float64 compute, and it shares no code with the engine
(llmserve). Weights are drawn with np.random.default_rng(seed), rounded to float32 for
storage, and the forward pass uses exactly those float32 values promoted to float64; the
logits are cast to float32 at the end. For each model, seeds are tried from 1 upwards until
expert routing is robust: the gap between the k-th and (k+1)-th largest router probability
is >= 1e-3 for every layer and token of both sequences (so a float32 engine picks the same
experts), every expert is chosen by some token in each layer on `long`, and the top-1 logit
leads the top-2 by >= 2e-3 at every position (so argmax comparisons are not decided by
rounding); the dense qwen3-yarn-tiny, phi3-tiny, mistral-swa-tiny and qwen2-swa-tiny have no
router, only the argmax-margin criterion applies.
Rerunning reproduces every file byte for byte.

Self-checks after writing: the GGUF and safetensors files are read back with the tiny readers
below and every tensor is asserted equal to the generated one (the GGUF expert stacks equal
the HF per-expert tensors; for mixtral, un-permuting the GGUF attn_q / attn_k gives back the
HF q_proj / k_proj); the metadata is read back; and a second, independent forward pass that
reads only the GGUF (llama.cpp tensor names, hyperparameters from its metadata, llama.cpp's
RoPE type and top-k normalisation for the architecture) must reproduce the Hugging Face
forward's logits to 1e-9 with the same argmax. For qwen3-yarn-tiny the GGUF forward sets up
YaRN as llama.cpp does from the GGUF metadata alone (corr dims, ramp, mscale) and its RoPE must
equal the transformers-style one to 1e-12 on positions 0..159; the logits without YaRN are
printed for comparison (and must differ). For phi3-tiny the GGUF forward splits attn_qkv and
the fused ffn_up as llama.cpp's graph does and runs ggml NEOX RoPE over rope.dimension_count
(12) dims, which must equal the HF partial rotate-half to 1e-12; the logits of the usual
mistakes (full-width RoPE, wrong pair offset or frequencies, NORM RoPE, gate/up or k/v swapped)
are printed. For the two sliding-window models the `long` logits computed with full causal
attention instead must equal the reference (< 1e-12) at every position before the window and
differ from it by more than 1e-2 at every position from the window on (both asserted; `short`
is printed too: 24 tokens are within mistral-swa-tiny's window of 40); the logits of the usual
window mistakes (off by one either way; for qwen2-swa-tiny every layer sliding or the layer
pattern inverted) are printed; and for mistral-swa-tiny the GGUF forward applies
llama.attention.sliding_window to every layer and must reproduce the Hugging Face forward to
1e-9, while without the window (llama.cpp's reading: it ignores the key for `llama`) it must
equal the full-causal Hugging Face forward to 1e-9.

Sources of the semantics:
  * Hugging Face transformers, models/qwen3_moe/modeling_qwen3_moe.py:
    - Qwen3MoeSparseMoeBlock: router_logits = gate(x); routing weights =
      softmax(router_logits) computed in float; top-k (num_experts_per_tok);
      renormalised to sum 1 when norm_topk_prob; each selected expert is a
      Qwen3MoeMLP, down_proj(silu(gate_proj(x)) * up_proj(x)); the output is
      the routing-weighted sum of the selected experts' outputs.
      A layer is sparse when it is not in mlp_only_layers, num_experts > 0
      and (layer_idx + 1) % decoder_sparse_step == 0; otherwise it uses a
      dense Qwen3MoeMLP with intermediate_size (not the case here).
    - Qwen3MoeAttention (same as Qwen3Attention): q/k/v projections without
      bias, per-head RMSNorm (q_norm, k_norm over head_dim) on q and k
      BEFORE RoPE, rotate-half RoPE (inv_freq = theta^(-2i/head_dim),
      emb = cat(freqs, freqs), x*cos + rotate_half(x)*sin with
      rotate_half(x) = cat(-x2, x1)), GQA via repeat_kv (query head h uses
      KV head h // (num_heads / num_kv_heads)), causal softmax of
      q.k^T / sqrt(head_dim), o_proj.
    - Qwen3MoeRMSNorm: x * rsqrt(mean(x^2) + eps) * weight.
  * transformers models/qwen3/modeling_qwen3.py (qwen3-yarn-tiny): the same attention,
    norms and decoder layer, with a dense Qwen3MLP down_proj(silu(gate_proj(x)) * up_proj(x))
    (mlp.gate_proj / mlp.up_proj / mlp.down_proj, intermediate_size) in every layer.
    Qwen3RotaryEmbedding takes inv_freq and attention_scaling from ROPE_INIT_FUNCTIONS
    [rope_type] and returns cos = cos(emb) * attention_scaling, sin = sin(emb) *
    attention_scaling (so both q and k are scaled and q.k^T by attention_scaling^2).
  * YaRN (Peng, Quesnelle, Fan, Shippole 2023, "YaRN: Efficient Context Window Extension of
    Large Language Models", arXiv 2309.00071) as transformers'
    modeling_rope_utils._compute_yarn_parameters computes it: dim = head_dim
    (partial_rotary_factor 1); attention_factor = get_mscale(factor) = 0.1 * ln(factor) + 1
    (no attention_factor / mscale / mscale_all_dim keys); beta_fast 32, beta_slow 1;
    find_correction_dim(num_rot) = dim * ln(orig / (num_rot * 2 pi)) / (2 ln(base));
    find_correction_range: low = floor(find_correction_dim(beta_fast)), high =
    ceil(find_correction_dim(beta_slow)) (truncate=True), low = max(low, 0), high =
    min(high, dim - 1); linear_ramp_factor(low, high, dim // 2): high += 0.001 if
    low == high, clamp((arange(dim // 2) - low) / (high - low), 0, 1);
    inv_freq_extrapolation_factor = 1 - ramp; pos_freqs = base^(arange(0, dim, 2) / dim);
    inv_freq = 1 / (factor * pos_freqs) * (1 - extrapolation_factor)
             + 1 / pos_freqs * extrapolation_factor.
    Some transformers versions re-derive factor = max_position_embeddings /
    original_max_position_embeddings when the latter is in rope_scaling; the config here has
    max_position_embeddings = factor * original_max_position_embeddings, so both readings
    give the same factor (asserted). Everything is computed in float64 here (transformers
    computes inv_freq in float32).
  * transformers models/phi3/modeling_phi3.py (phi3-tiny):
    - Phi3Attention: qkv = qkv_proj(x) (no bias), query = qkv[..., :nh*hd], key = the next
      nkv*hd, value = the rest; head_dim = hidden_size // num_attention_heads; GQA (repeat_kv);
      scaling head_dim^-0.5; o_proj (no bias). sliding_window null: full causal attention.
    - Phi3RotaryEmbedding (default rope type): dim = int(head_dim * partial_rotary_factor) = 12,
      inv_freq = 1 / base^(arange(0, dim, 2) / dim), emb = cat(freqs, freqs) [12];
      apply_rotary_pos_emb: rotary_dim = cos.shape[-1]; q_rot, q_pass = q[..., :12],
      q[..., 12:]; q_embed = cat(q_rot * cos + rotate_half(q_rot) * sin, q_pass) (rotate_half
      over the 12 dims: cat(-x[6:12], x[:6])); the same for k.
    - Phi3MLP: gate, up = gate_up_proj(x).chunk(2, -1) (rows [0, ffn) gate, [ffn, 2 ffn) up);
      down_proj(up * act(gate)), act = silu.
    - Phi3RMSNorm as above; Phi3DecoderLayer as below (the residual dropouts are 0).
    llama.cpp side (LLM_ARCH_PHI3): conversion/phi.py Phi3MiniModel (the converter class
    registered for Phi3ForCausalLM), src/models/phi3.cpp (build_qkv on the fused attn_qkv,
    ggml_rope_ext with n_rot = rope.dimension_count, Q scaled by 1/sqrt(head_dim),
    build_ffn(ffn_up, LLM_FFN_SWIGLU, LLM_FFN_SEQ) = ggml_swiglu: silu(first half) * second
    half), llama_model_rope_type NEOX for phi3; rope_factors_{long,short} only for LongRoPE.
    - Decoder layer: h = x + attn(input_layernorm(x));
      out = h + mlp(post_attention_layernorm(h)); final model.norm, lm_head
      (untied). PyTorch Linear convention: y = x @ W.T (+ bias).
  * Sliding-window attention (mistral-swa-tiny, qwen2-swa-tiny), transformers:
    - masking_utils.py: sliding_window_overlay(w) keeps kv_idx > q_idx - w;
      sliding_window_causal_mask_function = and_masks(sliding_window_overlay(w),
      causal_mask_function (kv_idx <= q_idx)): the query at position i sees the keys j with
      j <= i and i - j < w, the last w positions, itself included (eager/sdpa/flex masks are
      all built from this function). create_sliding_window_causal_mask uses
      config.sliding_window.
    - models/mistral/modeling_mistral.py, MistralModel.forward: mask_function =
      create_causal_mask if config.sliding_window is None else
      create_sliding_window_causal_mask, one mask for every layer. MistralAttention is
      LlamaAttention (no biases, head_dim from the config, rotate-half RoPE, GQA); MistralMLP
      down_proj(silu(gate_proj x) * up_proj x); decoder layer and norms as llama's.
    - models/qwen2/configuration_qwen2.py, Qwen2Config.__post_init__: sliding_window =
      sliding_window if use_sliding_window else None; when layer_types is absent,
      layer_types[i] = "sliding_attention" if sliding_window is not None and
      i >= max_window_layers else "full_attention" (the config here writes that derived list,
      and the script asserts it is the derived one). models/qwen2/modeling_qwen2.py:
      Qwen2Attention.sliding_window = config.sliding_window for a "sliding_attention" layer,
      else None; Qwen2Model builds causal_mask_mapping {"full_attention": create_causal_mask,
      "sliding_attention": create_sliding_window_causal_mask} and each decoder layer takes the
      mask of its attention_type. Qwen2Attention: q/k/v_proj with bias (hard-coded True), o_proj
      without, head_dim = hidden_size // num_attention_heads, rotate-half RoPE, GQA; Qwen2MLP
      as Mistral's.
    llama.cpp (peer at d32676d7) does not apply a sliding window for `llama` or `qwen2`:
    src/models/llama.cpp and src/models/qwen2.cpp (load_arch_hparams) never read
    LLM_KV_ATTENTION_SLIDING_WINDOW ("%s.attention.sliding_window", src/llama-arch.cpp;
    read by e.g. src/models/gemma2.cpp; src/models/phi3.cpp reads it and then turns SWA off),
    no generic loader code reads it either, so hparams.swa_type stays
    LLAMA_SWA_TYPE_NONE (src/llama-hparams.h) and their graphs use build_attn_inp_kv (no
    iswa cache); its converter writes no sliding_window for MistralForCausalLM
    (conversion/llama.py LlamaModel) or Qwen2ForCausalLM (conversion/qwen.py Qwen2Model).
    Its LLAMA_SWA_TYPE_STANDARD mask (llama_hparams::is_masked_swa: masked when p1 - p0 >=
    n_swa) is the same window as transformers'.
  * transformers models/qwen2_moe/modeling_qwen2_moe.py:
    - Qwen2MoeAttention: as Qwen2Attention, q_proj/k_proj/v_proj WITH bias, o_proj without,
      no q/k norm, head_dim = hidden_size // num_attention_heads, rotate-half RoPE, GQA.
    - Qwen2MoeSparseMoeBlock: routing_weights = softmax(gate(x)) in float, top-k,
      renormalised only when norm_topk_prob (false here, as in Qwen1.5-MoE-A2.7B); routed
      output = sum_k w_k * expert_k(x) (experts are Qwen2MoeMLP with moe_intermediate_size);
      plus sigmoid(shared_expert_gate(x)) * shared_expert(x), with shared_expert a
      Qwen2MoeMLP of shared_expert_intermediate_size and shared_expert_gate a
      Linear(hidden_size, 1, bias=False). Sparse layers as for Qwen3-MoE (decoder_sparse_step,
      mlp_only_layers).
  * transformers models/mixtral/modeling_mixtral.py:
    - MixtralAttention: llama/mistral attention, no biases, no q/k norm, rotate-half RoPE on
      the HF-layout q/k, GQA.
    - MixtralSparseMoeBlock: routing_weights = softmax(gate(x)) in float, top-k, ALWAYS
      renormalised (routing_weights /= routing_weights.sum(-1)); every layer sparse; each
      expert a MixtralBlockSparseTop2MLP, w2(silu(w1(x)) * w3(x)) (w1 = gate, w3 = up,
      w2 = down), intermediate_size being the expert width. HF names:
      model.layers.N.block_sparse_moe.gate (router), .experts.E.w1/w2/w3.
  * File format: llama.cpp / ggml docs/gguf.md (GGUF v3: magic, version, tensor and KV
    counts, typed KV pairs, tensor infos with dimensions innermost first, aligned data
    section). llama.cpp tensor names (src/llama-arch.cpp):
    - LLM_ARCH_QWEN3MOE: token_embd, output_norm, output, blk.N.attn_norm, attn_q, attn_k,
      attn_v, attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate_inp, ffn_gate_exps,
      ffn_up_exps, ffn_down_exps.
    - LLM_ARCH_QWEN2MOE: the same without q/k norms, with attn_q/attn_k/attn_v .bias, and the
      shared expert ffn_gate_inp_shexp, ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
      src/llama-model.cpp declares ffn_gate_inp_shexp as 1-D {n_embd} (written here as a 1-D
      tensor of hidden_size), reads qwen2moe.expert_feed_forward_length and
      qwen2moe.expert_shared_feed_forward_length, and its graph gates the shared expert with
      sigmoid(ffn_gate_inp_shexp . x) and does not renormalise the top-k weights.
    - LLM_ARCH_LLAMA (Mixtral is converted as `llama` with experts): token_embd,
      output_norm, output, attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
      ffn_gate_inp, ffn_gate_exps (stacked w1), ffn_up_exps (stacked w3), ffn_down_exps
      (stacked w2); llama.cpp's llama graph renormalises the top-k weights. Dense
      (mistral-swa-tiny): ffn_gate, ffn_up, ffn_down instead of the router and expert
      tensors; the metadata keys of ../shared/testdata/models/synthetic/llama-gqa/model.gguf
      (see gguf_metadata_dense) plus llama.attention.sliding_window (u32).
    The expert tensors are the HF experts stacked outermost (numpy [n_expert, rows, cols]).
    Q/K rows: NOT permuted for qwen3moe/qwen2moe (llama.cpp uses NEOX, i.e. rotate-half,
    RoPE for them, as HF does). For `llama`, convert_hf_to_gguf.py's LlamaModel.permute,
    w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape),
    with n_head = num_attention_heads for q_proj and num_key_value_heads for k_proj, so
    that llama.cpp's normal (adjacent-pair) RoPE on the permuted rows equals HF's
    rotate-half on the original ones.
    ggml RoPE: normal mode rotates the pairs (x[2i], x[2i+1]), NEOX mode (x[i], x[i+n/2]),
    both by pos * freq_base^(-2i/n_rot).
    - LLM_ARCH_QWEN3 (qwen3-yarn-tiny): token_embd, output_norm, output, attn_norm, attn_q,
      attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate, ffn_up,
      ffn_down; metadata keys as in ../shared/testdata/models/synthetic/qwen3-qknorm/model.gguf
      plus qwen3.rope.scaling.type "yarn", .factor (f32), .original_context_length (u32).
      llama.cpp's YaRN (src/llama-model.cpp, src/llama-context.cpp, ggml.c
      ggml_rope_yarn_corr_dims, ggml-cpu/ops.cpp rope_yarn): freq_scale = 1 / factor,
      n_ctx_orig = original_context_length, ext_factor = 1 for the yarn scaling type;
      corr_dims = [max(0, floor(corr_dim(beta_fast))), min(n_rot - 1, ceil(corr_dim(beta_slow)))];
      ramp_mix(i) = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1); theta = theta_interp *
      (1 - ramp_mix) + theta_extrap * ramp_mix with theta_interp = freq_scale * theta_extrap;
      cos and sin multiplied by mscale = yarn_attn_factor * (1 + 0.1 ln(1 / freq_scale)),
      where llama_context sets yarn_attn_factor = get_mscale(factor) / (1 + 0.1 ln(factor))
      (= 1 here, no yarn_log_multiplier key) times rope.scaling.attn_factor (absent: 1).
  * safetensors format: 8-byte little-endian header length, JSON header
    {name: {dtype, shape, data_offsets}}, then the raw little-endian data.
"""

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "models" / "data"
SEQUENCES = REPO_ROOT / ".." / "shared" / "testdata" / "models" / "synthetic" / "sequences.json"
# The 512-piece stories260K vocabulary (the same as the synthetic dense models embed).
TOKENIZER_GGUF = REPO_ROOT.parent / "shared" / "models" / "stories260K" / "stories260K.gguf"
DENSE_DIR = REPO_ROOT / ".." / "shared" / "testdata" / "models" / "synthetic"
DENSE_MODELS = ("qwen3-qknorm", "qwen2-gqa-bias", "llama-gqa")

MIN_ROUTER_GAP = 1e-3
MIN_ARGMAX_MARGIN = 2e-3
MAX_SEED = 1000

QWEN3MOE_CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "norm_topk_prob": True,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "vocab_size": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "attention_bias": False,
    "use_sliding_window": False,
    "sliding_window": None,
    "hidden_act": "silu",
}

# No head_dim: Qwen2MoeAttention uses hidden_size // num_attention_heads (16).
QWEN2MOE_CONFIG = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "model_type": "qwen2_moe",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "norm_topk_prob": False,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "vocab_size": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "attention_bias": True,
    "use_sliding_window": False,
    "sliding_window": None,
    "hidden_act": "silu",
}

# No head_dim: MixtralAttention falls back to hidden_size // num_attention_heads (16).
MIXTRAL_CONFIG = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 32,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "sliding_window": None,
    "hidden_act": "silu",
}

# Dense Qwen3 with YaRN. max_position_embeddings = factor * original_max_position_embeddings
# on purpose, so that the transformers versions that re-derive factor from the two agree.
QWEN3YARN_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "vocab_size": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "attention_bias": False,
    "use_sliding_window": False,
    "sliding_window": None,
    "hidden_act": "silu",
}

# Dense Phi-3 with partial rotary (as Phi-4-mini: partial_rotary_factor 0.75), fused qkv_proj
# and gate_up_proj. No head_dim: Phi3Attention uses hidden_size // num_attention_heads (16).
# pad_token_id null: Phi3Config's default (32000) is outside this 512-piece vocabulary and
# nn.Embedding(padding_idx=32000) would reject it.
PHI3_CONFIG = {
    "architectures": ["Phi3ForCausalLM"],
    "model_type": "phi3",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "partial_rotary_factor": 0.75,
    "vocab_size": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "max_position_embeddings": 512,
    "original_max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": None,
    "sliding_window": None,
    "hidden_act": "silu",
    "attention_dropout": 0.0,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
}

PHI3_GGUF_NAME = "phi-tiny"   # see gguf_metadata_phi3

# Dense Mistral with a sliding window on every layer (MistralModel: one mask for all layers,
# create_sliding_window_causal_mask whenever sliding_window is not null). head_dim written, as
# MistralConfig serialises it.
MISTRALSWA_CONFIG = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "vocab_size": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 512,
    "sliding_window": 40,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "attention_dropout": 0.0,
}

# Dense Qwen2 with a sliding window on the layers i >= max_window_layers only (Qwen2Config:
# sliding_window kept only when use_sliding_window; layer_types derived as below and written
# too, as current transformers serialises it). No head_dim: Qwen2Attention uses
# hidden_size // num_attention_heads (16).
QWEN2SWA_LAYERS = 3
QWEN2SWA_MAX_WINDOW_LAYERS = 1
QWEN2SWA_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 64,
    "num_hidden_layers": QWEN2SWA_LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "vocab_size": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "max_position_embeddings": 512,
    "use_sliding_window": True,
    "sliding_window": 16,
    "max_window_layers": QWEN2SWA_MAX_WINDOW_LAYERS,
    "layer_types": ["sliding_attention" if i >= QWEN2SWA_MAX_WINDOW_LAYERS else "full_attention"
                    for i in range(QWEN2SWA_LAYERS)],
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "attention_dropout": 0.0,
}

# name -> (output folder, HF config, GGUF general.architecture)
MODELS = {
    "qwen3moe": ("qwen3moe-tiny", QWEN3MOE_CONFIG, "qwen3moe"),
    "qwen2moe": ("qwen2moe-tiny", QWEN2MOE_CONFIG, "qwen2moe"),
    "mixtral": ("mixtral-tiny", MIXTRAL_CONFIG, "llama"),
    "qwen3yarn": ("qwen3-yarn-tiny", QWEN3YARN_CONFIG, "qwen3"),
    "phi3": ("phi3-tiny", PHI3_CONFIG, "phi3"),
    "mistralswa": ("mistral-swa-tiny", MISTRALSWA_CONFIG, "llama"),
    "qwen2swa": ("qwen2-swa-tiny", QWEN2SWA_CONFIG, "qwen2"),
}

# Models written as a Hugging Face directory only. A qwen2 GGUF has no per-layer sliding
# pattern (llama.cpp's converter writes none for Qwen2ForCausalLM and its qwen2 loader reads
# neither attention.sliding_window nor a pattern), so a qwen2.attention.sliding_window key
# would read as "every layer slides", which is not this model.
HF_ONLY = {"qwen2swa"}


def hparams(cfg):
    """What transformers makes of an HF config (dense llama/qwen2/qwen3/phi3 and the MoE types)."""
    mt = cfg["model_type"]
    d = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or d // nh
    h = {
        "model_type": mt,
        "d": d,
        "n_layers": cfg["num_hidden_layers"],
        "nh": nh,
        "nkv": cfg.get("num_key_value_heads", nh),
        "hd": cfg.get("head_dim") or d // nh,
        "vocab": cfg["vocab_size"],
        "eps": cfg["rms_norm_eps"],
        "theta": cfg["rope_theta"],
        "tie": cfg.get("tie_word_embeddings", False),
        "ffn": cfg["intermediate_size"],
        # Qwen3 / Qwen3-MoE: per-head q/k RMSNorm.
        "qk_norm": mt in ("qwen3", "qwen3_moe"),
        # Qwen2 / Qwen2-MoE hard-code bias=True on q/k/v; llama reads attention_bias.
        "qkv_bias": True if mt in ("qwen2", "qwen2_moe") else bool(cfg.get("attention_bias", False)),
        "n_experts": 0,
        "shared_ffn": 0,
        # Phi-3: fused qkv_proj / gate_up_proj; RoPE over the first int(head_dim *
        # partial_rotary_factor) dims of each head only (the others models here: all of it).
        "fused": mt == "phi3",
        "rot": int(hd * cfg.get("partial_rotary_factor", 1.0)),
    }
    if mt in ("qwen3_moe", "qwen2_moe"):
        h.update(n_experts=cfg.get("num_experts", 0), k=cfg["num_experts_per_tok"],
                 expert_ffn=cfg["moe_intermediate_size"],
                 norm_topk=cfg.get("norm_topk_prob", False),
                 sparse_step=cfg.get("decoder_sparse_step", 1),
                 mlp_only=cfg.get("mlp_only_layers", []),
                 moe_prefix="mlp", proj=("gate_proj", "up_proj", "down_proj"))
        if mt == "qwen2_moe":
            h["shared_ffn"] = cfg["shared_expert_intermediate_size"]
    elif mt == "mixtral":
        h.update(n_experts=cfg["num_local_experts"], k=cfg["num_experts_per_tok"],
                 expert_ffn=cfg["intermediate_size"], norm_topk=True, sparse_step=1,
                 mlp_only=[], moe_prefix="block_sparse_moe", proj=("w1", "w3", "w2"))
    else:
        assert mt in ("llama", "mistral", "qwen2", "qwen3", "phi3"), mt
    h["windows"] = layer_windows(cfg)
    rs = cfg.get("rope_scaling")
    if rs is not None:
        assert rs.get("rope_type", rs.get("type")) == "yarn", rs
        h["yarn"] = yarn_parameters(cfg, h["hd"], h["theta"])
    return h


def layer_windows(cfg):
    """Per layer, the sliding window (int) or None for full causal attention, as transformers
    reads the config:
      * mistral (MistralModel): create_sliding_window_causal_mask for every layer when
        sliding_window is not null, else create_causal_mask;
      * qwen2 (Qwen2Config.__post_init__): sliding_window = sliding_window if
        use_sliding_window else None; layer_types (when absent) = ["sliding_attention" if
        sliding_window is not None and i >= max_window_layers else "full_attention"];
        Qwen2Attention: sliding_window = config.sliding_window for a "sliding_attention"
        layer, else None;
      * every other model here: no window (sliding_window null / use_sliding_window false)."""
    mt, n = cfg["model_type"], cfg["num_hidden_layers"]
    if mt == "mistral":
        sw = cfg.get("sliding_window")
        return [sw] * n
    if mt == "qwen2":
        sw = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
        derived = ["sliding_attention" if sw is not None and i >= cfg.get("max_window_layers", 28)
                   else "full_attention" for i in range(n)]
        types = cfg.get("layer_types") or derived
        assert types == derived, (types, derived)   # the written list is the derived one
        return [sw if t == "sliding_attention" else None for t in types]
    assert cfg.get("sliding_window") is None and not cfg.get("use_sliding_window", False), mt
    return [None] * n


def yarn_parameters(cfg, head_dim, base):
    """transformers modeling_rope_utils._compute_yarn_parameters, in float64.
    Returns {inv_freq [dim/2], attention_factor, low, high, factor, original}."""
    import math
    rs = cfg["rope_scaling"]
    assert not ({"attention_factor", "mscale", "mscale_all_dim", "partial_rotary_factor"} & set(rs)), rs
    assert "partial_rotary_factor" not in cfg
    dim = head_dim                                   # int(head_dim * partial_rotary_factor(1.0))
    factor = float(rs["factor"])
    orig = rs.get("original_max_position_embeddings", cfg["max_position_embeddings"])
    # The reading of the versions that re-derive factor gives the same value here.
    assert cfg["max_position_embeddings"] / orig == factor, (cfg["max_position_embeddings"], orig, factor)
    beta_fast = rs.get("beta_fast", 32)
    beta_slow = rs.get("beta_slow", 1)
    truncate = rs.get("truncate", True)

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    attention_factor = get_mscale(factor)

    def find_correction_dim(num_rotations):
        return (dim * math.log(orig / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(mn, mx, n):
        if mn == mx:
            mx += 0.001
        return np.clip((np.arange(n, dtype=np.float64) - mn) / (mx - mn), 0.0, 1.0)

    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1.0 - linear_ramp_factor(low, high, dim // 2)
    inv_freq = (inv_freq_interpolation * (1.0 - extrapolation_factor)
                + inv_freq_extrapolation * extrapolation_factor)
    return {"inv_freq": inv_freq, "attention_factor": attention_factor, "low": low, "high": high,
            "factor": factor, "original": orig, "beta_fast": beta_fast, "beta_slow": beta_slow}


def is_sparse_layer(h, i):
    return (i not in h.get("mlp_only", [])
            and h["n_experts"] > 0
            and (i + 1) % h.get("sparse_step", 1) == 0)


def expert_name(h, p, e, which):
    """HF name of expert e's gate/up/down (which = 0/1/2) matrix in layer prefix p."""
    return f"{p}{h['moe_prefix']}.experts.{e}.{h['proj'][which]}.weight"


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

def make_weights(cfg, seed):
    """HF-named float32 weights, drawn in a fixed order from default_rng(seed)."""
    h = hparams(cfg)
    rng = np.random.default_rng(seed)
    d, hd, nh, nkv = h["d"], h["hd"], h["nh"], h["nkv"]
    ne, fe, v = h["n_experts"], h.get("expert_ffn"), h["vocab"]

    def mat(rows, cols, std=None):
        s = 1.0 / np.sqrt(cols) if std is None else std
        return (rng.standard_normal((rows, cols)) * s).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {}
    w["model.embed_tokens.weight"] = mat(v, d, std=1.0)
    for i in range(h["n_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(d)
        if h["fused"]:
            # Phi-3: one qkv_proj, rows [0, nh*hd) q, then nkv*hd k, then nkv*hd v.
            w[p + "self_attn.qkv_proj.weight"] = mat((nh + 2 * nkv) * hd, d)
            w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
            w[p + "post_attention_layernorm.weight"] = norm(d)
            # Phi-3: one gate_up_proj, rows [0, ffn) gate, [ffn, 2 ffn) up.
            w[p + "mlp.gate_up_proj.weight"] = mat(2 * h["ffn"], d)
            w[p + "mlp.down_proj.weight"] = mat(d, h["ffn"])
            continue
        for name, rows in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
            w[p + f"self_attn.{name}.weight"] = mat(rows, d)
            if h["qkv_bias"]:
                w[p + f"self_attn.{name}.bias"] = bias(rows)
        w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
        if h["qk_norm"]:
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "post_attention_layernorm.weight"] = norm(d)
        if not is_sparse_layer(h, i):
            # Dense Qwen3MLP (qwen3-yarn-tiny; the MoE models here have no dense layer).
            assert h["n_experts"] == 0
            w[p + "mlp.gate_proj.weight"] = mat(h["ffn"], d)
            w[p + "mlp.up_proj.weight"] = mat(h["ffn"], d)
            w[p + "mlp.down_proj.weight"] = mat(d, h["ffn"])
            continue
        w[p + h["moe_prefix"] + ".gate.weight"] = mat(ne, d)
        for e in range(ne):
            w[expert_name(h, p, e, 0)] = mat(fe, d)
            w[expert_name(h, p, e, 1)] = mat(fe, d)
            w[expert_name(h, p, e, 2)] = mat(d, fe)
        if h["shared_ffn"]:
            fs = h["shared_ffn"]
            w[p + "mlp.shared_expert.gate_proj.weight"] = mat(fs, d)
            w[p + "mlp.shared_expert.up_proj.weight"] = mat(fs, d)
            w[p + "mlp.shared_expert.down_proj.weight"] = mat(d, fs)
            w[p + "mlp.shared_expert_gate.weight"] = mat(1, d)
    w["model.norm.weight"] = norm(d)
    w["lm_head.weight"] = mat(v, d, std=1.0 / np.sqrt(d))
    return w


# --------------------------------------------------------------------------
# Hugging Face forward pass (float64)
# --------------------------------------------------------------------------

def rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rope_rotate_half(x, positions, theta, yarn=None, rot=None):
    """x: [T, H, hd]; HF rotate-half RoPE. yarn: yarn_parameters() (inv_freq and
    attention_scaling from _compute_yarn_parameters) or None for the default rope type.
    rot: rotary dims (< hd for partial rotary, as Phi-3's apply_rotary_pos_emb: the first rot
    dims are rotated, rotate_half within them, with inv_freq = theta^(-arange(0, rot, 2) / rot);
    dims rot.. pass through unchanged); None = all of hd."""
    if rot is not None and rot < x.shape[-1]:
        assert yarn is None
        return np.concatenate([rope_rotate_half(x[..., :rot], positions, theta), x[..., rot:]], axis=-1)
    hd = x.shape[-1]
    if yarn is None:
        inv_freq = 1.0 / (theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    else:
        inv_freq = yarn["inv_freq"]
    freqs = positions.astype(np.float64)[:, None] * inv_freq[None, :]   # [T, hd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)                        # [T, hd]
    cos = np.cos(emb)[:, None, :]
    sin = np.sin(emb)[:, None, :]
    if yarn is not None:   # Qwen3RotaryEmbedding: cos/sin * attention_scaling
        cos = cos * yarn["attention_factor"]
        sin = sin * yarn["attention_factor"]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    rot = np.concatenate([-x2, x1], axis=-1)
    return x * cos + rot * sin


def causal_attention(q, k, v, hd, window=None):
    """q: [T, nh, hd], k/v: [T, nkv, hd] (after RoPE). GQA via repeat_kv. Returns [T, nh*hd].
    window: None for full causal attention; else the query at position i sees the keys j with
    j <= i and i - j < window (transformers' sliding_window_overlay, kv_idx > q_idx - window,
    and'ed with the causal mask: the last `window` positions, itself included)."""
    T, nh = q.shape[0], q.shape[1]
    rep = nh // k.shape[1]
    k = np.repeat(k, rep, axis=1)   # repeat_kv: head h -> kv head h // rep
    v = np.repeat(v, rep, axis=1)
    scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)   # [H, T, T]
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)
    if window is not None:
        assert window >= 1
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        mask = mask | (i - j >= window)
    scores = np.where(mask[None], -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", probs, v).reshape(T, nh * hd)


def attention(x, W, p, h, window=None):
    """x: [T, d] (already input_layernorm'ed). Causal attention (sliding when window is not
    None, see causal_attention), pos 0.."""
    T = x.shape[0]
    nh, nkv, hd = h["nh"], h["nkv"], h["hd"]
    f = lambda n: W[p + n].astype(np.float64)

    def proj(name, heads):
        y = x @ f(f"self_attn.{name}.weight").T
        if h["qkv_bias"]:
            y = y + f(f"self_attn.{name}.bias")
        return y.reshape(T, heads, hd)

    if h["fused"]:
        # Phi3Attention: qkv = qkv_proj(x); q = qkv[:nh*hd], k = next nkv*hd, v = the rest.
        qkv = x @ f("self_attn.qkv_proj.weight").T
        nq, nk = nh * hd, nkv * hd
        assert qkv.shape[1] == nq + 2 * nk
        q = qkv[:, :nq].reshape(T, nh, hd)
        k = qkv[:, nq:nq + nk].reshape(T, nkv, hd)
        v = qkv[:, nq + nk:].reshape(T, nkv, hd)
    else:
        q, k, v = proj("q_proj", nh), proj("k_proj", nkv), proj("v_proj", nkv)
    if h["qk_norm"]:
        q = rms_norm(q, W[p + "self_attn.q_norm.weight"], h["eps"])
        k = rms_norm(k, W[p + "self_attn.k_norm.weight"], h["eps"])
    pos = np.arange(T)
    q = rope_rotate_half(q, pos, h["theta"], h.get("yarn"), h["rot"])
    k = rope_rotate_half(k, pos, h["theta"], h.get("yarn"), h["rot"])
    return causal_attention(q, k, v, hd, window) @ f("self_attn.o_proj.weight").T


def swiglu(x, gate_w, up_w, down_w):
    g = x @ gate_w.astype(np.float64).T
    u = x @ up_w.astype(np.float64).T
    return (silu(g) * u) @ down_w.astype(np.float64).T


def route(x, router_w, k, norm_topk, stats):
    """Softmax router, top-k. Returns (top [T, k] expert ids, their weights [T, k])."""
    ne = router_w.shape[0]
    logits = x @ router_w.astype(np.float64).T                          # [T, E]
    logits = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    order = np.argsort(-probs, axis=-1, kind="stable")
    top = order[:, :k]                                                   # [T, k]
    top_p = np.take_along_axis(probs, top, axis=-1)
    if norm_topk:
        top_p = top_p / top_p.sum(axis=-1, keepdims=True)
    sorted_p = np.take_along_axis(probs, order, axis=-1)
    gap = sorted_p[:, k - 1] - sorted_p[:, k] if k < ne else np.full(x.shape[0], np.inf)
    if stats is not None:
        stats.append({"gap": gap, "top": top})
    return top, top_p


def mix_experts(x, top, top_p, expert_fn, ne):
    out = np.zeros_like(x)
    for e in range(ne):
        rows, slot = np.nonzero(top == e)
        if rows.size == 0:
            continue
        out[rows] += top_p[rows, slot][:, None] * expert_fn(e, x[rows])
    return out


def sparse_moe(x, W, p, h, stats):
    """Qwen3MoeSparseMoeBlock / Qwen2MoeSparseMoeBlock / MixtralSparseMoeBlock. x: [T, d]."""
    top, top_p = route(x, W[p + h["moe_prefix"] + ".gate.weight"], h["k"], h["norm_topk"], stats)
    out = mix_experts(x, top, top_p, lambda e, xs: swiglu(
        xs, W[expert_name(h, p, e, 0)], W[expert_name(h, p, e, 1)], W[expert_name(h, p, e, 2)]),
        h["n_experts"])
    if h["shared_ffn"]:
        s = p + "mlp.shared_expert."
        gate = sigmoid(x @ W[p + "mlp.shared_expert_gate.weight"].astype(np.float64).T)   # [T, 1]
        out = out + gate * swiglu(x, W[s + "gate_proj.weight"], W[s + "up_proj.weight"],
                                  W[s + "down_proj.weight"])
    return out


def forward(W, cfg, tokens, stats=None, windows=None):
    """Returns float64 logits [T, vocab]. stats (list) gets one entry per sparse layer.
    windows: per-layer sliding windows overriding the config's (for the window checks)."""
    if stats is None:
        stats = []
    h = hparams(cfg)
    if windows is not None:
        assert len(windows) == h["n_layers"]
        h["windows"] = list(windows)
    tokens = np.asarray(tokens, dtype=np.int64)
    eps = h["eps"]
    x = W["model.embed_tokens.weight"].astype(np.float64)[tokens]
    for i in range(h["n_layers"]):
        p = f"model.layers.{i}."
        x = x + attention(rms_norm(x, W[p + "input_layernorm.weight"], eps), W, p, h, h["windows"][i])
        y = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if is_sparse_layer(h, i):
            x = x + sparse_moe(y, W, p, h, stats)
        elif h["fused"]:
            # Phi3MLP: gate, up = gate_up_proj(y).chunk(2); down_proj(up * silu(gate)).
            gu = y @ W[p + "mlp.gate_up_proj.weight"].astype(np.float64).T
            g, u = gu[:, :h["ffn"]], gu[:, h["ffn"]:]
            x = x + (u * silu(g)) @ W[p + "mlp.down_proj.weight"].astype(np.float64).T
        else:
            x = x + swiglu(y, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"],
                           W[p + "mlp.down_proj.weight"])
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight" if h["tie"] else "lm_head.weight"]
    return x @ head.astype(np.float64).T


# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

def write_safetensors(path, tensors):
    header = {}
    offset = 0
    names = sorted(tensors)
    for n in names:
        t = tensors[n]
        assert t.dtype == np.float32
        header[n] = {"dtype": "F32", "shape": list(t.shape),
                     "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for n in names:
            f.write(np.ascontiguousarray(tensors[n], dtype="<f4").tobytes())


def read_safetensors(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[base + a:base + b], dtype="<f4").reshape(info["shape"])
    return out


# --------------------------------------------------------------------------
# GGUF (v3) writer and reader
# --------------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
GGUF_ALIGNMENT = 32
# gguf_type
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, \
    T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
SCALAR_FMT = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
              T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
              T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}
GGML_TYPE_F32 = 0


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def permute_qk(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF rotate-half rows -> adjacent-pair rows."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def unpermute_qk(w, n_head):
    """The inverse of permute_qk."""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def hf_to_gguf_tensors(W, cfg, arch):
    """llama.cpp names for LLM_ARCH_QWEN3MOE / QWEN2MOE / LLAMA (with experts) / QWEN3 (dense);
    numpy shapes (outermost first)."""
    h = hparams(cfg)
    permute = arch == "llama"
    g = {}
    g["token_embd.weight"] = W["model.embed_tokens.weight"]
    for i in range(h["n_layers"]):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        g[b + "attn_norm.weight"] = W[p + "input_layernorm.weight"]
        if h["fused"]:
            # LLM_ARCH_PHI3 (convert_hf_to_gguf.py Phi3MiniModel, tensor_mapping.py): qkv_proj ->
            # attn_qkv and gate_up_proj -> ffn_up as they are (no Q/K permutation, gate then up).
            g[b + "attn_qkv.weight"] = W[p + "self_attn.qkv_proj.weight"]
            g[b + "attn_output.weight"] = W[p + "self_attn.o_proj.weight"]
            g[b + "ffn_norm.weight"] = W[p + "post_attention_layernorm.weight"]
            g[b + "ffn_up.weight"] = W[p + "mlp.gate_up_proj.weight"]
            g[b + "ffn_down.weight"] = W[p + "mlp.down_proj.weight"]
            continue
        for gn, hn, heads in (("attn_q", "q_proj", h["nh"]), ("attn_k", "k_proj", h["nkv"]),
                              ("attn_v", "v_proj", None)):
            wt = W[p + f"self_attn.{hn}.weight"]
            if permute and heads is not None:
                wt = permute_qk(wt, heads)   # llama: adjacent-pair RoPE layout
            g[b + gn + ".weight"] = wt       # qwen*: not permuted
            if h["qkv_bias"]:
                assert not permute
                g[b + gn + ".bias"] = W[p + f"self_attn.{hn}.bias"]
        g[b + "attn_output.weight"] = W[p + "self_attn.o_proj.weight"]
        if h["qk_norm"]:
            g[b + "attn_q_norm.weight"] = W[p + "self_attn.q_norm.weight"]
            g[b + "attn_k_norm.weight"] = W[p + "self_attn.k_norm.weight"]
        g[b + "ffn_norm.weight"] = W[p + "post_attention_layernorm.weight"]
        if not is_sparse_layer(h, i):   # dense: LLM_ARCH_QWEN3 ffn_gate / ffn_up / ffn_down
            for gn, hn in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
                g[b + gn + ".weight"] = W[p + f"mlp.{hn}.weight"]
            continue
        g[b + "ffn_gate_inp.weight"] = W[p + h["moe_prefix"] + ".gate.weight"]
        for which, gg in enumerate(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")):
            g[b + gg + ".weight"] = np.stack(
                [W[expert_name(h, p, e, which)] for e in range(h["n_experts"])])
        if h["shared_ffn"]:
            # llama.cpp declares it {n_embd}: HF [1, d] written as a 1-D tensor of d.
            g[b + "ffn_gate_inp_shexp.weight"] = W[p + "mlp.shared_expert_gate.weight"].reshape(h["d"])
            g[b + "ffn_gate_shexp.weight"] = W[p + "mlp.shared_expert.gate_proj.weight"]
            g[b + "ffn_up_shexp.weight"] = W[p + "mlp.shared_expert.up_proj.weight"]
            g[b + "ffn_down_shexp.weight"] = W[p + "mlp.shared_expert.down_proj.weight"]
    g["output_norm.weight"] = W["model.norm.weight"]
    g["output.weight"] = W["lm_head.weight"]
    return g


def gguf_metadata_dense(cfg, arch, name):
    """Dense qwen3 / llama files: the keys of ../shared/testdata/models/synthetic/
    qwen3-qknorm/model.gguf (and llama-gqa/model.gguf, the same keys in the same order), in
    that order (plus general.alignment, which this script's other files carry too), and after
    rope.dimension_count the rope.scaling keys that llama.cpp's converter
    (conversion/base.py, TextModel.set_gguf_parameters) writes for rope_type yarn: type
    "yarn", factor (f32), original_context_length (u32); no yarn_beta_* / yarn_attn_factor /
    yarn_ext_factor keys, as the config has none.
    A model whose every layer slides (mistral-swa-tiny) gets {arch}.attention.sliding_window
    (u32) after them: the key llama.cpp names LLM_KV_ATTENTION_SLIDING_WINDOW
    ("%s.attention.sliding_window", src/llama-arch.cpp) and reads for e.g. gemma2;
    with no sliding_window_pattern key it means one window on every layer. llama.cpp's
    converter writes no such key for MistralForCausalLM (conversion/llama.py LlamaModel) and
    its llama loader (src/models/llama.cpp) does not read it, so llama.cpp runs this file
    with full causal attention."""
    h = hparams(cfg)
    a = arch
    assert arch in ("qwen3", "llama") and h["n_experts"] == 0, arch
    u32 = lambda x: (T_UINT32, int(x))
    f32 = lambda x: (T_FLOAT32, float(x))
    kv = [
        ("general.architecture", (T_STRING, a)),
        ("general.name", (T_STRING, name)),
        ("general.alignment", u32(GGUF_ALIGNMENT)),
        (f"{a}.context_length", u32(cfg["max_position_embeddings"])),
        (f"{a}.embedding_length", u32(h["d"])),
        (f"{a}.block_count", u32(h["n_layers"])),
        (f"{a}.feed_forward_length", u32(h["ffn"])),
        (f"{a}.attention.head_count", u32(h["nh"])),
        (f"{a}.attention.head_count_kv", u32(h["nkv"])),
        (f"{a}.attention.layer_norm_rms_epsilon", f32(h["eps"])),
        (f"{a}.rope.freq_base", f32(h["theta"])),
        (f"{a}.attention.key_length", u32(h["hd"])),
        (f"{a}.attention.value_length", u32(h["hd"])),
        (f"{a}.rope.dimension_count", u32(h["hd"])),
    ]
    if "yarn" in h:
        y = h["yarn"]
        kv += [
            (f"{a}.rope.scaling.type", (T_STRING, "yarn")),
            (f"{a}.rope.scaling.factor", f32(y["factor"])),
            (f"{a}.rope.scaling.original_context_length", u32(y["original"])),
        ]
    ws = set(h["windows"])
    if ws != {None}:
        assert len(ws) == 1, h["windows"]   # one window on every layer: no pattern key needed
        kv += [(f"{a}.attention.sliding_window", u32(h["windows"][0]))]
    kv += [
        (f"{a}.vocab_size", u32(h["vocab"])),
        ("general.file_type", u32(0)),   # LLAMA_FTYPE_ALL_F32
        ("tokenizer.ggml.bos_token_id", u32(cfg["bos_token_id"])),
        ("tokenizer.ggml.eos_token_id", u32(cfg["eos_token_id"])),
    ]
    return kv


def gguf_metadata_phi3(cfg, name):
    """The keys that convert_hf_to_gguf.py's Phi3MiniModel.set_gguf_parameters writes, in its
    order: context_length, rope.scaling.original_context_length, embedding_length,
    feed_forward_length, block_count, head_count, head_count_kv, layer_norm_rms_epsilon,
    rope.dimension_count = int(partial_rotary_factor * hidden_size) // num_attention_heads,
    rope.freq_base, file_type, attention.sliding_window (0 for a null sliding_window); no
    key_length / value_length / vocab_size; no rope.scaling.attn_factor and no rope_factors
    tensors (those are for LongRoPE's long_factor / short_factor only)."""
    h = hparams(cfg)
    a = "phi3"
    u32 = lambda x: (T_UINT32, int(x))
    f32 = lambda x: (T_FLOAT32, float(x))
    rope_dims = int(cfg.get("partial_rotary_factor", 1.0) * h["d"]) // h["nh"]
    assert rope_dims == h["rot"]
    sw = cfg.get("sliding_window")
    # general.name must not contain "phi3" / "phi-3": llama_vocab::impl::load then sets RSTRIP
    # attributes with token_to_id.at("<|endoftext|>") (src/llama-vocab.cpp), which the
    # stories260K vocabulary lacks, and loading fails with unordered_map::at.
    name = PHI3_GGUF_NAME
    assert "phi3" not in name.lower() and "phi-3" not in name.lower()
    return [
        ("general.architecture", (T_STRING, a)),
        ("general.name", (T_STRING, name)),
        ("general.alignment", u32(GGUF_ALIGNMENT)),
        (f"{a}.context_length", u32(cfg["max_position_embeddings"])),
        (f"{a}.rope.scaling.original_context_length", u32(cfg["original_max_position_embeddings"])),
        (f"{a}.embedding_length", u32(h["d"])),
        (f"{a}.feed_forward_length", u32(h["ffn"])),
        (f"{a}.block_count", u32(h["n_layers"])),
        (f"{a}.attention.head_count", u32(h["nh"])),
        (f"{a}.attention.head_count_kv", u32(h["nkv"])),
        (f"{a}.attention.layer_norm_rms_epsilon", f32(h["eps"])),
        (f"{a}.rope.dimension_count", u32(rope_dims)),
        (f"{a}.rope.freq_base", f32(h["theta"])),
        ("general.file_type", u32(0)),   # LLAMA_FTYPE_ALL_F32
        (f"{a}.attention.sliding_window", u32(0 if sw is None else sw)),
        ("tokenizer.ggml.bos_token_id", u32(cfg["bos_token_id"])),
        ("tokenizer.ggml.eos_token_id", u32(cfg["eos_token_id"])),
    ]


def gguf_metadata(cfg, arch, name):
    if arch == "phi3":
        return gguf_metadata_phi3(cfg, name)
    h = hparams(cfg)
    if arch == "qwen3" or (arch == "llama" and h["n_experts"] == 0):
        return gguf_metadata_dense(cfg, arch, name)
    assert set(h["windows"]) == {None}
    a = arch
    u32 = lambda x: (T_UINT32, int(x))
    f32 = lambda x: (T_FLOAT32, float(x))
    kv = [
        ("general.architecture", (T_STRING, a)),
        ("general.name", (T_STRING, name)),
        ("general.alignment", u32(GGUF_ALIGNMENT)),
        (f"{a}.context_length", u32(cfg["max_position_embeddings"])),
        (f"{a}.embedding_length", u32(h["d"])),
        (f"{a}.block_count", u32(h["n_layers"])),
        (f"{a}.feed_forward_length", u32(h["ffn"])),
        (f"{a}.attention.head_count", u32(h["nh"])),
        (f"{a}.attention.head_count_kv", u32(h["nkv"])),
    ]
    if "head_dim" in cfg:   # as the converter: key/value_length only for an explicit head_dim
        kv += [(f"{a}.attention.key_length", u32(h["hd"])),
               (f"{a}.attention.value_length", u32(h["hd"]))]
    if arch == "llama":
        kv += [(f"{a}.rope.dimension_count", u32(h["hd"]))]
    kv += [
        (f"{a}.rope.freq_base", f32(h["theta"])),
        (f"{a}.attention.layer_norm_rms_epsilon", f32(h["eps"])),
        (f"{a}.expert_count", u32(h["n_experts"])),
        (f"{a}.expert_used_count", u32(h["k"])),
    ]
    if arch in ("qwen3moe", "qwen2moe"):
        kv += [(f"{a}.expert_feed_forward_length", u32(h["expert_ffn"]))]
    if arch == "qwen2moe":
        kv += [(f"{a}.expert_shared_feed_forward_length", u32(h["shared_ffn"]))]
    if arch == "llama":
        kv += [(f"{a}.vocab_size", u32(h["vocab"]))]
    kv += [
        ("tokenizer.ggml.bos_token_id", u32(cfg["bos_token_id"])),
        ("tokenizer.ggml.eos_token_id", u32(cfg["eos_token_id"])),
    ]
    return kv


def tokenizer_kvs_raw(path, skip):
    """The tokenizer.* metadata entries of GGUF file `path` as their raw bytes (key, type,
    value), except the keys in `skip`: copied verbatim so that llama.cpp can load the model
    (it needs a vocabulary; the engine's tests feed token ids)."""
    data = Path(path).read_bytes()
    pos = 4

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def skip_val(typ):
        nonlocal pos
        if typ == T_STRING:
            n = take("<Q")
            pos += n
        elif typ == T_ARRAY:
            et, n = take("<I"), take("<Q")
            for _ in range(n):
                skip_val(et)
        else:
            pos += struct.calcsize(SCALAR_FMT[typ])

    _, _, n_kv = take("<IQQ")
    out = []
    for _ in range(n_kv):
        start = pos
        n = take("<Q")
        key = data[pos:pos + n].decode("utf-8")
        pos += n
        skip_val(take("<I"))
        if key.startswith("tokenizer.") and key not in skip:
            out.append(data[start:pos])
    return out


def write_gguf(path, kvs, tensors, raw_kvs=()):
    out = bytearray()
    out += GGUF_MAGIC
    out += struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kvs) + len(raw_kvs))
    for key, (typ, val) in kvs:
        out += gguf_str(key) + struct.pack("<I", typ)
        if typ == T_STRING:
            out += gguf_str(val)
        else:
            out += struct.pack(SCALAR_FMT[typ], val)
    for raw in raw_kvs:
        out += raw
    offset = 0
    blobs = []
    for name, t in tensors.items():
        assert t.dtype == np.float32
        out += gguf_str(name)
        out += struct.pack("<I", t.ndim)
        for dim in reversed(t.shape):          # ne[0] = innermost
            out += struct.pack("<Q", dim)
        out += struct.pack("<IQ", GGML_TYPE_F32, offset)
        blob = np.ascontiguousarray(t, dtype="<f4").tobytes()
        blob += b"\0" * ((-len(blob)) % GGUF_ALIGNMENT)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * ((-len(out)) % GGUF_ALIGNMENT)
    for blob in blobs:
        out += blob
    Path(path).write_bytes(bytes(out))


def read_gguf(path):
    """Returns (metadata dict, {name: numpy array}). Supports the scalar,
    string and array KV types and F32 tensors."""
    data = Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def take_str():
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def take_val(typ):
        if typ == T_STRING:
            return take_str()
        if typ == T_ARRAY:
            et = take("<I")
            n = take("<Q")
            return [take_val(et) for _ in range(n)]
        return take(SCALAR_FMT[typ])

    assert data[:4] == GGUF_MAGIC, "not a GGUF file"
    pos = 4
    version, n_tensors, n_kv = take("<IQQ")
    assert version == 3, version
    meta, types = {}, {}
    for _ in range(n_kv):
        key = take_str()
        typ = take("<I")
        meta[key] = take_val(typ)
        types[key] = typ
    infos = []
    for _ in range(n_tensors):
        name = take_str()
        nd = take("<I")
        dims = [take("<Q") for _ in range(nd)]
        typ, off = take("<IQ")
        infos.append((name, dims, typ, off))
    align = meta.get("general.alignment", 32)
    base = pos + ((-pos) % align)
    tensors = {}
    for name, dims, typ, off in infos:
        assert typ == GGML_TYPE_F32, (name, typ)
        assert off % align == 0, (name, off)
        n = int(np.prod(dims))
        start = base + off
        arr = np.frombuffer(data[start:start + 4 * n], dtype="<f4")
        tensors[name] = arr.reshape(list(reversed(dims)))
    meta["__types__"] = types
    return meta, tensors


# --------------------------------------------------------------------------
# GGUF forward pass (float64): llama.cpp's reading of the file
# --------------------------------------------------------------------------

# llama_model_rope_type: NEOX (rotate-half) for qwen2/qwen2moe/qwen3/qwen3moe/phi3, NORM
# (adjacent pairs) for llama. build_moe_ffn's norm_w: true for llama and qwen3moe, false
# for qwen2moe (llama.cpp's graphs hard-code it; no GGUF key).
ROPE_NEOX = {"llama": False, "qwen2": True, "qwen3": True, "qwen2moe": True, "qwen3moe": True,
             "phi3": True}
MOE_NORM_W = {"llama": True, "qwen3moe": True, "qwen2moe": False}


def yarn_ggml(meta, n_rot, theta):
    """llama.cpp's YaRN set-up from GGUF metadata only (None unless rope.scaling.type is
    yarn): freq_scale, corr_dims (ggml_rope_yarn_corr_dims), ext_factor and the mscale that
    rope_yarn multiplies cos/sin by."""
    import math
    a = meta["general.architecture"]
    if meta.get(f"{a}.rope.scaling.type", "linear") != "yarn":
        return None
    assert f"{a}.rope.scaling.yarn_log_multiplier" not in meta
    factor = meta.get(f"{a}.rope.scaling.factor", 0.0)
    freq_scale = 1.0 if factor == 0.0 else 1.0 / factor
    n_ctx_orig = meta.get(f"{a}.rope.scaling.original_context_length", meta[f"{a}.context_length"])
    beta_fast = meta.get(f"{a}.rope.scaling.yarn_beta_fast", 32.0)
    beta_slow = meta.get(f"{a}.rope.scaling.yarn_beta_slow", 1.0)
    ext_factor = meta.get(f"{a}.rope.scaling.yarn_ext_factor", 1.0)   # yarn type: 1
    rope_attn_factor = meta.get(f"{a}.rope.scaling.attn_factor", 1.0)
    f = 1.0 / freq_scale
    get_mscale = lambda scale, mscale: 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0
    # llama_context: yarn_attn_factor = get_mscale(factor, 1) / (1 + 0.1 ln(factor)) * attn_factor
    yarn_attn_factor = get_mscale(f, 1.0) * (1.0 / (1.0 + 0.1 * math.log(f))) * rope_attn_factor
    corr_dim = lambda n_r: n_rot * math.log(n_ctx_orig / (n_r * 2 * math.pi)) / (2 * math.log(theta))
    lo = max(0.0, math.floor(corr_dim(beta_fast)))
    hi = min(n_rot - 1.0, float(math.ceil(corr_dim(beta_slow))))
    mscale = yarn_attn_factor
    if ext_factor != 0.0:   # rope_yarn
        mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    return {"freq_scale": freq_scale, "corr_dims": (lo, hi), "ext_factor": ext_factor,
            "mscale": mscale}


def rope_ggml(x, positions, theta, n_rot, neox, yarn=None):
    """x: [T, H, hd]; ggml_rope_ext over the first n_rot dims, normal or NEOX mode; yarn:
    yarn_ggml() or None (freq_scale 1, ext_factor 0, attn_factor 1)."""
    theta_extrap = positions.astype(np.float64)[:, None] * (
        theta ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot))[None, :]   # [T, n_rot/2]
    if yarn is None:
        freqs = theta_extrap
    else:   # ggml-cpu rope_yarn, i0 = 2i
        lo, hi = yarn["corr_dims"]
        y = (np.arange(n_rot // 2, dtype=np.float64) - lo) / max(0.001, hi - lo)
        ramp_mix = (1.0 - np.minimum(1.0, np.maximum(0.0, y))) * yarn["ext_factor"]
        theta_interp = yarn["freq_scale"] * theta_extrap
        freqs = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix
    cos = np.cos(freqs)[:, None, :]
    sin = np.sin(freqs)[:, None, :]
    if yarn is not None:
        cos = cos * yarn["mscale"]
        sin = sin * yarn["mscale"]
    r = x[..., :n_rot]
    if neox:
        a, b = r[..., : n_rot // 2], r[..., n_rot // 2:]
    else:
        a, b = r[..., 0::2], r[..., 1::2]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(r)
    if neox:
        out[..., : n_rot // 2], out[..., n_rot // 2:] = ra, rb
    else:
        out[..., 0::2], out[..., 1::2] = ra, rb
    return np.concatenate([out, x[..., n_rot:]], axis=-1)


def forward_gguf(meta, G, tokens, stats=None, neox=None, swa=True):
    """Logits [T, vocab] from GGUF tensors and metadata only, as llama.cpp's graph computes.
    neox: override the architecture's RoPE mode (for showing what the wrong mode does).
    {arch}.attention.sliding_window (absent or 0: none), with no sliding_window_pattern key,
    is applied to every layer (transformers' window: j <= i and i - j < window, the same as
    llama.cpp's LLAMA_SWA_TYPE_STANDARD, masked when p1 - p0 >= n_swa). That is not what
    llama.cpp does for arch llama, whose loader ignores the key; swa=False gives its reading."""
    a = meta["general.architecture"]
    m = lambda key, default=None: meta.get(f"{a}.{key}", default)
    assert m("attention.sliding_window_pattern") is None
    window = (m("attention.sliding_window", 0) or None) if swa else None
    d, nh = m("embedding_length"), m("attention.head_count")
    nkv = m("attention.head_count_kv", nh)
    hd = m("attention.key_length", d // nh)
    n_rot = m("rope.dimension_count", hd)
    eps, theta = m("attention.layer_norm_rms_epsilon"), m("rope.freq_base")
    ne, k = m("expert_count", 0), m("expert_used_count", 0)
    yarn = yarn_ggml(meta, n_rot, theta)
    neox = ROPE_NEOX[a] if neox is None else neox
    n_ff = m("feed_forward_length")
    f = lambda n: G[n].astype(np.float64)
    tokens = np.asarray(tokens, dtype=np.int64)
    T = tokens.size
    pos = np.arange(T)
    x = f("token_embd.weight")[tokens]
    for i in range(m("block_count")):
        b = f"blk.{i}."
        y = rms_norm(x, G[b + "attn_norm.weight"], eps)

        def proj(name, heads):
            z = y @ f(b + name + ".weight").T
            if b + name + ".bias" in G:
                z = z + f(b + name + ".bias")
            return z.reshape(T, heads, hd)

        if b + "attn_qkv.weight" in G:
            # build_qkv: one matmul, then views of n_head, n_head_kv, n_head_kv heads.
            qkv = y @ f(b + "attn_qkv.weight").T
            assert qkv.shape[1] == (nh + 2 * nkv) * hd
            q = qkv[:, :nh * hd].reshape(T, nh, hd)
            kk = qkv[:, nh * hd:(nh + nkv) * hd].reshape(T, nkv, hd)
            v = qkv[:, (nh + nkv) * hd:].reshape(T, nkv, hd)
        else:
            q, kk, v = proj("attn_q", nh), proj("attn_k", nkv), proj("attn_v", nkv)
        if b + "attn_q_norm.weight" in G:
            q = rms_norm(q, G[b + "attn_q_norm.weight"], eps)
            kk = rms_norm(kk, G[b + "attn_k_norm.weight"], eps)
        q = rope_ggml(q, pos, theta, n_rot, neox, yarn)
        kk = rope_ggml(kk, pos, theta, n_rot, neox, yarn)
        x = x + causal_attention(q, kk, v, hd, window) @ f(b + "attn_output.weight").T
        y = rms_norm(x, G[b + "ffn_norm.weight"], eps)
        if b + "ffn_gate_inp.weight" in G:
            assert G[b + "ffn_gate_inp.weight"].shape[0] == ne
            top, top_p = route(y, G[b + "ffn_gate_inp.weight"], k, MOE_NORM_W[a], stats)
            gx, ux, dx = (G[b + n + ".weight"] for n in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"))
            out = mix_experts(y, top, top_p, lambda e, xs: swiglu(xs, gx[e], ux[e], dx[e]), ne)
            if b + "ffn_gate_inp_shexp.weight" in G:
                assert G[b + "ffn_gate_shexp.weight"].shape[0] == m("expert_shared_feed_forward_length")
                gate = sigmoid(y @ f(b + "ffn_gate_inp_shexp.weight"))[:, None]   # 1-D {n_embd}
                out = out + gate * swiglu(y, G[b + "ffn_gate_shexp.weight"],
                                          G[b + "ffn_up_shexp.weight"], G[b + "ffn_down_shexp.weight"])
            x = x + out
        elif b + "ffn_gate.weight" not in G:
            # phi3: build_ffn(ffn_up only, LLM_FFN_SWIGLU, LLM_FFN_SEQ): ggml_swiglu on the
            # fused [2 n_ff] output, silu(first half) * second half.
            upg = y @ f(b + "ffn_up.weight").T
            assert upg.shape[1] == 2 * n_ff
            x = x + (silu(upg[:, :n_ff]) * upg[:, n_ff:]) @ f(b + "ffn_down.weight").T
        else:
            x = x + swiglu(y, G[b + "ffn_gate.weight"], G[b + "ffn_up.weight"], G[b + "ffn_down.weight"])
    x = rms_norm(x, G["output_norm.weight"], eps)
    return x @ f("output.weight" if "output.weight" in G else "token_embd.weight").T


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
    if h["n_experts"] == 0:   # dense: no router criteria
        return W, logits, stats, None, [], True
    min_gap = min(float(s["gap"].min()) for st in stats.values() for s in st)
    counts = []   # per layer, tokens (on `long`) choosing each expert
    for s in stats["long"]:
        counts.append(np.bincount(s["top"].ravel(), minlength=h["n_experts"]))
    all_used = all((c > 0).all() for c in counts)
    return W, logits, stats, min_gap, counts, all_used


def crosscheck_dense():
    """Runs this file's HF and GGUF forward passes on the shared dense models."""
    seqs = json.loads(SEQUENCES.read_text())
    ok = True
    for model in DENSE_MODELS:
        d = DENSE_DIR / model
        if not d.is_dir():
            print(f"crosscheck: {d} not found, skipped")
            continue
        cfg = json.loads((d / "hf" / "config.json").read_text())
        W = read_safetensors(d / "hf" / "model.safetensors")
        meta, G = read_gguf(d / "model.gguf")
        if meta["general.architecture"] == "llama":
            h = hparams(cfg)
            for i in range(h["n_layers"]):
                p, b = f"model.layers.{i}.self_attn.", f"blk.{i}."
                same = (np.array_equal(G[b + "attn_q.weight"], permute_qk(W[p + "q_proj.weight"], h["nh"]))
                        and np.array_equal(G[b + "attn_k.weight"], permute_qk(W[p + "k_proj.weight"], h["nkv"])))
                print(f"crosscheck {model} layer {i}: GGUF attn_q/attn_k == permute_qk(HF q_proj/k_proj): {same}")
                ok &= same
        for name in ("short", "long"):
            for how, got in (("hf", forward(W, cfg, seqs[name])),
                             ("gguf", forward_gguf(meta, G, seqs[name]))):
                got = got.astype(np.float32)
                for ref_name, tol in (("numpy", 1e-3), ("llamacpp", 5e-2)):
                    ref = np.load(d / f"{ref_name}_logits_{name}.npy")
                    diff = float(np.abs(got - ref).max())
                    same = bool((got.argmax(-1) == ref.argmax(-1)).all())
                    print(f"crosscheck {model:14s} {how:4s} {name:5s} vs {ref_name:8s}: max|diff| {diff:.3e}"
                          f" (range {ref.min():.1f}..{ref.max():.1f}), argmax identical: {same}")
                    ok &= diff < tol and same
    return ok


def shape_json_dense(model, cfg, arch, seed, margin, window_stats=None):
    h = hparams(cfg)
    s = {"name": MODELS[model][0], "arch": arch, "hf_model_type": cfg["model_type"],
         "seed": seed, "vocab": h["vocab"], "dim": h["d"], "n_layers": h["n_layers"],
         "n_heads": h["nh"], "n_kv_heads": h["nkv"], "head_dim": h["hd"],
         "qk_norm": h["qk_norm"], "attention_bias": h["qkv_bias"]}
    if model in HF_ONLY:
        s["gguf"] = False
    else:
        s["gguf_qk_rows_permuted"] = arch == "llama"
    s.update({"ffn": h["ffn"],
              "ctx": cfg["max_position_embeddings"], "eps": h["eps"], "rope_theta": h["theta"]})
    if set(h["windows"]) != {None}:
        s["sliding_window"] = next(w for w in h["windows"] if w is not None)
        if "use_sliding_window" in cfg:
            s["use_sliding_window"] = cfg["use_sliding_window"]
            s["max_window_layers"] = cfg["max_window_layers"]
        s["layer_types"] = ["sliding_attention" if w is not None else "full_attention"
                            for w in h["windows"]]
        s["window_vs_full_causal"] = window_stats
    if "yarn" in h:
        y = h["yarn"]
        s["rope_scaling"] = {
            "type": "yarn", "factor": y["factor"],
            "original_context_length": y["original"],
            "beta_fast": y["beta_fast"], "beta_slow": y["beta_slow"],
            "low": y["low"], "high": y["high"],
            "attention_factor": y["attention_factor"],
            "inv_freq": [float(v) for v in y["inv_freq"]],
        }
    s.update({"tie_word_embeddings": h["tie"], "min_argmax_margin": margin})
    return s


def shape_json_phi3(model, cfg, arch, seed, margin):
    h = hparams(cfg)
    return {"name": MODELS[model][0], "arch": arch, "hf_model_type": cfg["model_type"],
            "seed": seed, "vocab": h["vocab"], "dim": h["d"], "n_layers": h["n_layers"],
            "n_heads": h["nh"], "n_kv_heads": h["nkv"], "head_dim": h["hd"],
            "partial_rotary_factor": cfg["partial_rotary_factor"], "rope_dim": h["rot"],
            "rope_inv_freq": [float(v) for v in
                              1.0 / (h["theta"] ** (np.arange(0, h["rot"], 2, dtype=np.float64) / h["rot"]))],
            "qk_norm": h["qk_norm"], "attention_bias": h["qkv_bias"],
            "fused_qkv": {"tensor": "self_attn.qkv_proj.weight / blk.N.attn_qkv.weight",
                          "shape": [(h["nh"] + 2 * h["nkv"]) * h["hd"], h["d"]],
                          "q": [0, h["nh"] * h["hd"]],
                          "k": [h["nh"] * h["hd"], (h["nh"] + h["nkv"]) * h["hd"]],
                          "v": [(h["nh"] + h["nkv"]) * h["hd"], (h["nh"] + 2 * h["nkv"]) * h["hd"]]},
            "fused_gate_up": {"tensor": "mlp.gate_up_proj.weight / blk.N.ffn_up.weight",
                              "shape": [2 * h["ffn"], h["d"]],
                              "gate": [0, h["ffn"]], "up": [h["ffn"], 2 * h["ffn"]]},
            "gguf_qk_rows_permuted": False, "ffn": h["ffn"],
            "ctx": cfg["max_position_embeddings"],
            "original_ctx": cfg["original_max_position_embeddings"],
            "eps": h["eps"], "rope_theta": h["theta"],
            "tie_word_embeddings": h["tie"], "min_argmax_margin": margin}


def phi3_checks(cfg, W, meta, RG, logits, seqs):
    """Partial-rotary RoPE: ggml NEOX over n_rot = rope.dimension_count equals HF's partial
    rotate-half; and what the usual mistakes do to the logits."""
    h = hparams(cfg)
    n_rot, base = meta["phi3.rope.dimension_count"], meta["phi3.rope.freq_base"]
    assert n_rot == h["rot"] == 12
    xr = np.random.default_rng(0).standard_normal((len(seqs["long"]), 2, h["hd"]))
    pos = np.arange(xr.shape[0])
    hf = rope_rotate_half(xr, pos, h["theta"], None, h["rot"])
    rdiff = float(np.abs(rope_ggml(xr, pos, base, n_rot, True) - hf).max())
    assert rdiff < 1e-12 and np.array_equal(hf[..., n_rot:], xr[..., n_rot:]), rdiff
    print(f"partial RoPE: ggml NEOX (n_rot {n_rot}) vs HF rotate-half over the first {h['rot']} of "
          f"{h['hd']} dims on positions 0..{pos[-1]}: max|diff| {rdiff:.1e}; dims {n_rot}..{h['hd'] - 1} unchanged")

    def report(what, fn):
        out = []
        for name in ("short", "long"):
            lg = fn(name)
            ref = logits[name]
            out.append(f"{name} {np.abs(lg - ref).max():.3f} ({int((lg.argmax(-1) != ref.argmax(-1)).sum())} argmax)")
        print(f"mistake {what}: max|diff| " + ", ".join(out))

    full = dict(cfg, partial_rotary_factor=1.0)
    report("RoPE over all 16 dims (partial_rotary_factor ignored)", lambda n: forward(W, full, seqs[n]))
    report("NEOX pairs (i, i + head_dim/2) instead of (i, i + n_rot/2)",
           lambda n: _phi3_rope_variant(W, cfg, seqs[n], "pair_offset_hd"))
    report("12 rotated dims but inv_freq = theta^(-2i/head_dim)",
           lambda n: _phi3_rope_variant(W, cfg, seqs[n], "freq_hd"))
    report("adjacent-pair (NORM) RoPE on the 12 dims", lambda n: forward_gguf(meta, RG, seqs[n], neox=False))
    swapped = dict(RG)
    for i in range(h["n_layers"]):
        u = RG[f"blk.{i}.ffn_up.weight"]
        swapped[f"blk.{i}.ffn_up.weight"] = np.concatenate([u[h["ffn"]:], u[:h["ffn"]]])
    report("gate and up halves of gate_up_proj swapped", lambda n: forward_gguf(meta, swapped, seqs[n]))
    kvswap = dict(RG)
    nq, nk = h["nh"] * h["hd"], h["nkv"] * h["hd"]
    for i in range(h["n_layers"]):
        w = RG[f"blk.{i}.attn_qkv.weight"]
        kvswap[f"blk.{i}.attn_qkv.weight"] = np.concatenate([w[:nq], w[nq + nk:], w[nq:nq + nk]])
    report("k and v blocks of qkv_proj swapped", lambda n: forward_gguf(meta, kvswap, seqs[n]))


def _phi3_rope_variant(W, cfg, tokens, variant):
    """The HF forward with a wrong partial RoPE (only for phi3_checks' mistake table)."""
    global rope_rotate_half
    orig = rope_rotate_half

    def wrong(x, positions, theta, yarn=None, rot=None):
        hd = x.shape[-1]
        half = rot // 2
        den = hd if variant == "freq_hd" else rot
        inv = 1.0 / (theta ** (np.arange(0, rot, 2, dtype=np.float64) / den))    # [rot/2]
        fr = positions.astype(np.float64)[:, None, None] * inv[None, None, :]
        c, s_ = np.cos(fr), np.sin(fr)
        off = hd // 2 if variant == "pair_offset_hd" else half
        out = x.copy()
        a, b = x[..., :half], x[..., off:off + half]
        out[..., :half] = a * c - b * s_
        out[..., off:off + half] = a * s_ + b * c
        return out

    rope_rotate_half = wrong
    try:
        return forward(W, cfg, tokens)
    finally:
        rope_rotate_half = orig


def shape_json(model, cfg, arch, seed, min_gap):
    h = hparams(cfg)
    out_name = MODELS[model][0]
    s = {"name": out_name, "arch": arch}
    if model == "mixtral":
        s["hf_model_type"] = cfg["model_type"]
    s.update({
        "seed": seed,
        "vocab": h["vocab"],
        "dim": h["d"],
        "n_layers": h["n_layers"],
        "n_heads": h["nh"],
        "n_kv_heads": h["nkv"],
        "head_dim": h["hd"],
        "qk_norm": h["qk_norm"],
    })
    if model != "qwen3moe":
        s["attention_bias"] = h["qkv_bias"]
        s["gguf_qk_rows_permuted"] = arch == "llama"
    s.update({
        "ffn": h["ffn"],
        "n_experts": h["n_experts"],
        "n_experts_used": h["k"],
        "expert_ffn": h["expert_ffn"],
    })
    if h["shared_ffn"]:
        s["shared_expert_ffn"] = h["shared_ffn"]
    s.update({
        "norm_topk_prob": h["norm_topk"],
        "ctx": cfg["max_position_embeddings"],
        "eps": h["eps"],
        "rope_theta": h["theta"],
        "tie_word_embeddings": h["tie"],
        "min_router_gap": min_gap,
    })
    return s


def _window_diffs(lg, ref):
    """Per-position max|diff| of two logit arrays, and how many positions' argmax differ."""
    d = np.abs(lg - ref).max(axis=-1)
    changed = int((lg.argmax(-1) != ref.argmax(-1)).sum())
    return d, changed


def sliding_window_checks(W, cfg, logits, seqs):
    """The window matters: full causal attention gives the same logits before position w
    (< 1e-12) and different ones (> 1e-2) after on `long`; and what the usual mistakes do."""
    h = hparams(cfg)
    n = h["n_layers"]
    w = next(x for x in h["windows"] if x is not None)
    assert set(h["windows"]) <= {None, w}
    stats = {}
    for name, toks in seqs.items():
        full = forward(W, cfg, toks, windows=[None] * n)
        d, changed = _window_diffs(full, logits[name])
        before = float(d[:w].max())
        after = d[w:]
        line = (f"full causal vs window {w} on {name:5s} (T={len(toks)}): positions < {w}: "
                f"max|diff| {before:.1e}")
        if after.size:
            line += (f"; positions >= {w}: max|diff| {after.max():.3f}, smallest per-position "
                     f"max|diff| {after.min():.3f} (at {w + int(after.argmin())}), "
                     f"argmax changed at {changed} positions")
        else:
            line += f" (no position >= {w}: the window does not matter here)"
        print(line)
        assert before < 1e-12, (name, before)
        stats[name] = {"max_abs_diff_before_window": before,
                       "max_abs_diff_from_window": float(after.max()) if after.size else None,
                       "min_per_position_max_abs_diff_from_window":
                           float(after.min()) if after.size else None,
                       "argmax_changed_positions": changed}
    assert stats["long"]["max_abs_diff_from_window"] > 1e-2, stats["long"]
    assert stats["long"]["min_per_position_max_abs_diff_from_window"] > 1e-2, stats["long"]

    def report(what, windows):
        out = []
        for name, toks in seqs.items():
            lg = forward(W, cfg, toks, windows=windows)
            out.append(f"{name} {np.abs(lg - logits[name]).max():.3f} "
                       f"({int((lg.argmax(-1) != logits[name].argmax(-1)).sum())} argmax)")
        print(f"mistake {what}: max|diff| " + ", ".join(out))

    sw = lambda ww: [ww if x is not None else None for x in h["windows"]]
    report(f"window {w + 1} (i - j <= {w}: the key at distance {w} kept)", sw(w + 1))
    report(f"window {w - 1} (the query's own position not counted)", sw(w - 1))
    if None in h["windows"]:
        report("every layer slides (a GGUF sliding_window key read without a pattern)", [w] * n)
        report("the pattern inverted (layers < max_window_layers slide)",
               [None if x is not None else w for x in h["windows"]])
    return stats


def generate(model, seqs):
    out_name, cfg, arch = MODELS[model]
    out_dir = DATA_DIR / out_name
    h = hparams(cfg)
    dense = h["n_experts"] == 0
    gguf = model not in HF_ONLY
    sliding = set(h["windows"]) != {None}
    print(f"== {out_name} ({cfg['architectures'][0]}, " + (f"GGUF {arch})" if gguf else "no GGUF)"))
    if sliding:
        print("sliding windows per layer (None = full causal): " + ", ".join(map(str, h["windows"])))
    if "yarn" in h:
        y = h["yarn"]
        print(f"YaRN (transformers _compute_yarn_parameters, float64): factor {y['factor']:g}, "
              f"original context {y['original']}, beta_fast {y['beta_fast']}, beta_slow {y['beta_slow']}, "
              f"low {y['low']}, high {y['high']}, attention_factor {y['attention_factor']!r}")
        print("YaRN inv_freq: " + ", ".join(repr(float(v)) for v in y["inv_freq"]))
    for seed in range(1, MAX_SEED + 1):
        W, logits, stats, min_gap, counts, all_used = evaluate_seed(cfg, seed, seqs)
        margin = min(float(np.min(np.diff(np.sort(lg, axis=1)[:, -2:], axis=1))) for lg in logits.values())
        if (dense or min_gap >= MIN_ROUTER_GAP) and all_used and margin >= MIN_ARGMAX_MARGIN:
            break
        why = []
        if margin < MIN_ARGMAX_MARGIN:
            why.append(f"argmax margin {margin:.2e} < {MIN_ARGMAX_MARGIN:g}")
        if not dense and min_gap < MIN_ROUTER_GAP:
            why.append(f"min router gap {min_gap:.2e} < {MIN_ROUTER_GAP:g}")
        if not all_used:
            why.append("an expert unused on `long`")
        print(f"seed {seed}: rejected ({'; '.join(why)})")
    else:
        sys.exit(f"{out_name}: no acceptable seed found")

    if dense:
        print(f"seed {seed}: accepted; min argmax margin (top-1 minus top-2 logit) {margin:.4e}")
    else:
        print(f"seed {seed}: accepted; min router gap (k-th minus (k+1)-th prob) {min_gap:.4e}, "
              f"min argmax margin (top-1 minus top-2 logit) {margin:.4e}")
    for name, lg in logits.items():
        m = float(np.min(np.diff(np.sort(lg, axis=1)[:, -2:], axis=1)))
        print(f"logits {name:5s}: T={lg.shape[0]} range {lg.min():.4f} .. {lg.max():.4f}"
              + (f", min argmax margin {m:.4e}" if dense else ""))
    for i, c in enumerate(counts):
        print(f"layer {i} tokens per expert on `long` (k={h['k']}): {c.tolist()}")

    window_stats = sliding_window_checks(W, cfg, logits, seqs) if sliding else None

    (out_dir / "hf").mkdir(parents=True, exist_ok=True)
    (out_dir / "hf" / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_safetensors(out_dir / "hf" / "model.safetensors", W)
    if gguf:
        G = hf_to_gguf_tensors(W, cfg, arch)
        kvs = gguf_metadata(cfg, arch, out_name)
        tok = tokenizer_kvs_raw(TOKENIZER_GGUF, {k for k, _ in kvs})
        write_gguf(out_dir / "model.gguf", kvs, G, tok)
    else:
        assert not (out_dir / "model.gguf").exists(), "remove the stale model.gguf"
    for name, lg in logits.items():
        np.save(out_dir / f"numpy_logits_{name}.npy", lg.astype(np.float32))
    if h["fused"]:
        shape = shape_json_phi3(model, cfg, arch, seed, margin)
    elif dense:
        shape = shape_json_dense(model, cfg, arch, seed, margin, window_stats)
    else:
        shape = shape_json(model, cfg, arch, seed, min_gap)
    (out_dir / "shape.json").write_text(json.dumps(shape, indent=1) + "\n")

    # Self-checks: read everything back.
    RS = read_safetensors(out_dir / "hf" / "model.safetensors")
    assert set(RS) == set(W)
    for n, t in W.items():
        assert RS[n].shape == t.shape and np.array_equal(RS[n], t), n
    for name, lg in logits.items():
        assert np.array_equal(np.load(out_dir / f"numpy_logits_{name}.npy"), lg.astype(np.float32))
    if gguf:
        meta, RG = read_gguf(out_dir / "model.gguf")
        assert set(RG) == set(G), sorted(set(RG) ^ set(G))
        for n, t in G.items():
            assert RG[n].shape == t.shape and np.array_equal(RG[n], t), n
        for key, (typ, val) in kvs:
            assert meta["__types__"][key] == typ, key
            if typ == T_FLOAT32:
                assert meta[key] == float(np.float32(val)), key
            else:
                assert meta[key] == val, key
        for i in range(h["n_layers"]):
            p, b = f"model.layers.{i}.", f"blk.{i}."
            # GGUF expert tensors equal the HF per-expert tensors.
            for which, gg in enumerate(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")):
                for e in range(h["n_experts"]):
                    assert np.array_equal(RG[f"{b}{gg}.weight"][e], W[expert_name(h, p, e, which)])
            if h["fused"]:   # phi3: attn_qkv / ffn_up are HF's fused qkv_proj / gate_up_proj as is
                assert RG[f"{b}attn_qkv.weight"].shape == ((h["nh"] + 2 * h["nkv"]) * h["hd"], h["d"])
                assert np.array_equal(RG[f"{b}attn_qkv.weight"], W[f"{p}self_attn.qkv_proj.weight"]), i
                assert RG[f"{b}ffn_up.weight"].shape == (2 * h["ffn"], h["d"])
                assert np.array_equal(RG[f"{b}ffn_up.weight"], W[f"{p}mlp.gate_up_proj.weight"]), i
                assert np.array_equal(RG[f"{b}ffn_down.weight"], W[f"{p}mlp.down_proj.weight"]), i
                assert f"{b}ffn_gate.weight" not in RG
                continue
            # Q/K: un-permuting the llama GGUF rows gives back HF's; qwen* are stored as in HF.
            for gn, hn, heads in (("attn_q", "q_proj", h["nh"]), ("attn_k", "k_proj", h["nkv"])):
                gw, hw = RG[f"{b}{gn}.weight"], W[f"{p}self_attn.{hn}.weight"]
                if arch == "llama":
                    assert np.array_equal(unpermute_qk(gw, heads), hw), (gn, i)
                    assert not np.array_equal(gw, hw), (gn, i)
                else:
                    assert np.array_equal(gw, hw), (gn, i)
            if dense:   # GGUF ffn_gate / ffn_up / ffn_down are the HF dense MLP
                for gn, hn in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
                    assert np.array_equal(RG[f"{b}{gn}.weight"], W[f"{p}mlp.{hn}.weight"]), (gn, i)
            if h["shared_ffn"]:
                sg = RG[f"{b}ffn_gate_inp_shexp.weight"]
                assert sg.shape == (h["d"],)
                assert np.array_equal(sg.reshape(1, -1), W[f"{p}mlp.shared_expert_gate.weight"])
        # An independent forward over the GGUF alone (llama.cpp's reading) gives the same logits.
        for name, toks in seqs.items():
            lg = forward_gguf(meta, RG, toks)
            diff = float(np.abs(lg - logits[name]).max())
            assert diff < 1e-9 and (lg.argmax(-1) == logits[name].argmax(-1)).all(), (name, diff)
            print(f"GGUF forward ({'adjacent-pair' if not ROPE_NEOX[arch] else 'NEOX'} RoPE) on {name:5s}: "
                  f"max|diff| vs HF forward {diff:.2e}")
        if "yarn" in h:
            # llama.cpp's YaRN from the GGUF metadata alone gives transformers' inv_freq and scale.
            y = h["yarn"]
            yg = yarn_ggml(meta, meta["qwen3.rope.dimension_count"], meta["qwen3.rope.freq_base"])
            assert yg["corr_dims"] == (float(y["low"]), float(y["high"])), (yg["corr_dims"], y)
            n_rot, base = meta["qwen3.rope.dimension_count"], meta["qwen3.rope.freq_base"]
            xr = np.random.default_rng(0).standard_normal((len(seqs["long"]), 2, n_rot))
            pos = np.arange(xr.shape[0])
            rdiff = float(np.abs(rope_ggml(xr, pos, base, n_rot, True, yg)
                                 - rope_rotate_half(xr, pos, h["theta"], y)).max())
            assert rdiff < 1e-12 and abs(yg["mscale"] - y["attention_factor"]) < 1e-15, (rdiff, yg, y)
            print(f"YaRN from the GGUF metadata (llama.cpp): corr_dims {yg['corr_dims']}, mscale "
                  f"{yg['mscale']!r}; ggml NEOX YaRN RoPE vs HF rotate-half YaRN on positions "
                  f"0..{pos[-1]}: max|diff| {rdiff:.1e}")
            # YaRN matters: plain RoPE (no rope_scaling) gives different logits.
            plain = {k: v for k, v in cfg.items() if k != "rope_scaling"}
            lp = forward(W, plain, seqs["long"])
            dl = np.abs(lp - logits["long"]).max(axis=-1)
            print(f"without YaRN the `long` logits differ by up to {dl.max():.3f} "
                  f"(positions < 64: {dl[:64].max():.3f}, >= 64: {dl[64:].max():.3f})")
            assert dl.max() > 1e-2
        if h["fused"]:
            phi3_checks(cfg, W, meta, RG, logits, seqs)
    if sliding and gguf:
        # llama.cpp's reading of the file (it ignores llama.attention.sliding_window) is full
        # causal attention, not this model.
        for name, toks in seqs.items():
            lg = forward_gguf(meta, RG, toks, swa=False)
            ref_full = forward(W, cfg, toks, windows=[None] * h["n_layers"])
            dfull = float(np.abs(lg - ref_full).max())
            assert dfull < 1e-9, (name, dfull)
            print(f"GGUF forward without the window (llama.cpp's reading) on {name:5s}: max|diff| vs full "
                  f"causal HF forward {dfull:.2e}, vs the reference {np.abs(lg - logits[name]).max():.3f}")
    n_g = f"{len(G)} GGUF tensors and " if gguf else "(no GGUF) "
    print(f"self-check passed: {n_g}{len(W)} safetensors tensors read back equal")
    for p in sorted(out_dir.rglob("*")):
        if p.is_file():
            print(f"  {p.relative_to(REPO_ROOT)}: {p.stat().st_size} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=list(MODELS) + ["all"], default="all",
                    help="which model to generate (default: all)")
    ap.add_argument("--crosscheck-dense", action="store_true",
                    help="also check the attention paths against the shared dense references")
    args = ap.parse_args()

    if args.crosscheck_dense and not crosscheck_dense():
        sys.exit("crosscheck against the dense references FAILED")

    all_seqs = json.loads(SEQUENCES.read_text())
    seqs = {"short": all_seqs["short"], "long": all_seqs["long"]}
    assert len(seqs["short"]) == 24 and len(seqs["long"]) == 160
    for model in (MODELS if args.model == "all" else [args.model]):
        generate(model, seqs)


if __name__ == "__main__":
    main()
