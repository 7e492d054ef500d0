#!/usr/bin/env python3
"""Golden data for the tokenizer and chat-template tests, from independent implementations.

Subcommands (each writes one JSON file; see tests/data/README.md for the exact commands):

  llamacpp   token ids from llama.cpp's own tokenizer (PyPI llama-cpp-python,
             Llama(model_path, vocab_only=True)) for every corpus string, with three flag
             combinations, plus llama.cpp's detokenization of those ids.
  hf         the same corpus through HF `tokenizers` as transformers converts it from the
             GGUF (AutoTokenizer.from_pretrained(dir, gguf_file=...)); compared with the
             llama.cpp golden and the disagreements are printed.
  splits     pre-tokenizer pieces for the gpt2 / llama3 / qwen2 / qwen35 / smollm regexes, computed with
             the PyPI `regex` module (its own Unicode tables) on the original HF patterns.
  spm        a synthetic SentencePiece vocabulary written as a vocab-only GGUF (gguf-py) and
             tokenized by llama.cpp (byte fallback, leading space, scores).
  bpe        a synthetic byte-level BPE vocabulary written as vocab-only GGUFs with
             tokenizer.ggml.pre = llama-bpe / gpt-2 / qwen2, tokenized by llama.cpp on the corpus.
  chat       SmolLM2's own chat template (tokenizer.chat_template) rendered with jinja2 for
             a few conversations.
  chat-llamacpp  the same conversations through llama.cpp's built-in renderings of the
             chatml / llama2 (4 variants) / zephyr / llama3 families.

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


def token_to_piece_concat(llm, ids):
    """llama_token_to_piece(special=False) of each id, concatenated. (Llama.detokenize() is not
    used: it reads pieces through a 32-byte buffer and drops longer ones, e.g. SmolLM2's
    64-space token, and strips a space after BOS.)"""
    import ctypes
    import llama_cpp

    out = b""
    buf = ctypes.create_string_buffer(1024)
    for token in ids:
        n = llama_cpp.llama_token_to_piece(llm._model.vocab, token, buf, len(buf), 0, False)
        assert 0 <= n <= len(buf), (token, n)
        out += buf.raw[:n]
    return out


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
            case["decoded_hex"] = token_to_piece_concat(llm, ids).hex()
            cases.append(case)
    write_json(args.out, {
        "generator": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer)",
        "model": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "cases": cases,
    })


def gguf_tokenizer_dict(model_path):
    """tokenizer.ggml.* of the file in transformers' naming (read with gguf-py, no torch)."""
    from gguf import GGUFReader
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING

    reader = GGUFReader(model_path)
    out = {}
    for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items():
        field = reader.fields.get("tokenizer." + key)
        if field is not None:
            out[name] = field.contents()
    return out


def compare_with_golden(name, encode, golden):
    """encode(text) -> ids for the parse_special=True, add_special=False golden rows."""
    num_same = num_diff = 0
    for case in golden["cases"]:
        if case["add_special"] or not case["parse_special"] or "text" not in case:
            continue
        ids = encode(case["text"])
        if ids == case["ids"]:
            num_same += 1
        else:
            num_diff += 1
            print(f"[{name}] DIFF {case['text']!r}\n  llama.cpp {case['ids']}\n  {name} {ids}")
    print(f"[{name}] vs llama.cpp: {num_same} same, {num_diff} different")


def cmd_hf(args):
    """Two HF `tokenizers` (Rust) builds of the same vocabulary, compared with llama.cpp:
    'transformers-gguf': transformers' own GGUF conversion (convert_gguf_tokenizer);
    'smollm2-tokenizer-json': the pre-tokenizer of SmolLM2's original tokenizer.json,
    Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False)]."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, AddedToken
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    golden = json.load(open(args.golden, encoding="utf-8"))
    d = gguf_tokenizer_dict(args.model)
    converted, _ = convert_gguf_tokenizer("llama", dict(d))
    print(f"transformers-gguf pre_tokenizer: {converted.pre_tokenizer.__getstate__()}")
    compare_with_golden("transformers-gguf",
                        lambda t: converted.encode(t, add_special_tokens=False).ids, golden)

    vocab = {tok: i for i, tok in enumerate(d["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in d["merges"]]
    original = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    original.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    original.decoder = decoders.ByteLevel()
    original.add_special_tokens([AddedToken(t, special=True) for t, ty
                                 in zip(d["tokens"], d["token_type"]) if ty == 3])
    compare_with_golden("smollm2-tokenizer-json",
                        lambda t: original.encode(t, add_special_tokens=False).ids, golden)


# The original HF patterns (not llama.cpp's adaptations), so this is an independent check.
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
          r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
         r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# Qwen3.5's tokenizer.json pattern (as quoted in llama.cpp's llama-vocab.cpp): Qwen2's with
# combining marks (\p{M}) inside letter runs.
QWEN35 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"""
          r""" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPLIT_SPECS = {
    "gpt-2": [GPT2],
    "smollm": [r"\p{N}", GPT2],  # HF: Digits(individual_digits=True), then ByteLevel
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
    "qwen35": [QWEN35],
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


# A small SentencePiece-style vocabulary (tokenizer.ggml.model = "llama"), TinyLlama-shaped:
# <unk>, <s>, </s>, 256 byte tokens, then pieces whose score falls with their index.
SPM_PIECES = (
    ["\u2581", "\u2581\u2581", "\u2581\u2581\u2581\u2581"] + list("abcdefghijklmnopqrstuvwxyz") +
    list("HTW,.!'?0123456789") +
    ["\u2581t", "he", "\u2581the", "\u2581a", "in", "er", "on", "\u2581h", "ll", "llo", "\u2581hello",
     "\u2581w", "or", "\u2581wor", "ld", "\u2581world", "\u2581th", "is", "\u2581is", "\u2581this",
     "\u2581H", "\u2581He", "\u2581Hello", "ing", "\u2581s", "\u2581st", "\u2581str", "\u2581string",
     "\u4e2d", "\u6587", "\u00e9", "\u2581caf", "\u2581caf\u00e9", "\u2581T", "\u2581W", "12", "\u2581!",
     "'s", "\u2581don", "'t"]
)
SPM_TEXTS = [
    "", " ", "hello", "Hello world", " hello", "hello  world", "the string", "this is a test",
    "café", "中文", "中文字", "😀", "don't", "It's 2024!", "a\nb", "\t tab", "   three spaces",
    "Hello<s>world", "<s>hello</s>", "x<unk>y", "ÿ", "zzz", "H\u00e9llo", "WTH?", "hello world " * 3,
    "\u2581literal", "trailing ",
]


def vocab_only_writer(path):
    """A GGUF writer for a vocab-only llama file: llama.cpp wants a minimal set of hyper-
    parameters even with vocab_only=True; the tokenizer keys are added by the caller."""
    import gguf  # only the golden commands need it, like llama_cpp
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def spm_vocab():
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)
    for i, piece in enumerate(SPM_PIECES):
        tokens.append(piece)
        scores.append(-float(i))
        types.append(1)
    return tokens, scores, types


def cmd_spm(args):
    import tempfile
    import gguf
    import llama_cpp
    from llama_cpp import Llama

    tokens, scores, types = spm_vocab()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spm-vocab.gguf")
        w = vocab_only_writer(path)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        cases = []
        for text in SPM_TEXTS:
            data = text.encode("utf-8")
            for add_special, parse_special in FLAG_SETS:
                ids = llm.tokenize(data, add_bos=add_special, special=parse_special)
                case = case_header(data)
                case.update(add_special=add_special, parse_special=parse_special, ids=ids)
                cases.append(case)
    write_json(args.out, {
        "generator": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer)",
        "vocab": {"tokens": tokens, "scores": scores, "token_types": types,
                  "unk_id": 0, "bos_id": 1, "eos_id": 2},
        "cases": cases,
    })


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


# Small byte-level BPE vocabularies for the other pre-tokenizers: the 256 byte tokens, tokens
# built by BPE_MERGES, tokens no merge builds (reachable only through llama3's
# ignore_merges), and special tokens (control and one user-defined).
BPE_MERGES = [
    "\u0120 t", "h e", "i n", "\u0120 a", "e r", "o n", "\u0120t he", "r e", "\u0120 s", "a t", "o r",
    "e n", "\u0120 w", "l l", "\u0120 h", "\u0120h e", "l o", "ll o", "\u0120he llo", "\u0120w or",
    "l d", "\u0120wor ld", "i s", "\u0120 i", "\u0120i s", "' s", "' t", "1 2", "12 3", "\u0120 1",
    "\u010a \u010a", "\u0120 \u0120", "\u0120\u0120 \u0120\u0120", "\u00c3 \u00a9", "\u00e4 \u00b8",
    "\u00e4\u00b8 \u0143", "T he", "\u0120 The",
]
BPE_WHOLE_WORDS = ["\u0120quick", "\u0120brown", "hello", "456", "\u0120fox"]
BPE_SPECIAL = [("<|begin_of_text|>", 3), ("<|eot_id|>", 3), ("<|im_start|>", 3), ("<tool>", 4)]
BPE_PRES = ["llama-bpe", "gpt-2", "qwen2"]


def bpe_vocab():
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    byte_chars = bytes_to_unicode()
    tokens = [byte_chars[b] for b in range(256)]
    types = [1] * 256
    for merge in BPE_MERGES:
        left, right = merge.split(" ")
        assert left in tokens and right in tokens, merge
        tokens.append(left + right)
        types.append(1)
    for word in BPE_WHOLE_WORDS:
        tokens.append(word)
        types.append(1)
    for text, token_type in BPE_SPECIAL:
        tokens.append(text)
        types.append(token_type)
    assert len(set(tokens)) == len(tokens)
    return tokens, types


def cmd_bpe(args):
    import tempfile
    import gguf
    import llama_cpp
    from llama_cpp import Llama

    tokens, types = bpe_vocab()
    bos_id = tokens.index("<|begin_of_text|>")
    eos_id = tokens.index("<|eot_id|>")
    corpus = load_corpus(args.corpus)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in BPE_PRES:
            path = os.path.join(tmp, f"bpe-{pre}.gguf")
            w = vocab_only_writer(path)
            w.add_tokenizer_model("gpt2")
            w.add_tokenizer_pre(pre)
            w.add_token_list(tokens)
            w.add_token_types(types)
            w.add_token_merges(BPE_MERGES)
            w.add_bos_token_id(bos_id)
            w.add_eos_token_id(eos_id)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
            cases = []
            for data in corpus:
                for add_special, parse_special in [(False, False), (True, True)]:
                    case = case_header(data)
                    case.update(add_special=add_special, parse_special=parse_special,
                                ids=llm.tokenize(data, add_bos=add_special, special=parse_special))
                    cases.append(case)
            results[pre] = cases
            del llm
    write_json(args.out, {
        "generator": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer)",
        "vocab": {"tokens": tokens, "token_types": types, "merges": BPE_MERGES,
                  "bos_id": bos_id, "eos_id": eos_id},
        "cases": results,
    })


LLAMACPP_CHAT_FAMILIES = ["chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
                          "zephyr", "llama3"]


def cmd_chat_llamacpp(args):
    """llama.cpp's built-in renderings (llama_chat_apply_template) of the families by name."""
    import ctypes
    import llama_cpp

    cases = []
    for family in LLAMACPP_CHAT_FAMILIES:
        for messages in CONVERSATIONS:
            msgs = (llama_cpp.llama_chat_message * len(messages))()
            keep = []
            for i, m in enumerate(messages):
                role, content = m["role"].encode(), m["content"].encode()
                keep += [role, content]
                msgs[i].role, msgs[i].content = role, content
            for add_generation_prompt in (False, True):
                buf = ctypes.create_string_buffer(1 << 16)
                n = llama_cpp.llama_chat_apply_template(family.encode(), msgs, len(messages),
                                                        add_generation_prompt, buf, len(buf))
                assert 0 <= n < len(buf), (family, n)
                cases.append({"family": family, "messages": messages,
                              "add_generation_prompt": add_generation_prompt,
                              "rendered": buf.raw[:n].decode("utf-8")})
    write_json(args.out, {"generator": f"llama-cpp-python {llama_cpp.__version__} "
                                       "(llama_chat_apply_template)", "cases": cases})


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["llamacpp", "hf", "splits", "chat", "chat-llamacpp", "spm", "bpe"])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--golden", default=os.path.join(REPO, "tests", "data",
                                                         "tokenizer_smollm2_llamacpp.json"),
                        help="llama.cpp golden to compare with (hf)")
    parser.add_argument("--out", help="output JSON path")
    args = parser.parse_args()
    commands = {"llamacpp": cmd_llamacpp, "hf": cmd_hf, "splits": cmd_splits, "chat": cmd_chat,
                "chat-llamacpp": cmd_chat_llamacpp, "spm": cmd_spm, "bpe": cmd_bpe}
    commands[args.command](args)


if __name__ == "__main__":
    main()
