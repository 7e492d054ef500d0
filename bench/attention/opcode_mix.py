#!/usr/bin/env python3
"""Executed SASS instructions by opcode, from ncu source pages (`ncu -i REPORT --page source
--csv --print-source sass`, plain or .gz), one column per page: what two kernels (ours and a
peer's) spend their issue on, side by side, with each opcode's count per executed HGMMA (the
tensor work's unit, so kernels of different tile shapes compare). The opcode is the
instruction's first word after any predicate, with its modifiers (MUFU.EX2, HGMMA.64x128x16...)
cut to the first two parts.

    opcode_mix.py NAME=PAGE.csv[.gz] [NAME=PAGE ...] [--top N]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixed_share import EXECUTED, SAMPLES, source_page


def opcode(source):
    """'@!P0 MUFU.EX2 R1, R2' -> 'MUFU.EX2'; 'HGMMA.64x128x16.F32.BF16 ...' -> 'HGMMA.64x128x16'."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    if not words:
        return "?"
    return ".".join(words[0].rstrip(";").split(".")[:2])


def mix(path):
    """{opcode: (executed warp instructions, stall samples)} of one page."""
    out = {}
    for r in source_page(path):
        op = opcode(r["Source"].strip())
        e, s = out.get(op, (0, 0))
        out[op] = (e + int(r[EXECUTED] or 0), s + int(r[SAMPLES] or 0))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", help="NAME=PATH of an ncu source-page CSV")
    ap.add_argument("--top", type=int, default=30, help="opcodes listed (by the first page's count)")
    a = ap.parse_args(argv)
    names, mixes = [], []
    for spec in a.pages:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"{spec}: expected NAME=PATH")
        names.append(name)
        mixes.append(mix(path))
    hgmma = [sum(e for op, (e, _) in m.items() if op.startswith("HGMMA")) for m in mixes]
    total = [sum(e for e, _ in m.values()) for m in mixes]
    ops = sorted(set().union(*mixes), key=lambda op: -max(m.get(op, (0, 0))[0] for m in mixes))
    print("| opcode | " + " | ".join(f"{n} executed | {n} per HGMMA" for n in names) + " |")
    print("|---|" + "---|---|" * len(names))
    print("| all | " + " | ".join(f"{t} | {t / h:.1f}" if h else f"{t} | n/a"
                                   for t, h in zip(total, hgmma)) + " |")
    for op in ops[:a.top]:
        cells = []
        for m, h in zip(mixes, hgmma):
            e = m.get(op, (0, 0))[0]
            cells.append(f"{e} | {e / h:.2f}" if h else f"{e} | n/a")
        print(f"| {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
