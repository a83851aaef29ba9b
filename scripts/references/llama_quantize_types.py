#!/usr/bin/python3
"""Records the tensor types llama.cpp's llama-quantize gives a model, as the reference for our
per-tensor type rules (src/quant/quant_scheme.cc; tests/models/test_moe.cc).

For each model.gguf given and each type in --types, runs `llama-quantize model.gguf TMP TYPE`
and writes, beside the model, llama_quantize_types.json: {TYPE: {tensor name: ggml type id}}.
Reads only the GGUF header (ggml docs/gguf.md: magic, version, counts, metadata key/values,
tensor infos). Not run by CI; needs the llama.cpp peer.

    scripts/references/llama_quantize_types.py --llama-quantize ../peers/llama.cpp/build/bin/llama-quantize \\
        tests/models/data/*-tiny/model.gguf
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def tensor_types(path):
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def skip(t):
            if t == 8:
                f.seek(rd("Q"), 1)
            elif t == 9:
                et, n = rd("I"), rd("Q")
                for _ in range(n):
                    skip(et)
            else:
                f.seek(struct.calcsize("<" + SCALAR[t]), 1)

        assert f.read(4) == b"GGUF"
        rd("I")
        n_tensors, n_kv = rd("Q"), rd("Q")
        for _ in range(n_kv):
            f.seek(rd("Q"), 1)
            skip(rd("I"))
        out = {}
        for _ in range(n_tensors):
            name = f.read(rd("Q")).decode()
            for _ in range(rd("I")):
                rd("Q")
            out[name] = rd("I")
            rd("Q")
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-quantize", required=True)
    ap.add_argument("--types", nargs="+", default=["Q4_K_M", "Q5_K_M", "Q4_K_S"])
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    for model in a.models:
        result = {}
        for t in a.types:
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "q.gguf")
                subprocess.run([a.llama_quantize, model, out, t], check=True, capture_output=True)
                result[t] = tensor_types(out)
        dst = os.path.join(os.path.dirname(model), "llama_quantize_types.json")
        with open(dst, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", dst)


if __name__ == "__main__":
    main()
