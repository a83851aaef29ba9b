#!/usr/bin/python3
"""Independent float64 NumPy references for a tiny random-weight Phi-3 with LongRoPE scaling.

One model, under tests/models/data/ (found from this script's own path, so it can be run from
anywhere):

  phi3-longrope-tiny  transformers Phi3ForCausalLM (phi3): phi3-tiny's shapes (hidden 64,
                      2 layers, 4 query / 2 KV heads, head_dim 16, partial_rotary_factor 0.75,
                      so RoPE on 12 of the 16 head dims, fused qkv_proj / gate_up_proj) with
                      max_position_embeddings 512, original_max_position_embeddings 64 and
                      rope_scaling {"type": "longrope", "long_factor": [6], "short_factor": [6]}
                      (as Phi-3-mini-128k / Phi-3.5-mini / Phi-4-mini write it; no factor, no
                      attention_factor); GGUF arch `phi3` with rope_factors_long /
                      rope_factors_short and phi3.rope.scaling.attn_factor

What it writes (as scripts/references/tiny_models.py does for phi3-tiny, whose helpers it
imports: weight generation, the Phi-3 Hugging Face forward and the GGUF-only forward, the
safetensors / GGUF writers and readers, the Phi-3 GGUF metadata and the tokenizer copy; only the
LongRoPE parts are here):

  hf/config.json                        Hugging Face config
  hf/model.safetensors                  the weights, float32, Hugging Face names
  model.gguf                            the same weights laid out as llama.cpp's converter
                                        (conversion/phi.py Phi3MiniModel) writes a LongRoPE
                                        Phi-3: phi3-tiny's tensors and keys plus the tensors
                                        rope_factors_long.weight / rope_factors_short.weight
                                        (F32 [6], first, as generate_extra_tensors yields them
                                        before the model's tensors) and the f32 key
                                        phi3.rope.scaling.attn_factor (right after
                                        general.architecture: the converter adds it while
                                        writing the tensors, before the metadata)
  numpy_logits_short.npy                float32 [24, 512]: `short` with the SHORT factors
                                        (transformers: sequence length 24 <= 64)
  numpy_logits_long.npy                 float32 [160, 512]: `long` with the LONG factors
                                        (transformers: 160 > 64)
  numpy_logits_short_longfactors.npy    float32 [24, 512]: `short` with the LONG factors (what
                                        llama.cpp computes whenever its context is > 64, which
                                        it always is here, see below)
  shape.json                            hyperparameters, seed, factors, inv_freq, margins
(README.md is written by hand from this script's output; llamacpp_logits_{short,long}.npy come
from scripts/references/llamacpp_reference.sh, see --compare-llamacpp.)

How to run (system Python with Debian's python3-numpy; nothing else needed):

  /usr/bin/python3 scripts/references/longrope_models.py
  /usr/bin/python3 scripts/references/longrope_models.py --compare-llamacpp
      (writes nothing: compares the llamacpp_logits_*.npy beside the model with the NumPy files)
  /usr/bin/python3 scripts/references/longrope_models.py --short-as-long-copy /tmp/lr
  OUT_DIR=/tmp/lr-out scripts/references/llamacpp_reference.sh /tmp/lr/phi3-longrope-tiny
  /usr/bin/python3 scripts/references/longrope_models.py --compare-llamacpp \\
      --short-as-long-logits /tmp/lr-out
      (a diagnostic, not committed: model.gguf with rope_factors_long.weight replaced by the
       short factors, so that llama.cpp, which always takes the long tensor here, computes the
       short-factor model; its `short` logits are compared with numpy_logits_short.npy)

Weights: tiny_models.make_weights on phi3-tiny's config (the weights depend only on the
shapes, so seed 1 gives phi3-tiny's very weights). Seeds are tried from 1 upwards until the
top-1 logit leads the top-2 by >= 2e-3 at every position of all three logit files. Rerunning
reproduces every file byte for byte.

Semantics (float64 throughout; the logits are cast to float32 at the end):
  * transformers modeling_rope_utils._compute_longrope_parameters (rope_type "longrope"; the
    config's rope_scaling "type" is standardised to rope_type): dim = int(head_dim *
    partial_rotary_factor) = 12; with original_max_position_embeddings in the config, factor =
    max_position_embeddings / original_max_position_embeddings = 8 (older versions always
    re-derive it so, newer ones when rope_scaling has no "factor", as here); attention_factor
    (absent) = sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) = sqrt(1.5) when
    factor > 1, else 1; ext_factors = long_factor if seq_len and seq_len >
    original_max_position_embeddings else short_factor; inv_freq = 1 / (ext_factors *
    base^(arange(0, dim, 2) / dim)).
    dynamic_rope_update (longrope_frequency_update): seq_len = max(position_ids) + 1 of the
    current forward call; > original: the long inv_freq, else the original (short) one.
    Phi3RotaryEmbedding: cos = cos(emb) * attention_scaling, sin likewise, emb = cat(freqs,
    freqs) [12]; apply_rotary_pos_emb rotates the first 12 dims only, so the pass-through dims
    12..15 are NOT scaled by the attention factor. The rest is phi3-tiny's model
    (tiny_models.py).
  * llama.cpp (peer at d32676d7): conversion/phi.py Phi3MiniModel.generate_extra_tensors writes
    rope_factors_long / rope_factors_short (torch.float32) and rope.scaling.attn_factor =
    sqrt(1 + ln(scale) / ln(orig)) with scale = max_position_embeddings /
    original_max_position_embeddings (1 when scale <= 1); set_gguf_parameters writes
    context_length = max_position_embeddings and rope.scaling.original_context_length; no
    rope.scaling.type / factor (so "linear" with freq_scale 1 and ext_factor 0).
    src/models/phi3.cpp loads rope_long / rope_short {n_rot/2} (shared by every layer) and
    passes model.get_rope_factors(cparams, il) to ggml_rope_ext; src/llama-model.cpp
    get_rope_factors: rope_long when cparams.n_ctx_seq > hparams.n_ctx_orig_yarn
    (= original_context_length), else rope_short, i.e. chosen by the CONTEXT SIZE, once, not by
    the sequence; src/llama-context.cpp pads n_ctx to a multiple of 256 (GGML_PAD(n_ctx, 256))
    before, so any context is >= 256 > 64 and this model always runs with the long factors.
    attn_factor: cparams.yarn_attn_factor = 1 (no YaRN) * hparams.rope_attn_factor (the key).
    ggml-cpu rope (ggml_rope_cache_init / rope_yarn): theta_i = pos * base^(-2i/n_rot) /
    freq_factors[i], with ext_factor 0: cos/sin * attn_factor, NEOX pairs (i, i + n_rot/2),
    dims >= n_rot copied unchanged (unscaled, as transformers).
  * vLLM (model_executor/layers/rotary_embedding/phi3_long_rope_scaled_rope.py, current):
    long factors for every position whenever max_model_len > original_max_position_embeddings
    (as llama.cpp, by the configured length); short_mscale / long_mscale default to the same
    attention factor. (Older vLLM chose per batch: long for the whole batch when any position
    > original_max_position_embeddings, one position later than transformers' seq_len > orig.)
"""

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models as tm  # noqa: E402  (phi3 weights, forwards, file writers / readers)

OUT_NAME = "phi3-longrope-tiny"
# general.name must not contain "phi3" / "phi-3" (see tiny_models.gguf_metadata_phi3).
GGUF_NAME = "phi-longrope-tiny"
MIN_ARGMAX_MARGIN = tm.MIN_ARGMAX_MARGIN   # 2e-3
MAX_SEED = tm.MAX_SEED
LLAMACPP_CTX_PAD = 256                     # llama_context: n_ctx = GGML_PAD(n_ctx, 256)

ORIGINAL_CTX = 64
MAX_CTX = 512
# One factor per rotary frequency (rotary_dim / 2 = 6), every value exact in float32 so that
# the GGUF tensors (F32) hold exactly the config's numbers. Short: near 1; long: growing with
# the dim index (slower frequencies stretched more), as Phi-3-mini-128k's.
SHORT_FACTOR = [1.0, 1.03125, 1.0625, 1.125, 1.1875, 1.25]
LONG_FACTOR = [1.0625, 1.375, 2.0, 3.25, 5.0, 7.75]

PHI3_LONGROPE_CONFIG = dict(
    tm.PHI3_CONFIG,
    max_position_embeddings=MAX_CTX,
    original_max_position_embeddings=ORIGINAL_CTX,
    # Exactly the three keys older transformers' Phi3Config._rope_scaling_validation accepts.
    rope_scaling={"type": "longrope", "long_factor": LONG_FACTOR, "short_factor": SHORT_FACTOR},
)

# (file stem, sequence, factors): factors None = transformers' choice by the sequence length.
OUTPUTS = (
    ("numpy_logits_short", "short", None),
    ("numpy_logits_long", "long", None),
    ("numpy_logits_short_longfactors", "short", "long"),
)

_TM_ROPE_ROTATE_HALF = tm.rope_rotate_half
_TM_ROPE_GGML = tm.rope_ggml


@contextlib.contextmanager
def patched(name, fn):
    """Replaces tiny_models.<name> (looked up at call time by its forwards) for the block."""
    old = getattr(tm, name)
    setattr(tm, name, fn)
    try:
        yield
    finally:
        setattr(tm, name, old)


def plain_config(cfg):
    """cfg without rope_scaling: what tiny_models' phi3 code accepts (it knows only YaRN)."""
    return dict(cfg, rope_scaling=None)


# --------------------------------------------------------------------------
# transformers' LongRoPE
# --------------------------------------------------------------------------

def longrope_parameters(cfg, seq_len=None, factors=None):
    """transformers _compute_longrope_parameters in float64. factors: None = transformers'
    choice (long when seq_len > original_max_position_embeddings), or "short" / "long"."""
    rs = cfg["rope_scaling"]
    assert rs.get("rope_type", rs.get("type")) == "longrope", rs
    assert not ({"factor", "attention_factor"} & set(rs)), rs
    h = tm.hparams(plain_config(cfg))
    dim = h["rot"]
    assert dim == int(h["hd"] * cfg.get("partial_rotary_factor", 1.0))
    orig = cfg["original_max_position_embeddings"]
    factor = cfg["max_position_embeddings"] / orig
    attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    if factors is None:
        factors = "long" if seq_len and seq_len > orig else "short"
    ext = np.asarray(rs[f"{factors}_factor"], dtype=np.float64)
    assert ext.shape == (dim // 2,), ext.shape
    inv_freq = 1.0 / (ext * h["theta"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    return {"dim": dim, "factor": factor, "original": orig, "factors": factors,
            "attention_factor": attention_factor, "inv_freq": inv_freq}


def forward(W, cfg, tokens, factors=None, attention_factor=None, mistake=None):
    """The Hugging Face (transformers) forward: phi3-tiny's, with Phi3RotaryEmbedding's
    LongRoPE cos/sin. factors / attention_factor override transformers' choice / value;
    mistake: one of the usual implementation mistakes (for the table printed by checks)."""
    p = longrope_parameters(cfg, len(tokens), factors)
    inv, af = p["inv_freq"], p["attention_factor"] if attention_factor is None else attention_factor
    if mistake == "multiply":   # inv_freq * ext instead of / ext
        ext = np.asarray(cfg["rope_scaling"][p["factors"] + "_factor"], dtype=np.float64)
        inv = inv * ext * ext

    def rope(x, positions, theta, yarn=None, rot=None):
        assert yarn is None and rot == p["dim"] < x.shape[-1]
        r = _TM_ROPE_ROTATE_HALF(x[..., :rot], positions, theta,
                                 {"inv_freq": inv, "attention_factor": af})
        rest = x[..., rot:] * (af if mistake == "scale_all_dims" else 1.0)
        return np.concatenate([r, rest], axis=-1)

    with patched("rope_rotate_half", rope):
        return tm.forward(W, plain_config(cfg), tokens)


# --------------------------------------------------------------------------
# llama.cpp's reading of the GGUF
# --------------------------------------------------------------------------

def llamacpp_factors(meta, G, n_ctx):
    """llama_model::get_rope_factors after llama_context's padding: (tensor name, n_ctx_seq)."""
    a = meta["general.architecture"]
    n_ctx_seq = -(-n_ctx // LLAMACPP_CTX_PAD) * LLAMACPP_CTX_PAD
    orig = meta.get(f"{a}.rope.scaling.original_context_length", meta[f"{a}.context_length"])
    name = "rope_factors_long.weight" if n_ctx_seq > orig else "rope_factors_short.weight"
    assert "rope_freqs.weight" not in G
    return name, n_ctx_seq


def rope_ggml_factors(x, positions, theta, n_rot, freq_factors, mscale):
    """ggml_rope_ext (NEOX, freq_scale 1, ext_factor 0) with freq_factors: theta_i = pos *
    base^(-2i/n_rot) / freq_factors[i]; cos/sin * mscale; dims >= n_rot copied."""
    ff = np.asarray(freq_factors, dtype=np.float64)
    assert ff.shape == (n_rot // 2,)
    th = positions.astype(np.float64)[:, None] * (
        theta ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot) / ff)[None, :]
    cos, sin = np.cos(th)[:, None, :] * mscale, np.sin(th)[:, None, :] * mscale
    a, b = x[..., : n_rot // 2], x[..., n_rot // 2:n_rot]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos, x[..., n_rot:]], axis=-1)


def forward_gguf(meta, G, tokens, n_ctx=None, factors_tensor=None):
    """Logits from the GGUF alone, as llama.cpp computes them: tiny_models.forward_gguf (phi3:
    fused attn_qkv, fused ffn_up, NEOX RoPE over rope.dimension_count) with the rope factors
    taken from the tensor that get_rope_factors picks for a context of n_ctx (default: the
    sequence length, what scripts/references/llamacpp_logits.cpp asks for) and cos/sin scaled
    by rope.scaling.attn_factor (f32, from the metadata). factors_tensor forces a tensor."""
    a = meta["general.architecture"]
    assert a == "phi3"
    # No rope.scaling.type / factor: scaling "linear" with freq_scale 1, so ext_factor 0 and
    # mscale = yarn_attn_factor (1) * rope_attn_factor.
    assert f"{a}.rope.scaling.type" not in meta and f"{a}.rope.scaling.factor" not in meta
    mscale = 1.0 * meta.get(f"{a}.rope.scaling.attn_factor", 1.0)
    if factors_tensor is None:
        factors_tensor, _ = llamacpp_factors(meta, G, len(tokens) if n_ctx is None else n_ctx)
    ff = G[factors_tensor]

    def rope(x, positions, theta, n_rot, neox, yarn=None):
        assert neox and yarn is None
        return rope_ggml_factors(x, positions, theta, n_rot, ff, mscale)

    with patched("rope_ggml", rope):
        return tm.forward_gguf(meta, G, tokens)


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------

def gguf_tensors(W, cfg, factors_long=None):
    """Converter order: generate_extra_tensors (rope_factors_long, rope_factors_short) first,
    then phi3-tiny's tensors. factors_long overrides the long tensor (diagnostic copy only)."""
    rs = cfg["rope_scaling"]
    g = {"rope_factors_long.weight": np.asarray(rs["long_factor"] if factors_long is None
                                                else factors_long, dtype=np.float32),
         "rope_factors_short.weight": np.asarray(rs["short_factor"], dtype=np.float32)}
    g.update(tm.hf_to_gguf_tensors(W, plain_config(cfg), "phi3"))
    return g


def gguf_metadata(cfg):
    """phi3-tiny's keys (tiny_models.gguf_metadata_phi3: context_length 512,
    original_context_length 64, ...) with general.name GGUF_NAME and, right after
    general.architecture, phi3.rope.scaling.attn_factor (f32) as the converter computes it."""
    kvs = tm.gguf_metadata_phi3(plain_config(cfg), GGUF_NAME)
    scale = cfg["max_position_embeddings"] / cfg["original_max_position_embeddings"]
    attn_factor = (math.sqrt(1 + math.log(scale) / math.log(cfg["original_max_position_embeddings"]))
                   if scale > 1.0 else 1.0)
    out = []
    for key, val in kvs:
        if key == "general.name":
            assert "phi3" not in GGUF_NAME.lower() and "phi-3" not in GGUF_NAME.lower()
            val = (tm.T_STRING, GGUF_NAME)
        out.append((key, val))
        if key == "general.architecture":
            out.append(("phi3.rope.scaling.attn_factor", (tm.T_FLOAT32, attn_factor)))
    return out


def write_gguf(path, W, cfg, factors_long=None):
    kvs = gguf_metadata(cfg)
    tok = tm.tokenizer_kvs_raw(tm.TOKENIZER_GGUF, {k for k, _ in kvs})
    G = gguf_tensors(W, cfg, factors_long)
    tm.write_gguf(path, kvs, G, tok)
    return kvs, G


def margin_of(lg):
    return float(np.min(np.diff(np.sort(lg, axis=1)[:, -2:], axis=1)))


def diff_line(lg, ref):
    d = np.abs(lg - ref)
    return (f"max|diff| {d.max():.3e} (mean {d.mean():.2e}), argmax changed at "
            f"{int((lg.argmax(-1) != ref.argmax(-1)).sum())}/{len(ref)} positions")


def compute_all(W, cfg, seqs):
    return {stem: forward(W, cfg, seqs[seq], factors) for stem, seq, factors in OUTPUTS}


def checks(W, cfg, seqs, logits, meta, RG):
    """GGUF-only forward vs HF; RoPE kernels; LongRoPE vs plain RoPE; the usual mistakes."""
    out = {}
    a_f64 = longrope_parameters(cfg, 1)["attention_factor"]
    a_f32 = meta["phi3.rope.scaling.attn_factor"]
    assert a_f32 == float(np.float32(a_f64)), (a_f32, a_f64)
    # The factors in the GGUF are the config's numbers exactly (all exact in float32).
    for which in ("long", "short"):
        assert np.array_equal(RG[f"rope_factors_{which}.weight"].astype(np.float64),
                              np.asarray(cfg["rope_scaling"][f"{which}_factor"], dtype=np.float64))
    # Kernels: ggml NEOX with freq_factors over 12 of 16 dims == HF partial rotate-half LongRoPE.
    xr = np.random.default_rng(0).standard_normal((len(seqs["long"]), 2, 16))
    pos = np.arange(xr.shape[0])
    for which in ("short", "long"):
        p = longrope_parameters(cfg, factors=which)
        hf = np.concatenate([_TM_ROPE_ROTATE_HALF(xr[..., :12], pos, 10000.0,
                                                  {"inv_freq": p["inv_freq"],
                                                   "attention_factor": p["attention_factor"]}),
                             xr[..., 12:]], axis=-1)
        gg = rope_ggml_factors(xr, pos, meta["phi3.rope.freq_base"], meta["phi3.rope.dimension_count"],
                               RG[f"rope_factors_{which}.weight"], p["attention_factor"])
        rd = float(np.abs(gg - hf).max())
        assert rd < 1e-12, (which, rd)
        print(f"RoPE kernels ({which} factors): ggml NEOX with freq_factors vs HF rotate-half on "
              f"positions 0..{pos[-1]}: max|diff| {rd:.1e}")
    # llama.cpp's choice for the contexts the reference tool asks for (n_ctx = T).
    for name, toks in seqs.items():
        t, n_seq = llamacpp_factors(meta, RG, len(toks))
        print(f"llama.cpp on {name:5s}: n_ctx {len(toks)} -> n_ctx_seq {n_seq} (padded to {LLAMACPP_CTX_PAD}) "
              f"{'>' if 'long' in t else '<='} original_context_length "
              f"{meta['phi3.rope.scaling.original_context_length']}: {t}")
    for n_ctx in (1, 64, 65, 256, 257):
        t, n_seq = llamacpp_factors(meta, RG, n_ctx)
        assert "long" in t, (n_ctx, t)   # never short: the padding makes every context >= 256
    # GGUF-only forward (llama.cpp's reading) vs the HF forward.
    # (file, sequence, factors tensor (None: llama.cpp's pick for n_ctx = T), HF factors)
    gguf_cases = (("numpy_logits_short", "short", "rope_factors_short.weight", "short"),
                  ("numpy_logits_long", "long", None, "long"),
                  ("numpy_logits_short_longfactors", "short", None, "long"))
    out["gguf_forward_vs_hf"] = {}
    for stem, seq, tensor, factors in gguf_cases:
        lg = forward_gguf(meta, RG, seqs[seq], factors_tensor=tensor)
        same_af = forward(W, cfg, seqs[seq], factors, attention_factor=a_f32)
        d_same = float(np.abs(lg - same_af).max())
        d_ref = float(np.abs(lg - logits[stem]).max())
        assert d_same < 1e-9, (stem, d_same)
        assert d_ref < 1e-6 and (lg.argmax(-1) == logits[stem].argmax(-1)).all(), (stem, d_ref)
        how = ("rope_factors_short forced (llama.cpp never picks it here)" if tensor
               else f"llama.cpp's pick for n_ctx {len(seqs[seq])} (rope_factors_long)")
        print(f"GGUF forward, `{seq}`, {how}: vs the HF forward with {factors} factors and the same "
              f"(f32) attention factor max|diff| {d_same:.2e}; vs {stem}.npy's float64 forward "
              f"(sqrt(1.5)) {d_ref:.2e}")
        out["gguf_forward_vs_hf"][stem] = {"factors_tensor": tensor or "llama.cpp's pick: rope_factors_long.weight",
                                           "max_abs_diff_same_attn_factor": d_same,
                                           "max_abs_diff_vs_float64_attn_factor": d_ref}
    # llama.cpp's own reading of `short` is the long-factor file.
    lg = forward_gguf(meta, RG, seqs["short"])
    assert np.abs(lg - logits["numpy_logits_short_longfactors"]).max() < 1e-6
    # LongRoPE matters; and what the usual mistakes do.
    plain = {}
    for stem, seq, _ in OUTPUTS:
        plain[stem] = tm.forward(W, plain_config(cfg), seqs[seq])
        d = float(np.abs(plain[stem] - logits[stem]).max())
        assert d > 1e-2, (stem, d)
    print("LongRoPE vs plain RoPE (rope_scaling ignored): "
          + "; ".join(f"{stem[13:]} {diff_line(plain[stem], logits[stem])}" for stem, _, _ in OUTPUTS))
    out["plain_rope_max_abs_diff"] = {stem: float(np.abs(plain[stem] - logits[stem]).max())
                                      for stem, _, _ in OUTPUTS}
    sl = logits["numpy_logits_short_longfactors"]
    d_sl = float(np.abs(sl - logits["numpy_logits_short"]).max())
    assert d_sl > 1e-2, d_sl
    print(f"`short` with long vs short factors: {diff_line(sl, logits['numpy_logits_short'])}")
    out["short_long_vs_short_factors_max_abs_diff"] = d_sl
    yarn_mscale = 0.1 * math.log(MAX_CTX / ORIGINAL_CTX) + 1.0
    mistakes = (
        ("no attention factor (cos/sin unscaled)", dict(attention_factor=1.0)),
        ("attention factor on all 16 dims (pass-through dims scaled too)", dict(mistake="scale_all_dims")),
        (f"YaRN's mscale 0.1 ln 8 + 1 = {yarn_mscale:.6f} instead of sqrt(1.5)", dict(attention_factor=yarn_mscale)),
        ("inv_freq * factors instead of / factors", dict(mistake="multiply")),
    )
    out["mistakes_max_abs_diff"] = {}
    for what, kw in mistakes:
        parts = []
        for stem, seq, factors in OUTPUTS:
            lg = forward(W, cfg, seqs[seq], factors, **kw)
            parts.append(f"{stem[13:]} {np.abs(lg - logits[stem]).max():.3f} "
                         f"({int((lg.argmax(-1) != logits[stem].argmax(-1)).sum())} argmax)")
            out["mistakes_max_abs_diff"].setdefault(what, {})[stem] = float(np.abs(lg - logits[stem]).max())
        print(f"mistake {what}: max|diff| " + ", ".join(parts))
    return out


def shape_json(cfg, seed, margins, stats):
    s = tm.shape_json_phi3("phi3", plain_config(cfg), "phi3", seed, min(margins.values()))
    s["name"] = OUT_NAME
    s["rope_inv_freq_unscaled"] = s.pop("rope_inv_freq")
    s.pop("min_argmax_margin")
    ps, pl = longrope_parameters(cfg, factors="short"), longrope_parameters(cfg, factors="long")
    s["rope_scaling"] = {
        "type": "longrope",
        "original_max_position_embeddings": cfg["original_max_position_embeddings"],
        "max_position_embeddings": cfg["max_position_embeddings"],
        "factor": ps["factor"],
        "attention_factor": ps["attention_factor"],
        "attention_factor_gguf_f32": float(np.float32(ps["attention_factor"])),
        "short_factor": cfg["rope_scaling"]["short_factor"],
        "long_factor": cfg["rope_scaling"]["long_factor"],
        "inv_freq_short": [float(v) for v in ps["inv_freq"]],
        "inv_freq_long": [float(v) for v in pl["inv_freq"]],
        "transformers_choice": "long_factor when max(position_ids) + 1 > original_max_position_embeddings",
        "llamacpp_choice": "rope_factors_long when n_ctx_seq (n_ctx padded to 256) > "
                           "rope.scaling.original_context_length: always, for this model",
    }
    s["files"] = {f"{stem}.npy": {"sequence": seq, "factors": factors or ("long" if seq == "long" else "short"),
                                  "min_argmax_margin": margins[stem]}
                  for stem, seq, factors in OUTPUTS}
    s["llamacpp_files_match"] = {"llamacpp_logits_short.npy": "numpy_logits_short_longfactors.npy",
                                 "llamacpp_logits_long.npy": "numpy_logits_long.npy"}
    s["min_argmax_margin"] = min(margins.values())
    s["checks"] = stats
    return s


def generate(seqs):
    cfg = PHI3_LONGROPE_CONFIG
    out_dir = tm.DATA_DIR / OUT_NAME
    for v in SHORT_FACTOR + LONG_FACTOR:
        assert float(np.float32(v)) == v, v
    ps, pl = longrope_parameters(cfg, factors="short"), longrope_parameters(cfg, factors="long")
    print(f"== {OUT_NAME} (Phi3ForCausalLM, GGUF phi3, LongRoPE)")
    print(f"factor {ps['factor']:g} = {MAX_CTX} / {ORIGINAL_CTX}, attention_factor sqrt(1 + ln 8 / ln 64) = "
          f"{ps['attention_factor']!r} (f32 in the GGUF: {float(np.float32(ps['attention_factor']))!r})")
    print(f"short_factor {SHORT_FACTOR}: inv_freq " + ", ".join(f"{v:.6g}" for v in ps["inv_freq"]))
    print(f"long_factor  {LONG_FACTOR}: inv_freq " + ", ".join(f"{v:.6g}" for v in pl["inv_freq"]))
    for seed in range(1, MAX_SEED + 1):
        W = tm.make_weights(plain_config(cfg), seed)
        logits = compute_all(W, cfg, seqs)
        margins = {stem: margin_of(lg) for stem, lg in logits.items()}
        if min(margins.values()) >= MIN_ARGMAX_MARGIN:
            break
        print(f"seed {seed}: rejected (argmax margin {min(margins.values()):.2e} < {MIN_ARGMAX_MARGIN:g} in "
              f"{min(margins, key=margins.get)})")
    else:
        sys.exit(f"{OUT_NAME}: no acceptable seed found")
    print(f"seed {seed}: accepted")
    for stem, lg in logits.items():
        print(f"{stem}: T={lg.shape[0]} range {lg.min():.4f} .. {lg.max():.4f}, min argmax margin "
              f"{margins[stem]:.4e}")
    phi3_tiny = tm.DATA_DIR / "phi3-tiny" / "hf" / "model.safetensors"
    if phi3_tiny.exists():
        P = tm.read_safetensors(phi3_tiny)
        same = set(P) == set(W) and all(np.array_equal(P[n], W[n]) for n in W)
        print(f"weights identical to phi3-tiny's: {same}")

    (out_dir / "hf").mkdir(parents=True, exist_ok=True)
    (out_dir / "hf" / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tm.write_safetensors(out_dir / "hf" / "model.safetensors", W)
    kvs, G = write_gguf(out_dir / "model.gguf", W, cfg)
    for stem, lg in logits.items():
        np.save(out_dir / f"{stem}.npy", lg.astype(np.float32))

    # Self-checks: read everything back.
    RS = tm.read_safetensors(out_dir / "hf" / "model.safetensors")
    assert set(RS) == set(W) and all(np.array_equal(RS[n], W[n]) for n in W)
    assert json.loads((out_dir / "hf" / "config.json").read_text()) == cfg
    for stem, lg in logits.items():
        assert np.array_equal(np.load(out_dir / f"{stem}.npy"), lg.astype(np.float32)), stem
    meta, RG = tm.read_gguf(out_dir / "model.gguf")
    assert list(RG) == list(G), list(RG)
    for n, t in G.items():
        assert RG[n].shape == t.shape and np.array_equal(RG[n], t), n
    assert [k for k in meta if k != "__types__"][:len(kvs)] == [k for k, _ in kvs]
    for key, (typ, val) in kvs:
        assert meta["__types__"][key] == typ, key
        assert meta[key] == (float(np.float32(val)) if typ == tm.T_FLOAT32 else val), key
    for i in range(2):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        assert np.array_equal(RG[b + "attn_qkv.weight"], W[p + "self_attn.qkv_proj.weight"])
        assert np.array_equal(RG[b + "ffn_up.weight"], W[p + "mlp.gate_up_proj.weight"])
    stats = checks(W, cfg, seqs, logits, meta, RG)
    shape = shape_json(cfg, seed, margins, stats)
    (out_dir / "shape.json").write_text(json.dumps(shape, indent=1) + "\n")
    print(f"self-check passed: {len(G)} GGUF tensors and {len(W)} safetensors tensors read back equal")
    for p in sorted(out_dir.rglob("*")):
        if p.is_file():
            print(f"  {p.relative_to(tm.REPO_ROOT)}: {p.stat().st_size} bytes")


def write_short_as_long_copy(root):
    """Diagnostic: model.gguf with rope_factors_long.weight = the short factors."""
    cfg = PHI3_LONGROPE_CONFIG
    d = root / OUT_NAME
    d.mkdir(parents=True, exist_ok=True)
    W = tm.read_safetensors(tm.DATA_DIR / OUT_NAME / "hf" / "model.safetensors")
    write_gguf(d / "model.gguf", W, cfg, factors_long=cfg["rope_scaling"]["short_factor"])
    print(f"wrote {d / 'model.gguf'} (rope_factors_long.weight = short factors)")


def compare_llamacpp(seqs, short_as_long_dir=None):
    d = tm.DATA_DIR / OUT_NAME
    pairs = (("llamacpp_logits_short", "numpy_logits_short_longfactors", "numpy_logits_short"),
             ("llamacpp_logits_long", "numpy_logits_long", None))
    for lc, match, other in pairs:
        path = d / f"{lc}.npy"
        if not path.exists():
            print(f"{path.name} not found (scripts/references/llamacpp_reference.sh makes it)")
            continue
        ref = np.load(path)
        print(f"{lc}.npy vs {match}.npy: {diff_line(np.load(d / f'{match}.npy'), ref)}")
        if other:
            print(f"    (vs {other}.npy, the short-factor reference: {diff_line(np.load(d / f'{other}.npy'), ref)})")
    if short_as_long_dir is not None:
        path = short_as_long_dir / OUT_NAME / "llamacpp_logits_short.npy"
        if path.exists():
            ref = np.load(path)
            print(f"short-as-long copy: llama.cpp `short` vs numpy_logits_short.npy: "
                  f"{diff_line(np.load(d / 'numpy_logits_short.npy'), ref)}")
        else:
            print(f"{path} not found")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare-llamacpp", action="store_true",
                    help="write nothing; compare llamacpp_logits_*.npy with the NumPy files")
    ap.add_argument("--short-as-long-logits", metavar="DIR", type=Path,
                    help="with --compare-llamacpp: llama.cpp's logits of the short-as-long copy, DIR/<model>/")
    ap.add_argument("--short-as-long-copy", metavar="DIR", type=Path,
                    help="write only DIR/<model>/model.gguf with rope_factors_long = the short factors")
    args = ap.parse_args()
    all_seqs = json.loads(tm.SEQUENCES.read_text())
    seqs = {"short": all_seqs["short"], "long": all_seqs["long"]}
    assert len(seqs["short"]) == 24 and len(seqs["long"]) == 160
    assert len(seqs["short"]) <= ORIGINAL_CTX < len(seqs["long"])
    if args.short_as_long_copy is not None:
        write_short_as_long_copy(args.short_as_long_copy)
    elif args.compare_llamacpp:
        compare_llamacpp(seqs, args.short_as_long_logits)
    else:
        generate(seqs)


if __name__ == "__main__":
    main()
