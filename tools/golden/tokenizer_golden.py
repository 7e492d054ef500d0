#!/usr/bin/env python3
"""Golden data for the tokenizer and chat-template tests, from independent implementations.

Subcommands (each writes one JSON file; see tests/data/README.md for the exact commands):

  llamacpp   token ids from llama.cpp's own tokenizer (PyPI llama-cpp-python,
             Llama(model_path, vocab_only=True)) for every corpus string, with three flag
             combinations, plus llama.cpp's detokenization of those ids.
  hf         the same corpus through HF `tokenizers` as transformers converts it from the
             GGUF (AutoTokenizer.from_pretrained(dir, gguf_file=...)); compared with the
             llama.cpp golden and the disagreements are printed.
  splits     pre-tokenizer pieces for the gpt2 / llama3 / qwen2 / smollm regexes, computed with
             the PyPI `regex` module (its own Unicode tables) on the original HF patterns.
  chat       SmolLM2's own chat template (tokenizer.chat_template) rendered with jinja2 for
             a few conversations.

Corpus: tools/golden/tokenizer_corpus.json, a JSON list whose entries are strings or
{"hex": "..."} for byte strings that are not valid UTF-8.
"""
import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_CORPUS = os.path.join(HERE, "tokenizer_corpus.json")

# (add_special, parse_special) combinations recorded per corpus string.
FLAG_SETS = [(False, False), (False, True), (True, True)]


def load_corpus(path):
    out = []
    for entry in json.load(open(path, encoding="utf-8")):
        if isinstance(entry, str):
            out.append(entry.encode("utf-8"))
        else:
            out.append(bytes.fromhex(entry["hex"]))
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def case_header(data):
    case = {"hex": data.hex()}
    try:
        case["text"] = data.decode("utf-8")  # for people reading the file; tests use hex
    except UnicodeDecodeError:
        pass
    return case


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}", file=sys.stderr)


def cmd_llamacpp(args):
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    cases = []
    for data in load_corpus(args.corpus):
        for add_special, parse_special in FLAG_SETS:
            ids = llm.tokenize(data, add_bos=add_special, special=parse_special)
            case = case_header(data)
            case.update(add_special=add_special, parse_special=parse_special, ids=ids)
            # llama.cpp's detokenization with special tokens removed (skip_special).
            case["decoded_hex"] = llm.detokenize(ids, special=False).hex()
            cases.append(case)
    write_json(args.out, {
        "generator": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer)",
        "model": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "cases": cases,
    })


def cmd_hf(args):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(args.model)),
                                        gguf_file=os.path.basename(args.model))
    golden = json.load(open(args.golden, encoding="utf-8"))
    num_same = num_diff = 0
    for case in golden["cases"]:
        if case["add_special"] or not case["parse_special"] or "text" not in case:
            continue  # HF parses special tokens always; compare the parse_special=True rows
        ids = tok.encode(case["text"], add_special_tokens=False)
        if ids == case["ids"]:
            num_same += 1
        else:
            num_diff += 1
            print(f"DIFF {case['text']!r}\n  llama.cpp {case['ids']}\n  hf        {ids}")
            print(f"  llama.cpp pieces {tok.convert_ids_to_tokens(case['ids'])}")
            print(f"  hf pieces        {tok.convert_ids_to_tokens(ids)}")
    print(f"hf vs llama.cpp: {num_same} same, {num_diff} different")
    print(f"hf pre_tokenizer: {tok.backend_tokenizer.pre_tokenizer.__getstate__()}")


# The original HF patterns (not llama.cpp's adaptations), so this is an independent check.
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
          r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
         r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPLIT_SPECS = {
    "gpt-2": [GPT2],
    "smollm": [r"\p{N}", GPT2],  # HF: Digits(individual_digits=True), then ByteLevel
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
}


def regex_split(patterns, text):
    import regex
    pieces = [text]
    for pattern in patterns:
        compiled = regex.compile(pattern)
        out = []
        for piece in pieces:
            pos = 0
            for m in compiled.finditer(piece):
                if m.start() > pos:
                    out.append(piece[pos:m.start()])
                out.append(m.group())
                pos = m.end()
            if pos < len(piece):
                out.append(piece[pos:])
        pieces = out
    return pieces


def cmd_splits(args):
    import regex
    cases = []
    for data in load_corpus(args.corpus):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        case = {"hex": data.hex(), "text": text, "pieces": {}}
        for name, patterns in SPLIT_SPECS.items():
            case["pieces"][name] = [p.encode("utf-8").hex() for p in regex_split(patterns, text)]
        cases.append(case)
    write_json(args.out, {"generator": f"python regex {regex.__version__}", "cases": cases})


CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Line one\nline two "},
     {"role": "assistant", "content": " spaced "}, {"role": "user", "content": "ünïcödé 😀 中文"}],
    [{"role": "assistant", "content": "I start."}, {"role": "user", "content": "ok"}],
    [{"role": "user", "content": ""}],
]


def cmd_chat(args):
    import jinja2
    from gguf import GGUFReader

    reader = GGUFReader(args.model)
    field = reader.fields["tokenizer.chat_template"]
    template_text = bytes(field.parts[field.data[0]]).decode("utf-8")
    env = jinja2.Environment()
    template = env.from_string(template_text)
    cases = []
    for messages in CONVERSATIONS:
        for add_generation_prompt in (False, True):
            rendered = template.render(messages=messages,
                                       add_generation_prompt=add_generation_prompt,
                                       bos_token="<|im_start|>", eos_token="<|im_end|>")
            cases.append({"messages": messages, "add_generation_prompt": add_generation_prompt,
                          "rendered": rendered})
    write_json(args.out, {"generator": f"jinja2 {jinja2.__version__}",
                          "model": os.path.basename(args.model),
                          "template": template_text, "cases": cases})


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["llamacpp", "hf", "splits", "chat"])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--golden", default=os.path.join(REPO, "tests", "data",
                                                         "tokenizer_smollm2_llamacpp.json"),
                        help="llama.cpp golden to compare with (hf)")
    parser.add_argument("--out", help="output JSON path")
    args = parser.parse_args()
    {"llamacpp": cmd_llamacpp, "hf": cmd_hf, "splits": cmd_splits, "chat": cmd_chat}[args.command](args)


if __name__ == "__main__":
    main()
