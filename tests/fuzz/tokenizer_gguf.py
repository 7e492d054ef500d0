#!/usr/bin/env python3
"""Copies a GGUF file's tokenizer: the `general.*` and `tokenizer.*` metadata, verbatim, and no
tensors. fuzz_tokenizer needs only these (tokenizer_from_gguf), so scripts/fuzz-bundle.sh
carries this small file instead of the whole model.

Usage: tokenizer_gguf.py MODEL.gguf OUT.gguf"""
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SIZE = {U8: 1, I8: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, BOOL: 1, U64: 8, I64: 8, F64: 8}


def skip_value(buf, pos, vtype):
    """The offset just past a value of type `vtype` starting at `pos`."""
    if vtype == STR:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == ARR:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in SIZE:
            return pos + SIZE[etype] * count
        for _ in range(count):
            pos = skip_value(buf, pos, etype)
        return pos
    if vtype not in SIZE:
        raise ValueError(f"unknown GGUF value type {vtype} at offset {pos}")
    return pos + SIZE[vtype]


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        buf = f.read()
    if buf[:4] != b"GGUF":
        raise SystemExit(f"{src}: not a GGUF file")
    version, _, num_kvs = struct.unpack_from("<IQQ", buf, 4)
    pos = 24
    kept, alignment = [], 32
    for _ in range(num_kvs):
        start = pos
        (n,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos = skip_value(buf, pos + 4, vtype)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos - 4)
        if key.startswith("general.") or key.startswith("tokenizer."):
            kept.append(buf[start:pos])
    out = b"GGUF" + struct.pack("<IQQ", version, 0, len(kept)) + b"".join(kept)
    out += b"\0" * ((-len(out)) % alignment)
    with open(dst, "wb") as f:
        f.write(out)
    print(f"{dst}: {len(kept)} of {num_kvs} metadata keys, {len(out)} bytes")


if __name__ == "__main__":
    main()
