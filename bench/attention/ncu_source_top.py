#!/usr/bin/env python3
"""The SASS instructions where a kernel's warps stalled most, from ncu's source page:
`ncu -i REPORT --page source --csv --print-source sass > SRC.csv` of a report collected with
`--section SourceCounters` (stall sampling). Prints the top N instructions by sampled warp
stalls with their share of all samples and their three largest stall reasons, then the
totals by reason. Column names differ between ncu versions, so they are found by pattern:
the address ("Address"), the SASS text ("Source"), the sample count ("Warp Stall Sampling
(All Samples)" or the like) and one column a stall reason (names containing "stall_").

  ncu_source_top.py SRC.csv[.gz] [N]     (N default 60)

(The page's reader is bench/attention/fixed_share.py's, which splits the same samples into
per-CTA and per-key-tile code.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixed_share import source_page  # the source page's reader (beside this script)


def number(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    try:
        rows = source_page(path, needed=())
    except SystemExit:
        print(f"ncu_source_top: no source table in {path}")
        return 1
    cols = rows[0].keys() if rows else []
    samples = next((c for c in cols if "Sampling" in c and "All" in c), None) or \
        next((c for c in cols if "Sampling" in c), None)
    source = next((c for c in cols if c.strip() == "Source"), None)
    reasons = [c for c in cols if "stall_" in c.lower() and "not_issued" not in c.lower()]
    if samples is None or source is None:
        print(f"ncu_source_top: no sampling or source column in {path}: {list(cols)}")
        return 1
    total = sum(number(r[samples]) for r in rows) or 1.0
    print(f"{len(rows)} instructions, {total:.0f} samples ({samples})")
    print("| address | samples | share | instruction | top reasons |\n|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -number(r[samples]))[:top]:
        why = sorted(((number(r[c]), c) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{c.split('stall_')[-1].strip()} {v:.0f}" for v, c in why if v > 0)
        print(f"| {r.get('Address', '')} | {number(r[samples]):.0f} | "
              f"{number(r[samples]) / total:.3f} | `{r[source].strip()}` | {why} |")
    sums = sorted(((sum(number(r[c]) for r in rows), c) for c in reasons), reverse=True)
    print("\nby reason: " + ", ".join(f"{c.split('stall_')[-1].strip()} {v:.0f}" for v, c in sums if v > 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
