#!/usr/bin/env python3
"""Golden renderings of real chat templates by Python's jinja2 (chat_template_test).

Reads every models/templates/*.jinja that llama.cpp ships (fetched by
scripts/fetch-test-vocab.sh from the llama-cpp-python 0.3.36 sdist) plus the
tokenizer.chat_template of the vocabulary GGUFs qwen2 and phi-3, and renders each for the
conversations below, with add_generation_prompt false and true, and (templates that read it)
enable_thinking = false. The environment is the one Hugging Face transformers renders chat
templates with: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension, a tojson filter with ensure_ascii=False, raise_exception() and
strftime_now() (fixed to 2026-12-01 so the golden is reproducible).

bos_token is rendered as "": our renderers never write BOS into the text, the tokenizer adds
it (tokenizer.ggml.add_bos_token), as llama.cpp does. eos_token is "<|endoftext|>".

A rendering that raises (raise_exception or any other jinja2 error) is recorded as
{"error": message}. Otherwise every case records "fnv1a64", the 64-bit FNV-1a hash of the
rendered UTF-8 bytes (hex), and the templates of FULL_TEXT also the text itself ("rendered"),
which keeps the file small while every template is checked.

  python tools/golden/chat_template_golden.py --vocab build/test-data/vocab \
      --out tests/data/chat_template_jinja2.json
"""
import argparse
import datetime
import hashlib
import json
import os
import sys

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "system", "content": " Be brief.\n"}, {"role": "user", "content": "Line one\nline two "},
     {"role": "assistant", "content": " spaced "}, {"role": "user", "content": "ünïcödé 😀 中文"}],
    [{"role": "user", "content": "Why?"},
     {"role": "assistant", "content": "<think>\nFirst thought.\n</think>\n\nBecause."},
     {"role": "user", "content": "Sure?"}],
    [{"role": "user", "content": "Q"},
     {"role": "assistant", "content": "<think>\nreasoning\n</think>\n\nA"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "x"}],
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    [{"role": "assistant", "content": "I start."}, {"role": "user", "content": "ok"}],
    [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Checking."},
     {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "tool", "content": "sunny"},
     {"role": "assistant", "content": "21 and sunny."}],
    [{"role": "user", "content": "  padded  "}],
    [{"role": "user", "content": "Hi"}, {"role": "system", "content": "Late system."},
     {"role": "assistant", "content": "Hello."}],
]

FIXED_NOW = datetime.datetime(2026, 12, 1, 12, 0, 0)

# Templates of the families chat_template.cc renders (Qwen, Llama 3, Phi-3, Gemma): full text.
FULL_TEXT = {
    "templates/Qwen-Qwen2.5-7B-Instruct.jinja", "templates/Qwen-Qwen3-0.6B.jinja",
    "templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
    "templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
    "templates/meta-llama-Llama-3.3-70B-Instruct.jinja",
    "templates/microsoft-Phi-3.5-mini-instruct.jinja", "templates/google-gemma-2-2b-it.jinja",
    "ggml-vocab-qwen2.gguf", "ggml-vocab-phi-3.gguf",
}


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_env():
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def render_all(env, name, source):
    try:
        template = env.from_string(source)
    except Exception as e:  # noqa: BLE001 - a template jinja2 cannot parse is recorded as such
        return {"name": name, "sha256": sha256_text(source), "parse_error": str(e), "cases": []}
    cases = []
    thinking = [None, False] if "enable_thinking" in source else [None]
    for conv_index, messages in enumerate(CONVERSATIONS):
        for add_gen in (False, True):
            for enable_thinking in thinking:
                kwargs = {"messages": messages, "add_generation_prompt": add_gen,
                          "bos_token": "", "eos_token": "<|endoftext|>"}
                if enable_thinking is not None:
                    kwargs["enable_thinking"] = enable_thinking
                case = {"conversation": conv_index, "add_generation_prompt": add_gen}
                if enable_thinking is not None:
                    case["enable_thinking"] = enable_thinking
                try:
                    rendered = template.render(**kwargs)
                    case["fnv1a64"] = fnv1a64(rendered)
                    if name in FULL_TEXT:
                        case["rendered"] = rendered
                except Exception as e:  # noqa: BLE001
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    return {"name": name, "sha256": sha256_text(source), "cases": cases}


def gguf_template(path):
    from gguf import GGUFReader

    field = GGUFReader(path).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", required=True, help="folder of scripts/fetch-test-vocab.sh")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import jinja2

    env = make_env()
    templates = []
    tdir = os.path.join(args.vocab, "templates")
    for fname in sorted(os.listdir(tdir)):
        if fname.endswith(".jinja"):
            with open(os.path.join(tdir, fname), encoding="utf-8") as f:
                templates.append(render_all(env, "templates/" + fname, f.read()))
    for vocab in ("qwen2", "phi-3"):
        path = os.path.join(args.vocab, f"ggml-vocab-{vocab}.gguf")
        templates.append(render_all(env, f"ggml-vocab-{vocab}.gguf", gguf_template(path)))
    out = {"generator": f"jinja2 {jinja2.__version__} (transformers' chat-template environment)",
           "source": "llama-cpp-python 0.3.36 sdist, vendor/llama.cpp/models",
           "date_for_strftime_now": FIXED_NOW.strftime("%Y-%m-%d"),
           "bos_token": "", "eos_token": "<|endoftext|>",
           "conversations": CONVERSATIONS, "templates": templates}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"wrote {args.out}: {len(templates)} templates", file=sys.stderr)


if __name__ == "__main__":
    main()
