#!/usr/bin/env python3
"""Reference dequantization of a few tensors of a GGUF file, from the PyPI `gguf` package.

An implementation independent of ours: `gguf.GGUFReader` parses the file and
`gguf.quants.dequantize` decodes each tensor to float32 with numpy. For every selected tensor
the golden stores its type and dims (ggml order, dims[0] fastest), a FNV-1a 64-bit hash of
the whole dequantized tensor (float32 little-endian bytes, ggml element order) and the
exact float32 bit patterns of a sample of elements (the first 64, which cover the nibble
order of two blocks, and 64 spread over the tensor). The C++ test compares bit for bit.

Output format (text, one record a line; '#' starts a comment):
  tensor <name> <type> <num_dims> <dims...> <fnv1a64 hex>
  sample <name> <element index> <float32 bits hex>

Usage (venv outside the repo with gguf==0.19.0 and numpy):
  /tmp/gguf-venv/bin/python tools/golden/gguf_dequant_golden.py \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out tests/data/gguf_smollm2_samples.txt
"""
import argparse
import importlib.metadata

import gguf
import gguf.quants
import numpy as np

TENSORS = [
    "token_embd.weight",        # Q8_0
    "blk.0.attn_q.weight",      # Q4_1
    "blk.0.attn_norm.weight",   # F32
    "blk.29.ffn_down.weight",   # Q4_1, last layer
    "output_norm.weight",       # F32
]
NUM_HEAD_SAMPLES = 64
NUM_SPREAD_SAMPLES = 64


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of `data` (offset basis 0xcbf29ce484222325, prime 0x100000001b3)."""
    h = 0xCBF29CE484222325
    prime = 0x100000001B3
    mask = 0xFFFFFFFFFFFFFFFF
    for b in data:
        h = ((h ^ b) * prime) & mask
    return h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    reader = gguf.GGUFReader(args.model)
    by_name = {t.name: t for t in reader.tensors}
    lines = [
        f"# gguf=={importlib.metadata.version('gguf')} numpy=={np.__version__}",
        f"# model {args.model.split('/')[-1]}",
    ]
    for name in TENSORS:
        t = by_name[name]
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4").reshape(-1)
        dims = [int(d) for d in t.shape]  # ggml order
        assert values.size == int(np.prod(dims)), name
        digest = fnv1a64(values.tobytes())
        lines.append(f"tensor {name} {t.tensor_type.name} {len(dims)} {' '.join(map(str, dims))} {digest:016x}")
        stride = values.size // NUM_SPREAD_SAMPLES
        indices = list(range(NUM_HEAD_SAMPLES)) + [i * stride + (i * 7919) % stride for i in range(NUM_SPREAD_SAMPLES)]
        bits = values.view("<u4")
        for i in indices:
            lines.append(f"sample {name} {i} {int(bits[i]):08x}")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
