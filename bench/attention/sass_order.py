#!/usr/bin/env python3
"""The order of the waits, exponentials and GEMM issues in our Hopper prefill kernels' SASS.

  bench/attention/sass_order.py BINARY [--cuobjdump PATH] [--kernel REGEX]

Disassembles BINARY (a program linked with flashserve_kernels, e.g. build/bin/attention_bench)
with cuobjdump (default: build/dev-tools/cuobjdump from scripts/fetch-cuobjdump.sh, else the one
on PATH) and prints, for each sm_90a instantiation of attention_prefill_sm90_ws_kernel (or those
matching --kernel), the sequence of the events that decide the consumers' overlap, runs of one
kind collapsed: named-barrier syncs (the GEMM-issue turns), HGMMA issues, WARPGROUP.DEPBAR waits
(`wait<=N`: until at most N wgmma groups are in flight) and MUFU.EX2 (the softmax's
exponentials). In the main loop the exponentials must sit between `wait<=1` (S_n done) and
`wait<=0` (P_{n-1} V_{n-1} done); a `wait<=0` before them means each warpgroup's softmax runs
after its own P V instead of under it (NOTES.md, v14b). Exit status 1 when that happens in
any kernel printed. That is a fact about the schedule, not a verdict on speed: v14b forced the
wait back after the softmax and measured 2 % slower (NOTES.md, v14b's outcome), so the check
is for reading a build, not for gating one.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass


def events(sass_lines):
    out = []
    for line in sass_lines:
        m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", line)
        if not m:
            continue
        op, args = m.group(1), m.group(2)
        if op.startswith("HGMMA"):
            out.append("HGMMA")
        elif op.startswith("WARPGROUP.DEPBAR"):
            out.append("wait<=" + str(int(args.split(",")[-1].strip(), 16)))
        elif op.startswith("MUFU.EX2"):
            out.append("EX2")
        elif op.startswith("BAR.SYNC") and not args.strip().startswith("0x0"):
            out.append("turn")
    collapsed = []
    for e in out:
        if collapsed and collapsed[-1][0] == e:
            collapsed[-1][1] += 1
        else:
            collapsed.append([e, 1])
    return collapsed


def overlap_broken(seq):
    """True when a wait<=1 is followed by a wait<=0 before any EX2 (the main loop's shape)."""
    for i, (e, _) in enumerate(seq):
        if e != "wait<=1":
            continue
        for f, _ in seq[i + 1:]:
            if f == "EX2":
                break
            if f == "wait<=0":
                return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--kernel", default="attention_prefill_sm90_ws_kernel")
    a = ap.parse_args()
    kernels = {name: lines for name, lines in sass.kernels(a.binary, a.kernel, a.cuobjdump).items()
               if name.endswith("[sm_90a]")}  # the sm_80 build of a Hopper kernel is empty
    if not kernels:
        sys.exit(f"sass_order: no function matching {a.kernel!r} in {a.binary}")
    broken = False
    for name, lines in kernels.items():
        seq = events(lines)
        bad = overlap_broken(seq)
        broken |= bad
        print(("P V wait before the softmax: " if bad else "softmax under its P V: ") + name)
        print("   " + " | ".join(f"{e} x{n}" if n > 1 else e for e, n in seq))
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
