#!/usr/bin/python3
"""Independent float64 NumPy references for two tiny random-weight Gemma models (Gemma 2, Gemma 3).

A Gemma 2 (attention and final logit soft-capping, every other layer sliding) and a Gemma 3
(q/k norms, five sliding layers to one global, two RoPE bases, linear RoPE scaling on the
global layer).

Two models, one folder each under tests/models/data/ (found from this script's own path, so it
can be run from anywhere):

  gemma2-tiny  transformers Gemma2ForCausalLM (gemma2): hidden 64, 4 layers, 4 query heads /
               2 KV heads, head_dim 24 (!= 64 / 4), GeGLU (gelu_pytorch_tanh) MLP of width 128,
               layers 0 and 2 slide (window 40), layers 1 and 3 global, rope_theta 10000,
               attn_logit_softcapping 3.0, final_logit_softcapping 5.0,
               query_pre_attn_scalar 24 (= head_dim), tied embeddings; GGUF arch `gemma2`
  gemma3-tiny  transformers Gemma3ForCausalLM (gemma3_text): the same sizes with 6 layers,
               sliding_window_pattern 6 (layers 0-4 slide, window 16; layer 5 global), q_norm /
               k_norm, no soft-capping, rope_local_base_freq 10000 (sliding layers, no
               scaling), rope_theta 1e6 with rope_scaling {linear, factor 8} (global layer
               only), query_pre_attn_scalar 24, tied embeddings; GGUF arch `gemma3`

What it writes in each folder (as scripts/references/tiny_models.py does for its models):

  hf/config.json            Hugging Face config
  hf/model.safetensors      the weights, float32, Hugging Face tensor names (no lm_head.weight:
                            tied, as Gemma checkpoints are)
  model.gguf                the same weights as a GGUF v3 file laid out as llama.cpp's converter
                            (conversion/gemma.py Gemma2Model / Gemma3Model) writes them: all
                            tensors F32, alignment 32, every *norm.weight stored as HF's w + 1,
                            no output.weight (tied), the converter's metadata keys (see
                            gguf_metadata), and the tokenizer.* metadata of the 512-piece
                            stories260K vocabulary copied in so that llama.cpp can load it
  numpy_logits_short.npy    float32 logits [T, 512] for every position of the `short` (24) and
  numpy_logits_long.npy     `long` (160) token sequences of
                            ../shared/testdata/models/synthetic/sequences.json (relative to the
                            repository root)
  shape.json                the hyperparameters, the seed, the argmax margins, the window and
                            soft-capping / RoPE-scaling effects measured below
(README.md in each folder is written by hand from this script's output; the
llamacpp_logits_*.npy files come from scripts/references/llamacpp_reference.sh.)

How to run (system Python with Debian's python3-numpy; nothing else needed):

  /usr/bin/python3 scripts/references/gemma_models.py                 (both models)
  /usr/bin/python3 scripts/references/gemma_models.py --model gemma3  (one of gemma2, gemma3, all)
  /usr/bin/python3 scripts/references/gemma_models.py --compare-llamacpp
      (writes nothing: compares the llamacpp_logits_*.npy made by
       scripts/references/llamacpp_reference.sh tests/models/data/gemma2-tiny/model.gguf \\
           tests/models/data/gemma3-tiny/model.gguf
       with the NumPy logits, and with the NumPy forward using ggml's f16-table GELU or erf GELU)
  /usr/bin/python3 scripts/references/gemma_models.py --no-mlp-copy /tmp/gemma-nomlp
  OUT_DIR=/tmp/gemma-nomlp-out scripts/references/llamacpp_reference.sh \\
      /tmp/gemma-nomlp/gemma2-tiny /tmp/gemma-nomlp/gemma3-tiny
  /usr/bin/python3 scripts/references/gemma_models.py --compare-llamacpp \\
      --no-mlp-logits /tmp/gemma-nomlp-out
      (a diagnostic, not committed: model.gguf with every ffn_down zeroed, so that no GELU is
       evaluated; llama.cpp's logits of that copy against its NumPy forward show that everything
       but ggml's f16 GELU table agrees to ~1e-6)

It is self-contained apart from the generic helpers of tiny_models.py (safetensors and GGUF
writers/readers, the tokenizer metadata copy, plain RMSNorm x * w, ggml's RoPE), imported from
there: pure NumPy, float64 compute, and it shares no code with the engine (llmserve). Weights are
drawn with np.random.default_rng(seed): embeddings std 1/sqrt(hidden) (so embed * sqrt(hidden)
is O(1)), matrices std 1/sqrt(fan_in), rounded to float32 for storage; the forward pass uses
exactly those float32 values promoted to float64; the logits are cast to float32 at the end.
Norm weights: g = float32(1 + s N(0,1)) (s = 0.1; q_norm / k_norm s = 0.15, so 1 + w ~ 1 +- 0.3)
and the HF weight w = g - 1, which is exact in float32 for g in [0.5, 2]; so the converter's
float32 w + 1 gives back exactly g and the HF (1 + w) and GGUF (g) readings use the very same
multiplier (asserted: GGUF == HF + 1 and GGUF - 1 == HF bit for bit). For each model, seeds are
tried from 1 upwards until the top-1 logit leads the top-2 by >= 2e-3 at every position of both
sequences (so argmax comparisons are not decided by rounding). Rerunning reproduces every file
byte for byte.

Self-checks after writing: the GGUF and safetensors files are read back with tiny_models.py's
readers and every tensor and metadata key (with its type) is asserted equal to what was
written; a second, independent forward pass that reads only the GGUF (llama.cpp tensor names
and hyperparameters from its metadata, norm weights used as stored with no + 1, llama.cpp's
sliding pattern is_swa(il) = il % n_pattern < n_pattern - 1 with its default n_pattern 2 for
gemma2 and 6 for gemma3, per-layer RoPE base / scale as llama_model::get_rope_freq_base /
_scale choose them, ggml NEOX RoPE, Q scaled by llama.cpp's f_attention_scale, its soft-capping
defaults) must reproduce the Hugging Face forward's logits to 1e-9 with the same argmax. The
window matters: logits with full causal attention on every layer must equal the reference
(< 1e-12) at every position before the window and differ from it (> 1e-2) at every position
from the window on (`long` for both; gemma3's `short`, 24 > 16, too). gemma2: the logits without
the attention soft-cap and without the final soft-cap must each differ by > 1e-2 (asserted).
gemma3: the logits without the linear RoPE scaling, with it on every layer, and with rope_theta
on the sliding layers (rope_local_base_freq ignored) must each differ by > 1e-2 (asserted). A
table of what other usual mistakes do is printed (window off by one, pattern inverted, every
layer sliding, norms without the + 1, embeddings not scaled by sqrt(hidden), erf GELU instead
of tanh, no q/k norm, 1/sqrt(hidden / heads) instead of query_pre_attn_scalar^-0.5).

Sources of the semantics:
  * transformers models/gemma2/modeling_gemma2.py (Gemma2ForCausalLM):
    - Gemma2Model: h = embed_tokens(ids) * normalizer, normalizer = hidden_size ** 0.5 in the
      hidden dtype (8.0 here, exact); causal_mask_mapping {"full_attention": create_causal_mask,
      "sliding_attention": create_sliding_window_causal_mask}, each decoder layer takes the mask
      of config.layer_types[i].
    - Gemma2RMSNorm: x * rsqrt(mean(x^2) + eps) * (1.0 + weight), computed in float32 (float64
      here); eps = rms_norm_eps.
    - Gemma2DecoderLayer: r = h; h = input_layernorm(h); h = self_attn(h);
      h = post_attention_layernorm(h); h = r + h; r = h; h = pre_feedforward_layernorm(h);
      h = mlp(h); h = post_feedforward_layernorm(h); h = r + h.
    - Gemma2MLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), act_fn =
      ACT2FN[hidden_activation] = gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715
      x^3))). No biases anywhere (attention_bias false).
    - Gemma2Attention: q/k/v_proj to num_heads * head_dim / num_kv_heads * head_dim (head_dim
      from the config, not hidden / heads), rotate-half RoPE over the whole head (default rope
      type: inv_freq = rope_theta^(-arange(0, head_dim, 2) / head_dim), emb = cat(freqs, freqs),
      x cos + rotate_half(x) sin, rotate_half(x) = cat(-x2, x1)), GQA by repeat_kv (query head h
      uses KV head h // (heads / kv_heads)); eager_attention_forward: s = q k^T * scaling,
      scaling = query_pre_attn_scalar ** -0.5; if attn_logit_softcapping: s = cap * tanh(s /
      cap); s + mask; softmax in float32 (float64 here); times V; o_proj.
      sliding_window = config.sliding_window for a "sliding_attention" layer.
    - Gemma2Config: layer_types (when absent) = ["sliding_attention" if bool((i + 1) % 2) else
      "full_attention"]: layers 0, 2, ... slide (the config here writes that derived list; the
      script asserts it is the derived one).
    - Gemma2ForCausalLM: logits = lm_head(norm(h)), lm_head tied to embed_tokens
      (tie_word_embeddings true); if final_logit_softcapping: logits = cap * tanh(logits / cap).
  * transformers models/gemma3/modeling_gemma3.py (Gemma3ForCausalLM, Gemma3TextConfig):
    - the same embedding scale (Gemma3TextScaledWordEmbedding, embed_scale = hidden ** 0.5),
      RMSNorm (Gemma3RMSNorm, 1 + weight), decoder layer, MLP and final layer as Gemma 2;
      attn_logit_softcapping null: no attention capping; final_logit_softcapping null: none.
    - Gemma3Attention: q_norm / k_norm = Gemma3RMSNorm(head_dim) applied to every q and k head
      after the projection and BEFORE RoPE; scaling = query_pre_attn_scalar ** -0.5; a
      sliding layer uses the local rotary embedding.
    - Gemma3TextModel: rotary_emb from the config (rope_theta 1e6, rope_scaling linear factor 8:
      _compute_linear_scaling_rope_parameters, inv_freq = default inv_freq / factor) for the
      full-attention layers; rotary_emb_local from a copy with rope_theta = rope_local_base_freq
      (10000) and rope_scaling {"rope_type": "default"} (no scaling) for the sliding layers.
      (transformers >= 5 spells this rope_parameters {"full_attention": {...},
      "sliding_attention": {...}} and converts the legacy keys written here to it.)
    - Gemma3TextConfig: layer_types (when absent) = ["sliding_attention" if bool((i + 1) %
      sliding_window_pattern) else "full_attention"] (sliding_window_pattern 6: layers 0-4
      slide, 5 global; written, and asserted to be the derived list).
  * Sliding windows (transformers masking_utils.py): sliding_window_overlay(w) keeps kv_idx >
    q_idx - w, and'ed with causal kv_idx <= q_idx: the query at position i sees the keys j with
    j <= i and i - j < w (the last w positions, itself included). llama.cpp's
    LLAMA_SWA_TYPE_STANDARD (llama_hparams::is_masked_swa: masked when p1 - p0 >= n_swa) is the
    same window.
  * llama.cpp (peer checkout /work/peers/llama.cpp): conversion/gemma.py, conversion/base.py
    (TextModel.__init__ / set_gguf_parameters), gguf-py/gguf/{constants,gguf_writer,
    tensor_mapping}.py, src/models/gemma2.cpp, src/models/gemma3.cpp, src/llama-model.cpp,
    src/llama-hparams.{h,cpp}, src/llama-context.cpp, src/llama-graph.cpp:
    - tensors (gguf-py MODEL_ARCH.GEMMA2 / GEMMA3 and tensor_mapping): token_embd,
      blk.N.attn_norm (input_layernorm), attn_q, attn_k, attn_v, attn_output,
      post_attention_norm (post_attention_layernorm), ffn_norm (pre_feedforward_layernorm,
      MODEL_TENSOR.FFN_PRE_NORM), ffn_gate, ffn_up, ffn_down, post_ffw_norm
      (post_feedforward_layernorm), gemma3 also attn_q_norm / attn_k_norm (self_attn.q_norm /
      k_norm), output_norm (model.norm). Gemma2Model.filter_tensors drops lm_head.weight; both
      loaders use token_embd as the output matrix when output.weight is absent. Gemma2Model /
      Gemma3Model.modify_tensors (norm_shift): every name ending in "norm.weight" gets + 1
      (this includes gemma3's q_norm / k_norm). No Q/K row permutation (llama_model_rope_type
      is NEOX for gemma2 / gemma3: rotate-half pairs (x[i], x[i + n/2])).
    - gemma2 metadata, Gemma2Model.set_gguf_parameters in its order (it does NOT call
      TextModel.set_gguf_parameters): context_length, embedding_length, block_count,
      feed_forward_length, attention.head_count, attention.head_count_kv,
      attention.layer_norm_rms_epsilon, attention.key_length, attention.value_length,
      general.file_type, attn_logit_softcapping (f32), final_logit_softcapping (f32),
      attention.sliding_window (u32). NO rope.freq_base: llama.cpp then uses its default
      rope_freq_base_train = 10000 (llama-model.cpp), which is this config's rope_theta; a
      Gemma 2 config with another rope_theta would convert to a GGUF that llama.cpp runs with
      10000 (a converter / transformers disagreement that this model cannot show). No
      rope.dimension_count: n_rot = key_length.
    - gemma3 metadata: Gemma3Model.set_gguf_parameters first calls
      TextModel.set_gguf_parameters, which writes block_count, context_length,
      embedding_length, feed_forward_length, head_count, head_count_kv, rope.scaling.type
      "linear" and rope.scaling.factor (f32) (rope_type linear with a factor, read from
      rope_parameters.get("full_attention", rope_parameters)), rope.freq_base = rope_theta,
      rope.freq_base_swa = rope_local_base_freq (TextModel.__init__ puts
      rope_local_base_freq into rope_parameters["sliding_attention"]["rope_theta"], and
      set_gguf_parameters writes it with add_rope_freq_base_swa; the transformers >= 5
      rope_parameters form gives the same), layer_norm_rms_epsilon, key_length, value_length
      (head_dim), general.file_type; then Gemma3Model rewrites context_length, head_count,
      layer_norm_rms_epsilon, key_length, value_length, rope.freq_base and head_count_kv with
      the same values (GGUFWriter.add_key_value overwrites in place: the order stays the first
      one), writes no final_logit_softcapping (null) and adds attention.sliding_window (u32,
      sliding_window_pattern != 1). No sliding_window_pattern key in either file.
    - llama.cpp's reading: gemma2 (llama_model_gemma2::load_arch_hparams): swa_type STANDARD,
      n_swa = sliding_window (default 4096), n_pattern = sliding_window_pattern key or 2,
      attn_soft_cap always on with attn_logit_softcapping (default 50), final soft-cap always
      applied with final_logit_softcapping (default 30), rope_freq_base_train_swa = freq_base_swa
      key or rope_freq_base_train, rope_freq_scale_train_swa = rope_freq_scale_train. gemma3
      (llama_model_gemma3): SWA only when attention.sliding_window is present and > 0, then
      n_pattern = key or 6 and rope_freq_base_train_swa = rope.freq_base_swa key or its default
      10000 (llama-hparams.h), rope_freq_scale_train_swa stays 1; final soft-cap only when the
      key is non-zero. hparams::set_swa_pattern: is_swa(il) = il % n_pattern < n_pattern - 1.
      llama_model::get_rope_freq_base / get_rope_freq_scale (il): SWA layers
      rope_freq_{base,scale}_train_swa, the others cparams.rope_freq_{base,scale} =
      rope_freq_base_train and rope_freq_scale_train = 1 / rope.scaling.factor (llama-model.cpp;
      llama-context.cpp keeps it for scaling type linear and sets ext_factor 0 for any type but
      yarn, so ggml_rope_ext rotates by pos * freq_scale * base^(-2i / n_rot), attn_factor 1).
      Attention: Q scaled by f_attention_scale = 1/sqrt(n_embd / n_head) for the 27B layer
      counts (46 for gemma2, 62 for gemma3), else 1/sqrt(key_length): llama.cpp does NOT read
      query_pre_attn_scalar (the released models' value equals that rule), so this script sets
      query_pre_attn_scalar = head_dim; then build_attn with kq_scale 1, the soft-cap
      (ggml_scale 1/cap, tanh, scale cap) on the scaled scores, the SWA / causal mask,
      softmax. The input embedding is scaled by sqrtf(n_embd); FFN LLM_FFN_GELU + LLM_FFN_PAR:
      ffn_down(gelu(ffn_gate x) * ffn_up x), ggml_gelu being the tanh form (the CPU backend
      evaluates it through an f16 look-up table, GGML_GELU_FP16: llama.cpp's logits differ from
      these by ~1e-4 .. 1e-3).
  * File formats: see tiny_models.py (GGUF v3 per ggml docs/gguf.md; safetensors).
"""

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models as tm  # noqa: E402  (generic helpers only: files, plain RMSNorm, ggml RoPE)

MIN_ARGMAX_MARGIN = tm.MIN_ARGMAX_MARGIN   # 2e-3
MAX_SEED = tm.MAX_SEED
MIN_EFFECT = 1e-2                          # a feature "matters" when it moves logits by more

NORM_STD = 0.1       # input / post-attention / pre- / post-feedforward / final norms: 1 + w
QK_NORM_STD = 0.15   # gemma3 q_norm / k_norm: 1 + w ~ 1 +- 0.3

# --------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------

GEMMA2_LAYERS = 4
GEMMA2_CONFIG = {
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": GEMMA2_LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 24,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_act": "gelu_pytorch_tanh",
    "max_position_embeddings": 512,
    "initializer_range": 0.02,
    "rms_norm_eps": 1e-6,
    "use_cache": True,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "query_pre_attn_scalar": 24,
    "sliding_window": 40,
    "layer_types": ["sliding_attention" if (i + 1) % 2 else "full_attention"
                    for i in range(GEMMA2_LAYERS)],
    "attn_logit_softcapping": 3.0,
    "final_logit_softcapping": 5.0,
    "cache_implementation": "hybrid",
    "torch_dtype": "float32",
}

GEMMA3_LAYERS = 6
GEMMA3_PATTERN = 6
GEMMA3_CONFIG = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": GEMMA3_LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 24,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 512,
    "initializer_range": 0.02,
    "rms_norm_eps": 1e-6,
    "use_cache": True,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": True,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "attention_bias": False,
    "attention_dropout": 0.0,
    "query_pre_attn_scalar": 24,
    "sliding_window": 16,
    "sliding_window_pattern": GEMMA3_PATTERN,
    "layer_types": ["sliding_attention" if (i + 1) % GEMMA3_PATTERN else "full_attention"
                    for i in range(GEMMA3_LAYERS)],
    "final_logit_softcapping": None,
    "attn_logit_softcapping": None,
    "cache_implementation": "hybrid",
    "use_bidirectional_attention": False,
    "torch_dtype": "float32",
}

# name -> (output folder, HF config, GGUF general.architecture)
MODELS = {
    "gemma2": ("gemma2-tiny", GEMMA2_CONFIG, "gemma2"),
    "gemma3": ("gemma3-tiny", GEMMA3_CONFIG, "gemma3"),
}


def default_inv_freq(theta, dim):
    """transformers _compute_default_rope_parameters: 1 / theta^(arange(0, dim, 2) / dim)."""
    return 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))


def hparams(cfg):
    """What transformers makes of a Gemma 2 / Gemma 3 text config: per-layer window and RoPE."""
    mt = cfg["model_type"]
    assert mt in ("gemma2", "gemma3_text"), mt
    assert cfg["hidden_activation"] == "gelu_pytorch_tanh"
    assert cfg["tie_word_embeddings"] and not cfg["attention_bias"]
    n, hd = cfg["num_hidden_layers"], cfg["head_dim"]
    if mt == "gemma2":
        pattern = 2
        derived = ["sliding_attention" if bool((i + 1) % 2) else "full_attention" for i in range(n)]
    else:
        pattern = cfg.get("sliding_window_pattern", 6)
        derived = ["sliding_attention" if bool((i + 1) % pattern) else "full_attention"
                   for i in range(n)]
    types = cfg.get("layer_types") or derived
    assert types == derived, (types, derived)   # the written list is the derived one
    layers = []
    for t in types:
        sliding = t == "sliding_attention"
        if mt == "gemma2":
            # Gemma2RotaryEmbedding: one default RoPE for every layer.
            assert cfg.get("rope_scaling") is None
            theta, factor = cfg["rope_theta"], 1.0
        elif sliding:
            # rotary_emb_local: rope_theta = rope_local_base_freq, rope_scaling default.
            theta, factor = cfg["rope_local_base_freq"], 1.0
        else:
            rs = cfg.get("rope_scaling")
            theta = cfg["rope_theta"]
            if rs is None:
                factor = 1.0
            else:
                assert rs.get("rope_type", rs.get("type")) == "linear", rs
                factor = float(rs["factor"])
        layers.append({"window": cfg["sliding_window"] if sliding else None,
                       "theta": theta, "factor": factor,
                       "inv_freq": default_inv_freq(theta, hd) / factor})
    return {
        "model_type": mt, "d": cfg["hidden_size"], "n_layers": n,
        "nh": cfg["num_attention_heads"], "nkv": cfg["num_key_value_heads"], "hd": hd,
        "ffn": cfg["intermediate_size"], "vocab": cfg["vocab_size"], "eps": cfg["rms_norm_eps"],
        "scaling": float(cfg["query_pre_attn_scalar"]) ** -0.5,
        "attn_cap": cfg.get("attn_logit_softcapping"),
        "final_cap": cfg.get("final_logit_softcapping"),
        "qk_norm": mt == "gemma3_text",
        "embed_scale": cfg["hidden_size"] ** 0.5,
        "norm_offset": 1.0,    # Gemma RMSNorm multiplies by (1 + w)
        "gelu": "tanh",
        "layers": layers, "layer_types": types, "pattern": pattern,
    }


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

NORM_NAMES = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
              "post_feedforward_layernorm")


def make_weights(cfg, seed):
    """HF-named float32 weights, drawn in a fixed order from default_rng(seed)."""
    h = hparams(cfg)
    rng = np.random.default_rng(seed)
    d, hd, nh, nkv, ffn, v = h["d"], h["hd"], h["nh"], h["nkv"], h["ffn"], h["vocab"]

    def mat(rows, cols, std=None):
        s = 1.0 / np.sqrt(cols) if std is None else std
        return (rng.standard_normal((rows, cols)) * s).astype(np.float32)

    def norm(n, std):
        # HF stores w, the model multiplies by 1 + w, the GGUF stores 1 + w. Draw g = 1 + w in
        # float32 first and store w = g - 1, exact for g in [0.5, 2] (Sterbenz), so that the
        # converter's float32 w + 1 is exactly g again.
        g = (1.0 + std * rng.standard_normal(n)).astype(np.float32)
        assert ((g >= 0.5) & (g <= 2.0)).all()
        w = (g - np.float32(1.0)).astype(np.float32)
        assert np.array_equal(w + np.float32(1.0), g)
        return w

    w = {}
    w["model.embed_tokens.weight"] = mat(v, d, std=1.0 / np.sqrt(d))
    for i in range(h["n_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(d, NORM_STD)
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, d)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, d)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, d)
        w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
        if h["qk_norm"]:
            w[p + "self_attn.q_norm.weight"] = norm(hd, QK_NORM_STD)
            w[p + "self_attn.k_norm.weight"] = norm(hd, QK_NORM_STD)
        w[p + "post_attention_layernorm.weight"] = norm(d, NORM_STD)
        w[p + "pre_feedforward_layernorm.weight"] = norm(d, NORM_STD)
        w[p + "mlp.gate_proj.weight"] = mat(ffn, d)
        w[p + "mlp.up_proj.weight"] = mat(ffn, d)
        w[p + "mlp.down_proj.weight"] = mat(d, ffn)
        w[p + "post_feedforward_layernorm.weight"] = norm(d, NORM_STD)
    w["model.norm.weight"] = norm(d, NORM_STD)
    return w


# --------------------------------------------------------------------------
# Hugging Face forward pass (float64)
# --------------------------------------------------------------------------

def gemma_rms_norm(x, w, eps, offset=1.0):
    """Gemma2RMSNorm / Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w)."""
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (offset + w.astype(np.float64))


def gelu_tanh(x):
    """gelu_pytorch_tanh (PytorchGELUTanh): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    """Exact GELU (hidden_activation "gelu"), for the mistake table only."""
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_ggml_f16(x):
    """ggml-cpu's ggml_vec_geglu_f32 / ggml_vec_gelu_f32 with GGML_GELU_FP16 (the default):
    0 for x <= -10, x for x >= 10, else ggml_table_gelu_f16[fp16(x)] = fp16(gelu_tanh(fp16(x))).
    Only for --compare-llamacpp (explains most of llama.cpp's distance from the reference)."""
    x16 = x.astype(np.float32).astype(np.float16).astype(np.float64)
    y = gelu_tanh(x16).astype(np.float32).astype(np.float16).astype(np.float64)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y))


def rope_rotate_half(x, inv_freq):
    """x: [T, H, hd], positions 0..T-1; cos = cos(cat(freqs, freqs)), x cos + rotate_half(x) sin."""
    T, hd = x.shape[0], x.shape[-1]
    freqs = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]   # [T, hd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + np.concatenate([-x2, x1], axis=-1) * sin


def attention_hf(x, W, p, h, layer):
    """Gemma2Attention / Gemma3Attention on x [T, d] (already input_layernorm'ed)."""
    T = x.shape[0]
    nh, nkv, hd = h["nh"], h["nkv"], h["hd"]
    f = lambda n: W[p + n].astype(np.float64)
    q = (x @ f("self_attn.q_proj.weight").T).reshape(T, nh, hd)
    k = (x @ f("self_attn.k_proj.weight").T).reshape(T, nkv, hd)
    v = (x @ f("self_attn.v_proj.weight").T).reshape(T, nkv, hd)
    if h["qk_norm"]:
        q = gemma_rms_norm(q, W[p + "self_attn.q_norm.weight"], h["eps"])
        k = gemma_rms_norm(k, W[p + "self_attn.k_norm.weight"], h["eps"])
    q = rope_rotate_half(q, layer["inv_freq"])
    k = rope_rotate_half(k, layer["inv_freq"])
    rep = nh // nkv
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)   # repeat_kv
    s = np.einsum("thd,shd->hts", q, k) * h["scaling"]           # [H, T, T]
    if h["attn_cap"]:
        s = h["attn_cap"] * np.tanh(s / h["attn_cap"])
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    keep = j <= i
    if layer["window"] is not None:
        keep = keep & (i - j < layer["window"])
    s = np.where(keep[None], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    pr = np.exp(s)
    pr /= pr.sum(axis=-1, keepdims=True)
    o = np.einsum("hts,shd->thd", pr, v).reshape(T, nh * hd)
    return o @ f("self_attn.o_proj.weight").T


def forward(W, cfg, tokens, h=None):
    """float64 logits [T, vocab]; h: hparams(cfg), possibly altered (for the checks)."""
    h = hparams(cfg) if h is None else h
    eps, off = h["eps"], h["norm_offset"]
    act = {"tanh": gelu_tanh, "erf": gelu_erf, "ggml_f16": gelu_ggml_f16}[h["gelu"]]
    nrm = lambda x, n: gemma_rms_norm(x, W[n], eps, off)
    f = lambda n: W[n].astype(np.float64)
    tokens = np.asarray(tokens, dtype=np.int64)
    x = f("model.embed_tokens.weight")[tokens] * h["embed_scale"]
    for i, layer in enumerate(h["layers"]):
        p = f"model.layers.{i}."
        a = attention_hf(nrm(x, p + "input_layernorm.weight"), W, p, h, layer)
        x = x + nrm(a, p + "post_attention_layernorm.weight")
        y = nrm(x, p + "pre_feedforward_layernorm.weight")
        m = (act(y @ f(p + "mlp.gate_proj.weight").T) * (y @ f(p + "mlp.up_proj.weight").T)) \
            @ f(p + "mlp.down_proj.weight").T
        x = x + nrm(m, p + "post_feedforward_layernorm.weight")
    x = nrm(x, "model.norm.weight")
    logits = x @ f("model.embed_tokens.weight").T   # tied lm_head
    if h["final_cap"]:
        logits = h["final_cap"] * np.tanh(logits / h["final_cap"])
    return logits


# --------------------------------------------------------------------------
# GGUF layout (conversion/gemma.py)
# --------------------------------------------------------------------------

# HF name (within model.layers.N.) -> llama.cpp name (within blk.N.)
LAYER_TENSORS = [
    ("input_layernorm", "attn_norm"),
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("self_attn.q_norm", "attn_q_norm"),   # gemma3 only
    ("self_attn.k_norm", "attn_k_norm"),   # gemma3 only
    ("post_attention_layernorm", "post_attention_norm"),
    ("pre_feedforward_layernorm", "ffn_norm"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
    ("post_feedforward_layernorm", "post_ffw_norm"),
]


def gguf_tensor_value(hf_name, t):
    """Gemma2Model / Gemma3Model.modify_tensors: + 1 for every name ending in norm.weight
    (in the tensor's float32)."""
    if hf_name.endswith("norm.weight"):
        return (t + np.float32(1.0)).astype(np.float32)
    return t


def hf_to_gguf_tensors(W, cfg):
    h = hparams(cfg)
    g = {"token_embd.weight": gguf_tensor_value("model.embed_tokens.weight",
                                                W["model.embed_tokens.weight"])}
    for i in range(h["n_layers"]):
        for hn, gn in LAYER_TENSORS:
            name = f"model.layers.{i}.{hn}.weight"
            if name in W:
                g[f"blk.{i}.{gn}.weight"] = gguf_tensor_value(name, W[name])
            else:
                assert gn in ("attn_q_norm", "attn_k_norm") and not h["qk_norm"], name
    g["output_norm.weight"] = gguf_tensor_value("model.norm.weight", W["model.norm.weight"])
    # No output.weight: lm_head is tied (Gemma2Model.filter_tensors drops lm_head.weight;
    # the checkpoints here have none).
    assert len(g) == len(W)
    return g


def gguf_metadata(cfg, arch, name):
    """The keys llama.cpp's converter writes for this config, in its order (see the module
    docstring), after general.architecture / general.name / general.alignment (as this
    repository's other files), then tokenizer.ggml.bos/eos_token_id (the tokenizer.* block of
    stories260K follows, copied raw)."""
    a = arch
    u32 = lambda x: (tm.T_UINT32, int(x))
    f32 = lambda x: (tm.T_FLOAT32, float(x))
    kv = [
        ("general.architecture", (tm.T_STRING, a)),
        ("general.name", (tm.T_STRING, name)),
        ("general.alignment", u32(tm.GGUF_ALIGNMENT)),
    ]
    if arch == "gemma2":
        kv += [
            (f"{a}.context_length", u32(cfg["max_position_embeddings"])),
            (f"{a}.embedding_length", u32(cfg["hidden_size"])),
            (f"{a}.block_count", u32(cfg["num_hidden_layers"])),
            (f"{a}.feed_forward_length", u32(cfg["intermediate_size"])),
            (f"{a}.attention.head_count", u32(cfg["num_attention_heads"])),
            (f"{a}.attention.head_count_kv", u32(cfg["num_key_value_heads"])),
            (f"{a}.attention.layer_norm_rms_epsilon", f32(cfg["rms_norm_eps"])),
            (f"{a}.attention.key_length", u32(cfg["head_dim"])),
            (f"{a}.attention.value_length", u32(cfg["head_dim"])),
            ("general.file_type", u32(0)),   # LLAMA_FTYPE_ALL_F32
            (f"{a}.attn_logit_softcapping", f32(cfg["attn_logit_softcapping"])),
            (f"{a}.final_logit_softcapping", f32(cfg["final_logit_softcapping"])),
            (f"{a}.attention.sliding_window", u32(cfg["sliding_window"])),
        ]
    else:
        assert arch == "gemma3"
        rs = cfg["rope_scaling"]
        assert rs["rope_type"] == "linear" and cfg.get("attn_logit_softcapping") is None
        kv += [
            (f"{a}.block_count", u32(cfg["num_hidden_layers"])),
            (f"{a}.context_length", u32(cfg["max_position_embeddings"])),
            (f"{a}.embedding_length", u32(cfg["hidden_size"])),
            (f"{a}.feed_forward_length", u32(cfg["intermediate_size"])),
            (f"{a}.attention.head_count", u32(cfg["num_attention_heads"])),
            (f"{a}.attention.head_count_kv", u32(cfg["num_key_value_heads"])),
            (f"{a}.rope.scaling.type", (tm.T_STRING, "linear")),
            (f"{a}.rope.scaling.factor", f32(rs["factor"])),
            (f"{a}.rope.freq_base", f32(cfg["rope_theta"])),
            (f"{a}.rope.freq_base_swa", f32(cfg["rope_local_base_freq"])),
            (f"{a}.attention.layer_norm_rms_epsilon", f32(cfg["rms_norm_eps"])),
            (f"{a}.attention.key_length", u32(cfg["head_dim"])),
            (f"{a}.attention.value_length", u32(cfg["head_dim"])),
            ("general.file_type", u32(0)),   # LLAMA_FTYPE_ALL_F32
        ]
        if cfg.get("final_logit_softcapping"):
            kv += [(f"{a}.final_logit_softcapping", f32(cfg["final_logit_softcapping"]))]
        if cfg.get("sliding_window_pattern") != 1:
            kv += [(f"{a}.attention.sliding_window", u32(cfg["sliding_window"]))]
    kv += [
        ("tokenizer.ggml.bos_token_id", u32(cfg["bos_token_id"])),
        ("tokenizer.ggml.eos_token_id", u32(cfg["eos_token_id"])),
    ]
    return kv


# --------------------------------------------------------------------------
# GGUF forward pass (float64): llama.cpp's reading of the file
# --------------------------------------------------------------------------

LLAMACPP_27B_LAYERS = {"gemma2": 46, "gemma3": 62}   # LLM_TYPE_27B: the other attention scale
LLAMACPP_SWA_PERIOD = {"gemma2": 2, "gemma3": 6}     # default sliding_window_pattern


def llamacpp_hparams(meta):
    """Per-layer SWA / RoPE / scale as llama.cpp derives them from the GGUF metadata alone."""
    a = meta["general.architecture"]
    assert a in ("gemma2", "gemma3"), a
    m = lambda key, default=None: meta.get(f"{a}.{key}", default)
    n_layer, n_embd, n_head = m("block_count"), m("embedding_length"), m("attention.head_count")
    hd = m("attention.key_length", n_embd // n_head)
    assert m("attention.value_length", hd) == hd
    n_rot = m("rope.dimension_count", hd)
    # llama_model::load_hparams (generic)
    base_train = m("rope.freq_base", 10000.0)
    scaling_type = m("rope.scaling.type", "linear")
    assert scaling_type in ("linear", "none"), scaling_type   # ext_factor 0 (not yarn)
    factor = m("rope.scaling.factor", 0.0)
    scale_train = 1.0 if factor == 0.0 else 1.0 / factor
    if scaling_type == "none":     # llama_context: never scale if scaling type is none
        scale_train = 1.0
    # load_arch_hparams
    if a == "gemma2":
        swa = True
        n_swa = m("attention.sliding_window", 4096)
        period = m("attention.sliding_window_pattern", LLAMACPP_SWA_PERIOD[a])
        base_swa = m("rope.freq_base_swa", base_train)
        scale_swa = scale_train
        attn_cap = m("attn_logit_softcapping", 50.0)
        final_cap = m("final_logit_softcapping", 30.0)
    else:
        n_swa = m("attention.sliding_window", 0)
        swa = n_swa > 0
        period = m("attention.sliding_window_pattern", LLAMACPP_SWA_PERIOD[a]) if swa else None
        base_swa = m("rope.freq_base_swa", 10000.0) if swa else None   # llama-hparams.h default
        scale_swa = 1.0
        attn_cap = None
        final_cap = m("final_logit_softcapping", 0.0) or None
    assert isinstance(period, int) or period is None, period   # no per-layer pattern arrays
    if n_layer == LLAMACPP_27B_LAYERS[a]:
        attn_scale = 1.0 / math.sqrt(float(n_embd // n_head))
    else:
        attn_scale = 1.0 / math.sqrt(float(hd))
    layers = []
    for il in range(n_layer):
        is_swa = swa and (il % period < period - 1)   # llama_hparams::set_swa_pattern
        layers.append({"swa": is_swa, "n_swa": n_swa if is_swa else None,
                       "base": base_swa if is_swa else base_train,
                       "scale": scale_swa if is_swa else scale_train})
    return {"arch": a, "n_layer": n_layer, "n_embd": n_embd, "n_head": n_head,
            "n_head_kv": m("attention.head_count_kv", n_head), "hd": hd, "n_rot": n_rot,
            "eps": m("attention.layer_norm_rms_epsilon"), "attn_scale": attn_scale,
            "attn_cap": attn_cap, "final_cap": final_cap, "layers": layers}


def forward_gguf(meta, G, tokens):
    """Logits [T, vocab] from GGUF tensors and metadata only, as llama.cpp's gemma2 / gemma3
    graphs compute them (norm weights used as stored: the file holds 1 + w)."""
    L = llamacpp_hparams(meta)
    nh, nkv, hd, eps = L["n_head"], L["n_head_kv"], L["hd"], L["eps"]
    f = lambda n: G[n].astype(np.float64)
    tokens = np.asarray(tokens, dtype=np.int64)
    T = tokens.size
    pos = np.arange(T)
    x = f("token_embd.weight")[tokens] * math.sqrt(L["n_embd"])   # inp_scaled
    for il, ly in enumerate(L["layers"]):
        b = f"blk.{il}."
        cur = tm.rms_norm(x, G[b + "attn_norm.weight"], eps)
        q = (cur @ f(b + "attn_q.weight").T).reshape(T, nh, hd)
        k = (cur @ f(b + "attn_k.weight").T).reshape(T, nkv, hd)
        v = (cur @ f(b + "attn_v.weight").T).reshape(T, nkv, hd)
        if b + "attn_q_norm.weight" in G:
            q = tm.rms_norm(q, G[b + "attn_q_norm.weight"], eps)
            k = tm.rms_norm(k, G[b + "attn_k_norm.weight"], eps)
        # ggml_rope_ext NEOX, ext_factor 0, attn_factor 1: pos * freq_scale * base^(-2i/n_rot)
        rope = {"freq_scale": ly["scale"], "corr_dims": (0.0, 0.0), "ext_factor": 0.0, "mscale": 1.0}
        q = tm.rope_ggml(q, pos, ly["base"], L["n_rot"], True, rope)
        k = tm.rope_ggml(k, pos, ly["base"], L["n_rot"], True, rope)
        q = q * L["attn_scale"]                                    # Qcur = ggml_scale(Qcur, ...)
        grp = nh // nkv
        kq = np.empty((nh, T, T))
        for hh in range(nh):                                       # ggml broadcast: kv head h / grp
            kq[hh] = q[:, hh, :] @ k[:, hh // grp, :].T
        if L["attn_cap"] is not None:                              # hparams.attn_soft_cap
            kq = np.tanh(kq * (1.0 / L["attn_cap"])) * L["attn_cap"]
        p0, p1 = pos[None, :], pos[:, None]                        # key pos, query pos
        masked = p0 > p1
        if ly["swa"]:
            masked = masked | (p1 - p0 >= ly["n_swa"])             # is_masked_swa STANDARD
        kq = np.where(masked[None], -np.inf, kq)
        kq = np.exp(kq - kq.max(axis=-1, keepdims=True))
        kq /= kq.sum(axis=-1, keepdims=True)
        o = np.stack([kq[hh] @ v[:, hh // grp, :] for hh in range(nh)], axis=1).reshape(T, nh * hd)
        cur = o @ f(b + "attn_output.weight").T
        cur = tm.rms_norm(cur, G[b + "post_attention_norm.weight"], eps)
        sa_out = cur + x
        cur = tm.rms_norm(sa_out, G[b + "ffn_norm.weight"], eps)
        gt = cur @ f(b + "ffn_gate.weight").T
        cur = (gelu_tanh(gt) * (cur @ f(b + "ffn_up.weight").T)) @ f(b + "ffn_down.weight").T
        cur = tm.rms_norm(cur, G[b + "post_ffw_norm.weight"], eps)
        x = cur + sa_out
    x = tm.rms_norm(x, G["output_norm.weight"], eps)
    out = f("output.weight" if "output.weight" in G else "token_embd.weight")
    logits = x @ out.T
    if L["final_cap"] is not None:
        logits = np.tanh(logits * (1.0 / L["final_cap"])) * L["final_cap"]
    return logits


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------

def margin_of(lg):
    top2 = np.sort(lg, axis=1)[:, -2:]
    return float(np.min(top2[:, 1] - top2[:, 0]))


def variant(cfg, **changes):
    """hparams(cfg) with some entries replaced; `windows` / `layer` replace per-layer ones."""
    h = hparams(cfg)
    windows = changes.pop("windows", None)
    layer_fn = changes.pop("layer_fn", None)
    h.update(changes)
    h["layers"] = [dict(ly) for ly in h["layers"]]
    if windows is not None:
        for ly, wv in zip(h["layers"], windows):
            ly["window"] = wv
    if layer_fn is not None:
        for i, ly in enumerate(h["layers"]):
            layer_fn(i, ly)
    return h


def diff_stats(lg, ref):
    d = np.abs(lg - ref)
    return float(d.max()), int((lg.argmax(-1) != ref.argmax(-1)).sum())


def sliding_window_checks(W, cfg, logits, seqs):
    """Full causal attention on every layer: identical before the window, different from it on."""
    h = hparams(cfg)
    w = cfg["sliding_window"]
    stats = {}
    full = variant(cfg, windows=[None] * h["n_layers"])
    for name, toks in seqs.items():
        lg = forward(W, cfg, toks, full)
        d = np.abs(lg - logits[name]).max(axis=-1)
        changed = int((lg.argmax(-1) != logits[name].argmax(-1)).sum())
        before, after = float(d[:w].max()), d[w:]
        line = (f"full causal vs window {w} on {name:5s} (T={len(toks)}): positions < {w}: "
                f"max|diff| {before:.1e}")
        if after.size:
            line += (f"; positions >= {w}: max|diff| {after.max():.3f}, smallest per-position "
                     f"max|diff| {after.min():.3f} (at {w + int(after.argmin())}), argmax changed "
                     f"at {changed} positions")
            assert after.min() > MIN_EFFECT, (name, float(after.min()))
        else:
            line += f" (no position >= {w}: the window does not matter here)"
        print(line)
        assert before < 1e-12, (name, before)
        stats[name] = {"max_abs_diff_before_window": before,
                       "max_abs_diff_from_window": float(after.max()) if after.size else None,
                       "min_per_position_max_abs_diff_from_window":
                           float(after.min()) if after.size else None,
                       "argmax_changed_positions": changed}
    assert stats["long"]["max_abs_diff_from_window"] is not None
    return stats


def feature_effect(W, cfg, logits, seqs, what, h):
    """max|diff| per sequence of the variant h against the reference logits (printed)."""
    out, parts = {}, []
    for name, toks in seqs.items():
        dmax, changed = diff_stats(forward(W, cfg, toks, h), logits[name])
        out[name] = {"max_abs_diff": dmax, "argmax_changed_positions": changed}
        parts.append(f"{name} {dmax:.4f} ({changed} argmax)")
    print(f"  {what}: max|diff| " + ", ".join(parts))
    return out


def model_checks(W, cfg, logits, seqs):
    """The model's own features must matter (asserted), and the usual mistakes (printed)."""
    h = hparams(cfg)
    n, w = h["n_layers"], cfg["sliding_window"]
    win = [ly["window"] for ly in h["layers"]]
    eff = {}
    print("features (must change the logits by > 1e-2 on both sequences):")
    if h["model_type"] == "gemma2":
        eff["no_attn_logit_softcapping"] = feature_effect(
            W, cfg, logits, seqs, f"attn_logit_softcapping {h['attn_cap']} removed",
            variant(cfg, attn_cap=None))
        eff["no_final_logit_softcapping"] = feature_effect(
            W, cfg, logits, seqs, f"final_logit_softcapping {h['final_cap']} removed",
            variant(cfg, final_cap=None))
        eff["no_softcapping"] = feature_effect(
            W, cfg, logits, seqs, "both soft-caps removed", variant(cfg, attn_cap=None, final_cap=None))
        asserted = ("no_attn_logit_softcapping", "no_final_logit_softcapping")
    else:
        def no_scaling(i, ly):
            ly["inv_freq"] = default_inv_freq(ly["theta"], h["hd"])

        def scaling_everywhere(i, ly):
            ly["inv_freq"] = default_inv_freq(ly["theta"], h["hd"]) / cfg["rope_scaling"]["factor"]

        def global_theta_everywhere(i, ly):
            f = ly["factor"]
            ly["inv_freq"] = default_inv_freq(cfg["rope_theta"], h["hd"]) / f

        eff["no_rope_scaling"] = feature_effect(
            W, cfg, logits, seqs, "linear RoPE scaling (factor 8) removed from the global layer",
            variant(cfg, layer_fn=no_scaling))
        eff["rope_scaling_on_every_layer"] = feature_effect(
            W, cfg, logits, seqs, "linear RoPE scaling applied to the sliding layers too",
            variant(cfg, layer_fn=scaling_everywhere))
        eff["rope_theta_on_sliding_layers"] = feature_effect(
            W, cfg, logits, seqs, "rope_local_base_freq ignored (rope_theta 1e6 on every layer)",
            variant(cfg, layer_fn=global_theta_everywhere))
        asserted = ("no_rope_scaling", "rope_scaling_on_every_layer", "rope_theta_on_sliding_layers")
    for key in asserted:
        for name in seqs:
            assert eff[key][name]["max_abs_diff"] > MIN_EFFECT, (key, name, eff[key][name])

    print("usual mistakes (printed only):")
    sw = lambda ww: [ww if x is not None else None for x in win]
    feature_effect(W, cfg, logits, seqs, f"window {w + 1} (i - j <= {w})", variant(cfg, windows=sw(w + 1)))
    feature_effect(W, cfg, logits, seqs, f"window {w - 1} (own position not counted)",
                   variant(cfg, windows=sw(w - 1)))
    feature_effect(W, cfg, logits, seqs, "every layer slides", variant(cfg, windows=[w] * n))
    feature_effect(W, cfg, logits, seqs, "sliding pattern inverted",
                   variant(cfg, windows=[None if x is not None else w for x in win]))
    if h["model_type"] == "gemma3_text":
        # (i % pattern != 0): the layer 0 global, 1-5 sliding (llama.cpp's dense_first reading)
        feature_effect(W, cfg, logits, seqs, "dense-first pattern (layer 0 global, 1-5 slide)",
                       variant(cfg, windows=[None if i % h["pattern"] == 0 else w for i in range(n)]))
    feature_effect(W, cfg, logits, seqs, "norms multiply by w, not 1 + w", variant(cfg, norm_offset=0.0))
    feature_effect(W, cfg, logits, seqs, "embeddings not scaled by sqrt(hidden)", variant(cfg, embed_scale=1.0))
    feature_effect(W, cfg, logits, seqs, "exact (erf) GELU instead of the tanh form", variant(cfg, gelu="erf"))
    feature_effect(W, cfg, logits, seqs, "scaling 1/sqrt(hidden / heads) = 1/4 (llama.cpp's 27B rule)",
                   variant(cfg, scaling=1.0 / math.sqrt(h["d"] // h["nh"])))
    if h["qk_norm"]:
        feature_effect(W, cfg, logits, seqs, "no q/k norm", variant(cfg, qk_norm=False))
    return eff


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def shape_json(model, cfg, arch, seed, margins, window_stats, effects, score_stats):
    h = hparams(cfg)
    s = {"name": MODELS[model][0], "arch": arch, "hf_model_type": cfg["model_type"],
         "seed": seed, "vocab": h["vocab"], "dim": h["d"], "n_layers": h["n_layers"],
         "n_heads": h["nh"], "n_kv_heads": h["nkv"], "head_dim": h["hd"], "ffn": h["ffn"],
         "hidden_activation": cfg["hidden_activation"], "ctx": cfg["max_position_embeddings"],
         "eps": h["eps"], "qk_norm": h["qk_norm"],
         "query_pre_attn_scalar": cfg["query_pre_attn_scalar"], "attn_scaling": h["scaling"],
         "embed_scale": h["embed_scale"],
         "attn_logit_softcapping": h["attn_cap"], "final_logit_softcapping": h["final_cap"],
         "sliding_window": cfg["sliding_window"], "layer_types": h["layer_types"],
         "rope_per_layer": [{"theta": ly["theta"], "linear_factor": ly["factor"]} for ly in h["layers"]],
         "tie_word_embeddings": True,
         "gguf_norm_weights": "HF w + 1 (exact in float32 by construction)",
         "weight_scales": {"embed_std": 1.0 / math.sqrt(h["d"]), "matrix_std": "1/sqrt(fan_in)",
                           "norm_1_plus_w_std": NORM_STD,
                           "qk_norm_1_plus_w_std": QK_NORM_STD if h["qk_norm"] else None},
         "window_vs_full_causal": window_stats,
         "feature_effects": effects,
         "attention_score_abs_max": score_stats,
         "min_argmax_margin": margins}
    return s


def score_range(W, cfg, toks):
    """max |q.k * scaling| before capping, per layer (to show how much the attention cap bites)."""
    h = hparams(cfg)
    out = []
    x = W["model.embed_tokens.weight"].astype(np.float64)[np.asarray(toks)] * h["embed_scale"]
    eps = h["eps"]
    for i, layer in enumerate(h["layers"]):
        p = f"model.layers.{i}."
        y = gemma_rms_norm(x, W[p + "input_layernorm.weight"], eps)
        T = y.shape[0]
        q = (y @ W[p + "self_attn.q_proj.weight"].astype(np.float64).T).reshape(T, h["nh"], h["hd"])
        k = (y @ W[p + "self_attn.k_proj.weight"].astype(np.float64).T).reshape(T, h["nkv"], h["hd"])
        if h["qk_norm"]:
            q = gemma_rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = gemma_rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope_rotate_half(q, layer["inv_freq"]), rope_rotate_half(k, layer["inv_freq"])
        k = np.repeat(k, h["nh"] // h["nkv"], axis=1)
        s = np.einsum("thd,shd->hts", q, k) * h["scaling"]
        causal = np.tril(np.ones((T, T), dtype=bool))
        out.append(float(np.abs(s[:, causal]).max()))
        a = attention_hf(y, W, p, h, layer)
        x = x + gemma_rms_norm(a, W[p + "post_attention_layernorm.weight"], eps)
        z = gemma_rms_norm(x, W[p + "pre_feedforward_layernorm.weight"], eps)
        m = (gelu_tanh(z @ W[p + "mlp.gate_proj.weight"].astype(np.float64).T)
             * (z @ W[p + "mlp.up_proj.weight"].astype(np.float64).T)) @ W[p + "mlp.down_proj.weight"].astype(np.float64).T
        x = x + gemma_rms_norm(m, W[p + "post_feedforward_layernorm.weight"], eps)
    return out


def generate(model, seqs):
    out_name, cfg, arch = MODELS[model]
    out_dir = tm.DATA_DIR / out_name
    h = hparams(cfg)
    print(f"== {out_name} ({cfg['architectures'][0]}, GGUF {arch})")
    print("layers: " + ", ".join(
        f"{i}: {'window ' + str(ly['window']) if ly['window'] else 'global'} theta {ly['theta']:g}"
        + (f" linear x{ly['factor']:g}" if ly["factor"] != 1.0 else "")
        for i, ly in enumerate(h["layers"])))
    for seed in range(1, MAX_SEED + 1):
        W = make_weights(cfg, seed)
        logits = {name: forward(W, cfg, toks) for name, toks in seqs.items()}
        margin = min(margin_of(lg) for lg in logits.values())
        if margin >= MIN_ARGMAX_MARGIN:
            break
        print(f"seed {seed}: rejected (argmax margin {margin:.2e} < {MIN_ARGMAX_MARGIN:g})")
    else:
        sys.exit(f"{out_name}: no acceptable seed found")
    margins = {name: margin_of(lg) for name, lg in logits.items()}
    print(f"seed {seed}: accepted; min argmax margin (top-1 minus top-2 logit) {margin:.4e}")
    for name, lg in logits.items():
        print(f"logits {name:5s}: T={lg.shape[0]} range {lg.min():.4f} .. {lg.max():.4f}, "
              f"min argmax margin {margins[name]:.4e}")
    scores = {name: score_range(W, cfg, toks) for name, toks in seqs.items()}
    for name, s in scores.items():
        print(f"max |q.k * scaling| per layer on {name:5s} (before any capping): "
              + ", ".join(f"{v:.2f}" for v in s))

    window_stats = sliding_window_checks(W, cfg, logits, seqs)
    effects = model_checks(W, cfg, logits, seqs)

    (out_dir / "hf").mkdir(parents=True, exist_ok=True)
    (out_dir / "hf" / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tm.write_safetensors(out_dir / "hf" / "model.safetensors", W)
    G = hf_to_gguf_tensors(W, cfg)
    kvs = gguf_metadata(cfg, arch, out_name)
    tok = tm.tokenizer_kvs_raw(tm.TOKENIZER_GGUF, {k for k, _ in kvs})
    tm.write_gguf(out_dir / "model.gguf", kvs, G, tok)
    for name, lg in logits.items():
        np.save(out_dir / f"numpy_logits_{name}.npy", lg.astype(np.float32))
    shape = shape_json(model, cfg, arch, seed, margins, window_stats, effects, scores)
    (out_dir / "shape.json").write_text(json.dumps(shape, indent=1) + "\n")

    # Self-checks: read everything back.
    assert json.loads((out_dir / "hf" / "config.json").read_text()) == cfg
    RS = tm.read_safetensors(out_dir / "hf" / "model.safetensors")
    assert set(RS) == set(W) and "lm_head.weight" not in RS
    for n_, t in W.items():
        assert RS[n_].shape == t.shape and np.array_equal(RS[n_], t), n_
    for name, lg in logits.items():
        assert np.array_equal(np.load(out_dir / f"numpy_logits_{name}.npy"), lg.astype(np.float32))
    meta, RG = tm.read_gguf(out_dir / "model.gguf")
    assert list(RG) == list(G), sorted(set(RG) ^ set(G))
    assert "output.weight" not in RG
    for n_, t in G.items():
        assert RG[n_].dtype == np.float32 and RG[n_].shape == t.shape and np.array_equal(RG[n_], t), n_
    # GGUF norm weights are exactly HF + 1 (and minus 1 gives HF back); the rest as in HF.
    n_norm = 0
    for i in range(h["n_layers"]):
        for hn, gn in LAYER_TENSORS:
            hname, gname = f"model.layers.{i}.{hn}.weight", f"blk.{i}.{gn}.weight"
            if hname not in W:
                assert gname not in RG
                continue
            if hn.endswith("norm"):
                assert np.array_equal(RG[gname], W[hname] + np.float32(1.0)), gname
                assert np.array_equal(RG[gname] - np.float32(1.0), W[hname]), gname
                n_norm += 1
            else:
                assert np.array_equal(RG[gname], W[hname]), gname
    assert np.array_equal(RG["output_norm.weight"] - np.float32(1.0), W["model.norm.weight"])
    assert np.array_equal(RG["token_embd.weight"], W["model.embed_tokens.weight"])
    for key, (typ, val) in kvs:
        assert meta["__types__"][key] == typ, key
        if typ == tm.T_FLOAT32:
            assert meta[key] == float(np.float32(val)), key
        else:
            assert meta[key] == val, key
    assert len(meta["tokenizer.ggml.tokens"]) == h["vocab"], len(meta["tokenizer.ggml.tokens"])
    # llama.cpp's reading of the metadata is this model's: same windows and RoPE per layer.
    L = llamacpp_hparams(meta)
    for il, (ly, hl) in enumerate(zip(L["layers"], h["layers"])):
        assert ly["n_swa"] == hl["window"], il
        assert ly["base"] == hl["theta"] and ly["scale"] == 1.0 / hl["factor"], (il, ly, hl)
    assert abs(L["attn_scale"] - h["scaling"]) < 1e-15
    assert L["attn_cap"] == h["attn_cap"] and L["final_cap"] == h["final_cap"]
    print("llama.cpp's reading of the metadata: " + ", ".join(
        f"{il}: {'swa ' + str(ly['n_swa']) if ly['swa'] else 'global'} base {ly['base']:g} scale {ly['scale']:g}"
        for il, ly in enumerate(L["layers"])) + f"; Q scale {L['attn_scale']:.6f}, attn cap "
        f"{L['attn_cap']}, final cap {L['final_cap']}")
    # An independent forward over the GGUF alone (llama.cpp's reading) gives the same logits.
    for name, toks in seqs.items():
        lg = forward_gguf(meta, RG, toks)
        diff = float(np.abs(lg - logits[name]).max())
        assert diff < 1e-9 and (lg.argmax(-1) == logits[name].argmax(-1)).all(), (name, diff)
        print(f"GGUF forward (llama.cpp's reading, NEOX RoPE, stored norms) on {name:5s}: "
              f"max|diff| vs HF forward {diff:.2e}")
    print(f"self-check passed: {len(G)} GGUF tensors ({n_norm + 1} norms = HF + 1), "
          f"{len(W)} safetensors tensors, {len(kvs)} metadata keys (+ {len(tok)} copied tokenizer.* keys) read back equal")
    for p in sorted(out_dir.rglob("*")):
        if p.is_file():
            print(f"  {p.relative_to(tm.REPO_ROOT)}: {p.stat().st_size} bytes")


def no_mlp_weights(W):
    """The same weights with every mlp.down_proj zeroed: the MLP adds nothing (the post-feedforward
    norm of 0 is 0), so no GELU is evaluated; a diagnostic for llama.cpp's f16 GELU table."""
    return {n: (np.zeros_like(t) if n.endswith("mlp.down_proj.weight") else t) for n, t in W.items()}


def write_no_mlp_copy(model, root):
    """root/<model dir>/model.gguf: model.gguf with ffn_down zeroed, nothing else changed."""
    out_name, cfg, arch = MODELS[model]
    W = no_mlp_weights(tm.read_safetensors(tm.DATA_DIR / out_name / "hf" / "model.safetensors"))
    d = root / out_name
    d.mkdir(parents=True, exist_ok=True)
    kvs = gguf_metadata(cfg, arch, out_name)
    tok = tm.tokenizer_kvs_raw(tm.TOKENIZER_GGUF, {k for k, _ in kvs})
    tm.write_gguf(d / "model.gguf", kvs, hf_to_gguf_tensors(W, cfg), tok)
    print(f"wrote {d / 'model.gguf'} (ffn_down zeroed)")


def compare_llamacpp(model, seqs, no_mlp_dir=None):
    """Reads the committed files only (writes nothing): llama.cpp's logits against the NumPy
    reference, against the same forward with ggml's f16-table GELU, and with the erf GELU; with
    no_mlp_dir, also llama.cpp's logits of the no-MLP copy against its NumPy forward."""
    out_name, cfg, _ = MODELS[model]
    d = tm.DATA_DIR / out_name
    W = tm.read_safetensors(d / "hf" / "model.safetensors")
    for name, toks in seqs.items():
        path = d / f"llamacpp_logits_{name}.npy"
        if not path.exists():
            print(f"{out_name} {name}: {path.name} not found (scripts/references/llamacpp_reference.sh makes it)")
            continue
        ref = np.load(path)
        num = np.load(d / f"numpy_logits_{name}.npy")
        dd = np.abs(num - ref)
        print(f"{out_name} {name:5s}: llama.cpp vs NumPy max|diff| {dd.max():.3e} (mean {dd.mean():.2e}, "
              f"worst position {int(dd.max(axis=1).argmax())}), argmax identical at "
              f"{int((num.argmax(-1) == ref.argmax(-1)).sum())}/{len(toks)} positions")
        for what, g in (("ggml's f16-table GELU", "ggml_f16"), ("erf GELU", "erf")):
            lg = forward(W, cfg, toks, variant(cfg, gelu=g)).astype(np.float32)
            print(f"    NumPy forward with {what} vs llama.cpp: max|diff| {np.abs(lg - ref).max():.3e}")
        if no_mlp_dir is not None:
            path = no_mlp_dir / out_name / f"llamacpp_logits_{name}.npy"
            if not path.exists():
                print(f"    {path} not found")
                continue
            ref = np.load(path)
            lg = forward(no_mlp_weights(W), cfg, toks).astype(np.float32)
            print(f"    no-MLP copy: llama.cpp vs NumPy max|diff| {np.abs(lg - ref).max():.3e}, argmax "
                  f"identical at {int((lg.argmax(-1) == ref.argmax(-1)).sum())}/{len(toks)} positions")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=list(MODELS) + ["all"], default="all",
                    help="which model to generate (default: all)")
    ap.add_argument("--compare-llamacpp", action="store_true",
                    help="write nothing; compare the committed llamacpp_logits_*.npy with the references")
    ap.add_argument("--no-mlp-logits", metavar="DIR", type=Path,
                    help="with --compare-llamacpp: llama.cpp's logits of the no-MLP copies, DIR/<model dir>/")
    ap.add_argument("--no-mlp-copy", metavar="DIR", type=Path,
                    help="write only DIR/<model dir>/model.gguf, model.gguf with ffn_down zeroed")
    args = ap.parse_args()
    all_seqs = json.loads(tm.SEQUENCES.read_text())
    seqs = {"short": all_seqs["short"], "long": all_seqs["long"]}
    assert len(seqs["short"]) == 24 and len(seqs["long"]) == 160
    for model in (MODELS if args.model == "all" else [args.model]):
        if args.no_mlp_copy is not None:
            write_no_mlp_copy(model, args.no_mlp_copy)
        elif args.compare_llamacpp:
            compare_llamacpp(model, seqs, args.no_mlp_logits)
        else:
            generate(model, seqs)


if __name__ == "__main__":
    main()
