#!/usr/bin/env python3
"""How much of a kernel's time is per-CTA code, from two ncu source profiles of one build.

  bench/attention/fixed_share.py SHORT.csv[.gz] LONG.csv[.gz] [--ratio R] [--top N]

SHORT and LONG are `ncu -i REPORT --page source --csv --print-source sass` of one launch each
of the same kernel (the same SASS, so instruction i is the same instruction in both) at two
lengths that launch the same CTAs with more key tiles each at LONG: the attention grid's s512
and s16384 rows both launch 2,048 CTAs at d128 (4 and 128 key tiles each). An instruction that
ran at most R times (default 2) as often at LONG as at SHORT runs once per CTA (prologue,
the first waits, the epilogue); one that ran at least 4 times as often runs per key tile; the
rest (between) is reported apart. Prints the share of the warps' stall samples ("Warp Stall
Sampling (All Samples)") in each class at both lengths, then the per-CTA instructions with the
most samples at SHORT. Samples say where warps wait; whether that wait is SM time depends on
what else runs on the SM then (CONTRIBUTING.md).
"""
import argparse
import csv
import gzip
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def source_page(path, needed=(SAMPLES, EXECUTED)):
    """The instruction rows (dicts by column name, in SASS order) of an ncu source-page CSV
    (`ncu -i REPORT --page source --csv --print-source sass`, plain or .gz); SystemExit when
    it has no header row with "Source" and the `needed` columns (ncu_source_top.py reads it
    too)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):  # the header row follows the "Kernel Name" line
        if "Source" in row and all(c in row for c in needed):
            return [dict(zip(row, r)) for r in rows[i + 1:] if len(r) == len(row)]
    raise SystemExit(f"{path}: no ncu source-page header with {', '.join(needed)}")


def read_profile(path):
    """[(source, samples, executed)] in SASS order, from an ncu source-page CSV."""
    return [(r["Source"].strip(), int(r[SAMPLES] or 0), int(r[EXECUTED] or 0))
            for r in source_page(path)]


def classify(short, long_, ratio):
    """Per instruction: 'per-CTA', 'per-tile', 'between' or 'never' (ran in neither)."""
    if len(short) != len(long_):
        raise SystemExit(f"the profiles have {len(short)} and {len(long_)} instructions: "
                         "not the same build's kernel")
    out = []
    for (_, _, es), (_, _, el) in zip(short, long_):
        if es == 0 and el == 0:
            out.append("never")
        elif es > 0 and el <= ratio * es:
            out.append("per-CTA")
        elif el >= 4 * max(es, 1):
            out.append("per-tile")
        else:
            out.append("between")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("short")
    ap.add_argument("long")
    ap.add_argument("--ratio", type=float, default=2.0)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    short, long_ = read_profile(a.short), read_profile(a.long)
    kinds = classify(short, long_, a.ratio)
    total_s = sum(x[1] for x in short) or 1
    total_l = sum(x[1] for x in long_) or 1
    print(f"samples: short {total_s}, long {total_l}")
    for k in ("per-CTA", "per-tile", "between", "never"):
        ns = sum(x[1] for x, kk in zip(short, kinds) if kk == k)
        nl = sum(x[1] for x, kk in zip(long_, kinds) if kk == k)
        print(f"{k:9s} short {ns:9d} ({ns / total_s:6.1%})  long {nl:9d} ({nl / total_l:6.1%})")
    top = sorted(((x[1], i, x[0]) for i, (x, k) in enumerate(zip(short, kinds)) if k == "per-CTA"),
                 reverse=True)[: a.top]
    print(f"per-CTA instructions with the most samples at short (index, samples, share, SASS):")
    for n, i, src in top:
        print(f"  {i:5d} {n:7d} {n / total_s:6.1%}  {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
