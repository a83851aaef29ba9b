#!/usr/bin/env python3
"""Regenerates jinja2_cases.json: every template in jinja2_cases.py rendered by Python Jinja2
in the environment transformers' apply_chat_template builds (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False),
raise_exception, strftime_now fixed at 2026-11-29 12:00:00).

    python3 tests/chat_template/gen_jinja2_cases.py   # needs jinja2 (3.1.x)

It also writes model_template_cases.json: the eight real templates of
../shared/testdata/chat_templates with conversations the reference file lacks (tools, tool
calls with dict and string arguments, tool results, reasoning content, odd whitespace) and
chat_template_kwargs (enable_thinking).
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from jinja2_cases import CASES, MODEL_CONVERSATIONS, MODEL_TOOLS  # noqa: E402

SHARED_TEMPLATES = os.path.join(HERE, "..", "..", "..", "shared", "testdata", "chat_templates")


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime(2026, 11, 29, 12, 0, 0).strftime(fmt)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    out = {"renderer": f"Python Jinja2 {jinja2.__version__}", "cases": []}
    for name, src, ctx in CASES:
        case = {"name": name, "template": src, "context": ctx}
        try:
            case["expected"] = env.from_string(src).render(**ctx)
        except Exception as e:  # the error text is what a conforming renderer reports
            case["error"] = str(e)
            case["error_type"] = type(e).__name__
        out["cases"].append(case)
    with open(os.path.join(HERE, "jinja2_cases.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")

    model = {"renderer": out["renderer"], "tools": MODEL_TOOLS,
             "conversations": {k: v[0] for k, v in MODEL_CONVERSATIONS.items()}, "cases": []}
    for fname in sorted(os.listdir(SHARED_TEMPLATES)):
        if not fname.endswith(".jinja"):
            continue
        with open(os.path.join(SHARED_TEMPLATES, fname), encoding="utf-8") as f:
            tpl = env.from_string(f.read())
        for conv, (messages, with_tools) in MODEL_CONVERSATIONS.items():
            for kwargs in ({}, {"enable_thinking": False}):
                for gen in (False, True):
                    ctx = dict(messages=messages, tools=MODEL_TOOLS if with_tools else None, documents=None,
                               add_generation_prompt=gen, bos_token="<s>", eos_token="</s>", **kwargs)
                    case = {"template": fname[:-len(".jinja")], "conversation": conv, "tools": with_tools,
                            "chat_template_kwargs": kwargs, "add_generation_prompt": gen}
                    try:
                        case["expected"] = tpl.render(**ctx)
                    except Exception as e:
                        case["error"] = str(e)
                    model["cases"].append(case)
    with open(os.path.join(HERE, "model_template_cases.json"), "w", encoding="utf-8") as f:
        json.dump(model, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
