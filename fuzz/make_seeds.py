#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (committed; rerun to regenerate).

Tiny inputs that reach deep into each parser: GGUF v3 files with every metadata type, a
SentencePiece (`llama`) and a byte-level (`gpt2`) vocabulary and F32/F16/BF16 tensors, plus
truncated copies; one tensor of each quantized type; safetensors files; request bodies; chat-template snippets (three real
templates from ../shared/testdata/chat_templates, a few hand-written ones); tokenizer texts.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
SHARED = os.path.join(HERE, "..", "..", "shared")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- GGUF -----------------------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, dims_innermost_first, bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    off = 0
    offsets = []
    for name, gt, dims, data in tensors:
        offsets.append(off)
        off += len(data)
        off = (off + align - 1) // align * align
    for (name, gt, dims, data), o in zip(tensors, offsets):
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gt, o)
    out += b"\0" * ((-len(out)) % align)
    blob = b""
    for (name, gt, dims, data), o in zip(tensors, offsets):
        blob += b"\0" * (o - len(blob)) + data
    return out + blob


spm_tokens = ["<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>", "\u2581", "a", "b", "\u2581a",
              "ab", "\u2581ab", "<|im_start|>", "h", "i", "\u2581hi"]
spm_types = [2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 4, 1, 1, 1]
spm = [
    ("general.architecture", STR, "llama"),
    ("general.alignment", U32, 32),
    ("llama.context_length", U32, 64),
    ("llama.embedding_length", U64, 8),
    ("llama.rope.freq_base", F32, 10000.0),
    ("some.i8", I8, -3), ("some.u8", U8, 200), ("some.i16", I16, -300), ("some.u16", U16, 60000),
    ("some.i64", I64, -(1 << 40)), ("some.f64", F64, 0.5), ("some.bool", BOOL, True),
    ("some.nested", ARR, (ARR, [(I32, [1, 2]), (STR, ["x"])])),
    ("tokenizer.ggml.model", STR, "llama"),
    ("tokenizer.ggml.tokens", ARR, (STR, spm_tokens)),
    ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(spm_tokens))])),
    ("tokenizer.ggml.token_type", ARR, (I32, spm_types)),
    ("tokenizer.ggml.bos_token_id", U32, 1),
    ("tokenizer.ggml.eos_token_id", U32, 2),
    ("tokenizer.ggml.unknown_token_id", U32, 0),
    ("tokenizer.ggml.add_bos_token", BOOL, True),
]
tensors = [
    ("token_embd.weight", 0, [4, 2], struct.pack("<8f", *range(8))),
    ("output_norm.weight", 1, [4], struct.pack("<4H", 0x3C00, 0x4000, 0x0001, 0x7C00)),
    ("blk.0.attn_q.weight", 30, [2, 2], struct.pack("<4H", 0x3F80, 0xBF80, 0x7FC0, 0)),
]
f = gguf(spm, tensors)
put("gguf", "spm_vocab_3_tensors.gguf", f)
put("gguf", "spm_truncated_half.gguf", f[: len(f) // 2])
put("gguf", "spm_truncated_data.gguf", f[:-20])
put("gguf", "align_64.gguf", gguf([("general.alignment", U32, 64)], tensors, align=64))
put("gguf", "empty_v3.gguf", gguf([], []))
# One row of one block of each quantized type llmserve reads (ggml type id, block elements,
# block bytes from ggml-common.h), patterned bytes: tensors that dequantize, for the fuzzer to
# mutate (wrong ids, row lengths, sizes).
QUANT = [(2, 32, 18), (3, 32, 20), (6, 32, 22), (7, 32, 24), (8, 32, 34), (10, 256, 84),
         (11, 256, 110), (12, 256, 144), (13, 256, 176), (14, 256, 210), (20, 32, 18),
         (23, 256, 136)]
quant = [("q%d.weight" % t, t, [elems, 1], bytes((i * 37 + t) % 251 for i in range(size)))
         for t, elems, size in QUANT]
put("gguf", "quantized_types.gguf", gguf([("general.architecture", STR, "llama")], quant))

bpe_tokens = ["!", "a", "b", "c", "\u0120", "\u0120a", "ab", "abc", "<|endoftext|>", "\u010a"]
bpe = [
    ("general.architecture", STR, "gpt2"),
    ("tokenizer.ggml.model", STR, "gpt2"),
    ("tokenizer.ggml.pre", STR, "default"),
    ("tokenizer.ggml.tokens", ARR, (STR, bpe_tokens)),
    ("tokenizer.ggml.token_type", ARR, (I32, [1] * 8 + [3, 1])),
    ("tokenizer.ggml.merges", ARR, (STR, ["\u0120 a", "a b", "ab c"])),
    ("tokenizer.ggml.bos_token_id", U32, 8),
    ("tokenizer.ggml.eos_token_id", U32, 8),
]
put("gguf", "gpt2_vocab.gguf", gguf(bpe, []))
bpe_qwen = [kv if kv[0] != "tokenizer.ggml.pre" else ("tokenizer.ggml.pre", STR, "qwen2") for kv in bpe]
put("gguf", "qwen2_pre.gguf", gguf(bpe_qwen, []))

# ---- safetensors ----------------------------------------------------------------------------


def safetensors(header, data):
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "two_tensors.safetensors", safetensors({
    "__metadata__": {"format": "pt"},
    "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
    "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
    "c": {"dtype": "F16", "shape": [1, 1], "data_offsets": [22, 24]},
}, bytes(range(24))))
put("safetensors", "empty_shape.safetensors", safetensors({
    "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
    "z": {"dtype": "F32", "shape": [0, 5], "data_offsets": [4, 4]},
}, b"\0\0\x80\x3f"))
put("safetensors", "bad_dtype.safetensors", safetensors({
    "q": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}}, b"abcd"))
put("safetensors", "truncated.safetensors", safetensors({
    "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8))

# ---- request bodies (byte 0: even = /v1/completions, odd = /v1/chat/completions) ------------
completions = [
    {"prompt": "Hello", "max_tokens": 8},
    {"model": "m", "prompt": [1, 2, 3], "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 7,
     "stop": ["\n", "."], "stop_token_ids": [2], "ignore_eos": True, "stream": True,
     "stream_options": {"include_usage": True}, "priority": 1, "add_special_tokens": False,
     "skip_special_tokens": False, "user": "u"},
    {"prompt": ["one"], "max_tokens": 16.0, "temperature": 0, "min_p": 0.1, "n": 1,
     "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1},
    {"prompt": [[5, 6]], "stop": "x", "logprobs": None, "echo": False},
    {"prompt": "", "max_tokens": -1, "temperature": -1, "top_p": 0},
]
for i, c in enumerate(completions):
    put("request", f"completion_{i}.json", "\x00" + json.dumps(c))
chats = [
    {"messages": [{"role": "user", "content": "Hi"}]},
    {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": [{"type": "text", "text": "a"},
                                                             {"type": "text", "text": "b"}]}],
     "max_completion_tokens": 4, "max_tokens": 9, "add_generation_prompt": False,
     "continue_final_message": True, "chat_template_kwargs": {"enable_thinking": False},
     "tools": [{"type": "function", "function": {"name": "f"}}], "documents": None},
    {"messages": [{"role": "assistant", "content": None,
                   "tool_calls": [{"id": "1", "type": "function",
                                   "function": {"name": "f", "arguments": "{}"}}]}],
     "stop": ["</s>"], "seed": 18446744073709551615},
    {"messages": []},
]
for i, c in enumerate(chats):
    put("request", f"chat_{i}.json", "\x01" + json.dumps(c))
put("request", "not_object.json", "\x00[1, 2]")
put("request", "bad_utf8.json", b'\x01{"messages": [{"role": "user", "content": "\xff\xfe"}]}')

# ---- chat templates -------------------------------------------------------------------------
for name in ["google-gemma-2-2b-it.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
             "Qwen-Qwen2.5-7B-Instruct.jinja"]:
    path = os.path.join(SHARED, "testdata", "chat_templates", name)
    if os.path.exists(path):
        with open(path, "rb") as f:
            put("jinja", name, f.read())
snippets = {
    "chatml": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "macro_set_ns": "{%- macro f(x, y=2) -%}{{ x ~ y }}{%- endmacro -%}{% set ns = namespace(n=0) %}"
                    "{% for i in range(3) %}{% set ns.n = ns.n + i %}{{ f(i) }}{% endfor %}{{ ns.n }}",
    "filters": "{{ messages | length }}{{ 'a,b' .split(',') | join('-') | upper }}"
               "{{ tools | tojson(indent=2) }}{{ messages[0]['content'] | trim | replace('a', 'b') }}"
               "{{ [3,1,2] | sort | reverse | list | first }}{{ {'k': 1} | items | list }}",
    "tests_loop": "{% for m in messages if m.role != 'system' %}{% if loop.first %}F{% endif %}"
                  "{{ loop.index0 }}{% if m.content is string %}s{% elif m.content is none %}n"
                  "{% else %}o{% endif %}{% if loop.last %}{% break %}{% endif %}{% endfor %}",
    "raise": "{% if messages|length > 0 %}{{ raise_exception('bad roles') }}{% endif %}",
    "strftime_slice": "{{ strftime_now('%d %b %Y') }}{{ bos_token[1:] }}{{ 'abc'[::-1] }}"
                      "{{ '%s-%d' % ('x', 3) }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ -1 if x is defined else 1 }}",
    "call_filter_block": "{% filter upper %}hi{% endfilter %}{% call f() %}{% endcall %}"
                         "{%- set x -%}cap{%- endset -%}{{ x }}{# comment #}{% raw %}{{ }}{% endraw %}",
}
for name, text in snippets.items():
    put("jinja", name + ".jinja", text)

# ---- tokenizer (byte 0: bit 0 = GPT-2 vs stories260K, 1 = skip special, 2 = ids, 3 = add
# special, 4 = parse special) -----------------------------------------------------------------
texts = [
    (0x00, "Once upon a time, there was a little girl named Lily."),
    (0x1a, "<s>Hi</s> <unk> the  end\n\n"),
    (0x01, "Hello world! It's 2024-07-26, caf\u00e9 \u4e2d\u6587 \U0001F600 123456789"),
    (0x11, "<|endoftext|>def f(x):\n\treturn x  # ok\r\n"),
    (0x03, "   leading and trailing spaces   "),
]
for i, (flags, text) in enumerate(texts):
    put("tokenizer", f"text_{i}", bytes([flags]) + text.encode())
put("tokenizer", "invalid_utf8", bytes([0x01]) + b"a\xff\xc3(\xe2\x82 \xf0\x9f\x98")
put("tokenizer", "ids_stories", bytes([0x04]) + struct.pack("<8H", 1, 65, 300, 3, 4, 2, 511, 600))
put("tokenizer", "ids_gpt2", bytes([0x07]) + struct.pack("<6H", 50256, 31373, 995, 171, 120, 253))

print("seeds written under", OUT, file=sys.stderr)
