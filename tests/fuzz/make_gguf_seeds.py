#!/usr/bin/env python3
"""Writes small valid GGUF v3 files as seeds for fuzz_gguf (called by make_seeds.sh).

Usage: make_gguf_seeds.py OUT_DIR"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q8_0 = 0, 1, 2, 3, 8
BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20),
         GGML_Q8_0: (32, 34)}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(value(etype, i) for i in items)
    return struct.pack(SCALAR[vtype], v)


def gguf(kvs, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + value(vtype, v)
    offset, data = 0, b""
    for name, dims, gtype in tensors:
        n = 1
        for d in dims:
            n *= d
        per, nbytes = BLOCK[gtype]
        size = n // per * nbytes
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, offset)
        data += bytes((i * 37 + 11) % 251 for i in range(size))
        pad = (-len(data)) % alignment
        data += b"\0" * pad
        offset = len(data)
    out += b"\0" * ((-len(out)) % alignment)
    return out + data


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    spm_tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + [
        "\u2581", "\u2581the", "he", "llo", "\u2581hello"]
    spm_types = [2, 3, 3] + [6] * 256 + [1] * 5
    bpe_tokens = ["a", "b", "c", "ab", "bc", "abc", "\u0120", "<|endoftext|>"]
    seeds = {
        "every_value_type.gguf": gguf([
            ("general.architecture", STR, "llama"), ("general.name", STR, "seed"),
            ("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 700), ("i16", I16, -700),
            ("u32", U32, 70000), ("i32", I32, -70000), ("f32", F32, 1.5), ("bool", BOOL, True),
            ("u64", U64, 1 << 40), ("i64", I64, -(1 << 40)), ("f64", F64, 2.25),
            ("arr.i32", ARR, (I32, [1, -2, 3])), ("arr.str", ARR, (STR, ["x", "yz"])),
            ("arr.arr", ARR, (ARR, [(U8, [1, 2]), (U8, [])])),
        ], []),
        "tensors.gguf": gguf([("general.architecture", STR, "llama"),
                              ("general.alignment", U32, 32)],
                             [("f32", [4, 2], GGML_F32), ("f16", [8], GGML_F16),
                              ("q4_0", [32, 2], GGML_Q4_0), ("q4_1", [64], GGML_Q4_1),
                              ("q8_0", [32], GGML_Q8_0)]),
        "spm_vocab.gguf": gguf([
            ("tokenizer.ggml.model", STR, "llama"),
            ("tokenizer.ggml.tokens", ARR, (STR, spm_tokens)),
            ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(spm_tokens))])),
            ("tokenizer.ggml.token_type", ARR, (I32, spm_types)),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
            ("tokenizer.ggml.unknown_token_id", U32, 0),
            ("tokenizer.chat_template", STR, "llama2"),
        ], []),
        "bpe_vocab.gguf": gguf([
            ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "smollm"),
            ("tokenizer.ggml.tokens", ARR, (STR, bpe_tokens)),
            ("tokenizer.ggml.merges", ARR, (STR, ["a b", "b c", "ab c"])),
            ("tokenizer.ggml.eos_token_id", U32, 7),
            ("tokenizer.chat_template", STR,
             "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
             "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
        ], []),
    }
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
