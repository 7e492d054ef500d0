#!/usr/bin/env python3
"""Reference decodings of every GGUF tensor type flashserve reads, from the PyPI `gguf` package.

An implementation independent of ours: `gguf.quants.dequantize` (numpy) decodes.

Subcommand `blocks`: random blocks of every type (random bytes; the fp16 scale fields, and
every element of F16 / BF16 / F32, forced finite: an exponent of all ones is cleared to a
finite one, so no NaN / Inf, while zeros, subnormals and the largest magnitudes stay
possible). Half of the blocks keep full-range random scales, half get realistic ones
(|d| in [2^-14, 2^-2]). Output, one record a line ('#' starts a comment):
  type <name> <num_blocks> <num_elements> <fnv1a64 of the float32 LE output>
  hex <name> <up to 64 bytes of the blocks, hex>         (in order, concatenated)
  sample <name> <element index> <float32 bits hex>
and, for the types whose quantizer gguf-py implements with ggml's reference rounding
(Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16), its encoding of 1024 random values:
  qinput <up to 16 float32 values, hex of their LE bytes>   (in order, concatenated)
  quant <name> <fnv1a64 of the encoded bytes>

Subcommand `roundtrip`: runs our flashserve-make-gguf for a list of argument sets (every
type we write with --type, and the --ftype mixtures), reads each file with
`gguf.GGUFReader` and dequantizes every tensor with gguf.quants. Output:
  file <id> <make-gguf arguments, without --tokenizer-from / --out>
  tensor <id> <name> <type> <num_dims> <dims...> <fnv1a64 of raw bytes> <fnv1a64 of dequantized float32>
The C++ test rebuilds each file with the same arguments and requires identical types and
raw bytes (our quantizer is deterministic) and our decoding of them to hash the same.
The tokenizer source is a synthetic byte-level BPE vocabulary of 260 tokens written here
with gguf-py, the same as tests/unit/make_gguf/make_gguf_test_util.h writes.

Usage (venv outside the repo with gguf==0.19.0; numpy comes with it):
  python3 -m venv "$VENV" && "$VENV"/bin/pip install gguf==0.19.0
  "$VENV"/bin/python tools/golden/gguf_quants_golden.py blocks \\
      --out tests/data/gguf_quant_blocks.txt
  "$VENV"/bin/python tools/golden/gguf_quants_golden.py roundtrip \\
      --make-gguf build/bin/flashserve-make-gguf --out tests/data/gguf_quant_roundtrip.txt
"""
import argparse
import importlib.metadata
import os
import subprocess
import tempfile

import gguf
import gguf.quants
import numpy as np

Q = gguf.GGMLQuantizationType

# type -> (blocks to generate, byte offsets of the fp16 scale fields in a block)
BLOCK_TYPES = {
    Q.Q4_0: (32, [0]),
    Q.Q4_1: (32, [0, 2]),
    Q.Q5_0: (32, [0]),
    Q.Q5_1: (32, [0, 2]),
    Q.Q8_0: (32, [0]),
    Q.IQ4_NL: (32, [0]),
    Q.Q2_K: (8, [80, 82]),
    Q.Q3_K: (8, [108]),
    Q.Q4_K: (8, [0, 2]),
    Q.Q5_K: (8, [0, 2]),
    Q.Q6_K: (8, [208]),
    Q.IQ4_XS: (8, [0]),
}
PLAIN_ELEMENTS = 256  # F32 / F16 / BF16 elements
NUM_SAMPLES = 48
SEED = 20261201

# --ftype mixtures and --type files. 8 layers: llama.cpp's use_more_bits picks layers
# 0, 3, 6, 7 for Q6_K in Q4_K_M / Q5_K_M. hidden 256 / ffn 768 fit 256-element super-blocks;
# the hidden 160 / ffn 352 shape does not, so every K-type falls back (Q4_K -> Q5_0, ...).
SHAPE_K = ["--layers", "8", "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "768",
           "--context", "256"]
SHAPE_FALLBACK = ["--layers", "2", "--hidden", "160", "--heads", "5", "--kv-heads", "1", "--ffn", "352",
                  "--context", "256"]
SMALL = ["--layers", "1", "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
         "--context", "256"]
ROUNDTRIP_FILES = (
    [["--type", t, "--seed", "7"] + SMALL
     for t in ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q5_0", "q5_1", "iq4_nl", "iq4_xs"]]
    + [["--ftype", f, "--seed", "11"] + SHAPE_K for f in ["q4_k_m", "q5_k_m", "q6_k", "q8_0"]]
    + [["--ftype", "q4_k_m", "--seed", "13", "--tied-embeddings", "false"] + SHAPE_K]
    + [["--ftype", f, "--seed", "17"] + SHAPE_FALLBACK for f in ["q4_k_m", "q5_k_m"]]
    + [["--type", t, "--seed", "19"] + SHAPE_FALLBACK for t in ["q2_K", "q3_K", "iq4_xs"]]
)


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def finite_f16(bits: np.ndarray) -> np.ndarray:
    """Clears the top exponent bit of fp16 patterns whose exponent is all ones."""
    bits = bits.astype(np.uint16)
    return np.where((bits & 0x7C00) == 0x7C00, bits & ~np.uint16(0x4000), bits).astype(np.uint16)


def realistic_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    mag = np.exp2(rng.uniform(-14, -2, size=n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float16).view(np.uint16)


def random_blocks(rng, qtype, num_blocks, scale_offsets):
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(num_blocks, type_size), dtype=np.uint8)
    for off in scale_offsets:
        full = finite_f16(rng.integers(0, 1 << 16, size=num_blocks))
        real = realistic_f16(rng, num_blocks)
        vals = np.where(np.arange(num_blocks) < num_blocks // 2, full, real).astype("<u2")
        raw[:, off:off + 2] = vals.view(np.uint8).reshape(num_blocks, 2)
    return raw.reshape(-1)


def random_plain(rng, qtype):
    if qtype == Q.F32:
        bits = rng.integers(0, 1 << 32, size=PLAIN_ELEMENTS, dtype=np.uint64).astype(np.uint32)
        bits = np.where((bits & 0x7F800000) == 0x7F800000, bits & ~np.uint32(0x40000000), bits).astype("<u4")
    elif qtype == Q.F16:
        bits = finite_f16(rng.integers(0, 1 << 16, size=PLAIN_ELEMENTS)).astype("<u2")
    else:  # BF16
        bits = rng.integers(0, 1 << 16, size=PLAIN_ELEMENTS).astype(np.uint16)
        bits = np.where((bits & 0x7F80) == 0x7F80, bits & ~np.uint16(0x4000), bits).astype("<u2")
    return bits.view(np.uint8)


def cmd_blocks(args) -> None:
    rng = np.random.default_rng(SEED)
    lines = [f"# gguf=={importlib.metadata.version('gguf')} numpy=={np.__version__} seed {SEED}"]
    cases = [(t, random_plain(rng, t), PLAIN_ELEMENTS) for t in (Q.F32, Q.F16, Q.BF16)]
    for t, (n, offsets) in BLOCK_TYPES.items():
        block_size, _ = gguf.GGML_QUANT_SIZES[t]
        cases.append((t, random_blocks(rng, t, n, offsets), n * block_size))
    for t, raw, num_elements in cases:
        values = gguf.quants.dequantize(raw, t).astype("<f4").reshape(-1)
        assert values.size == num_elements, t.name
        assert np.all(np.isfinite(values)), t.name
        name = t.name.lower().replace("_k", "_K")
        lines.append(f"type {name} {raw.size} {num_elements} {fnv1a64(values.tobytes()):016x}")
        data = raw.tobytes()
        for i in range(0, len(data), 64):
            lines.append(f"hex {name} {data[i:i + 64].hex()}")
        bits = values.view("<u4")
        for i in rng.choice(num_elements, size=NUM_SAMPLES, replace=False):
            lines.append(f"sample {name} {int(i)} {int(bits[i]):08x}")
    # Weights-like values plus a few outliers, exact ties of the rounding rules avoided by
    # nothing in particular: the same inputs go through both implementations.
    qinput = (rng.normal(0, 0.02, size=1024) * np.where(rng.random(1024) < 0.01, 50, 1)).astype("<f4")
    data = qinput.tobytes()
    for i in range(0, len(data), 64):
        lines.append(f"qinput {data[i:i + 64].hex()}")
    for t in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.BF16):
        encoded = np.asarray(gguf.quants.quantize(qinput, t)).view(np.uint8).reshape(-1)
        lines.append(f"quant {t.name.lower()} {fnv1a64(encoded.tobytes()):016x}")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


def bytes_to_unicode() -> dict:
    """GPT-2's byte -> printable character map (byte-level BPE)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars)))


def write_tokenizer(path: str) -> None:
    byte_map = bytes_to_unicode()
    tokens = [byte_map[b] for b in range(256)] + ["he", "hel", "<s>", "</s>"]
    types = [1] * 258 + [3, 3]
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["h e", "he l"])
    w.add_bos_token_id(258)
    w.add_eos_token_id(259)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def cmd_roundtrip(args) -> None:
    lines = [f"# gguf=={importlib.metadata.version('gguf')} numpy=={np.__version__}"]
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = os.path.join(tmp, "tokenizer.gguf")
        write_tokenizer(tokenizer)
        for index, file_args in enumerate(ROUNDTRIP_FILES):
            path = os.path.join(tmp, f"file{index}.gguf")
            subprocess.run([args.make_gguf, "--tokenizer-from", tokenizer, "--out", path, "--threads", "1"]
                           + file_args, check=True, stdout=subprocess.DEVNULL)
            lines.append(f"file {index} {' '.join(file_args)}")
            for t in gguf.GGUFReader(path).tensors:
                raw = np.asarray(t.data).view(np.uint8).reshape(-1)
                values = gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4").reshape(-1)
                dims = [int(d) for d in t.shape]
                assert values.size == int(np.prod(dims)), t.name
                assert np.all(np.isfinite(values)), t.name
                name = t.tensor_type.name.lower().replace("_k", "_K")
                lines.append(f"tensor {index} {t.name} {name} {len(dims)} {' '.join(map(str, dims))} "
                             f"{fnv1a64(raw.tobytes()):016x} {fnv1a64(values.tobytes()):016x}")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("blocks")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_blocks)
    p = sub.add_parser("roundtrip")
    p.add_argument("--make-gguf", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_roundtrip)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
