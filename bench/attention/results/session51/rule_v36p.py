#!/usr/bin/env python3
"""The d64 shape probe's rule (NOTES.md "v36p", written in session 51 before any run): reads
DIR/bench_{head,v36p}_{1..R}.csv (alternate_bench.sh, `--prefill --serving --dtype bf16
--max-keys=4096`) and prints, for every row, head ms / v36p ms per round and the median for
kAuto's kernel (rule_common.kauto_v34: the same in both builds but for the split rows, whose
count the tile shape changes), the control likewise (the d128 rows: their machine code is
the head's), then the RULE line; writes DIR/adopt when the probe's direction is taken.

  rule_v36p.py DIR

Rule: the direction (kAuto gets a 128-row d64 shape beside the 192-row one) is taken if the d64
s512 full and causal rows' medians are >= 1.03 each; the line then names the longest grid
length at which both d64 masks read >= 1.01 (the new shape's class). Inconclusive if the
d128 rows' median leaves 0.98-1.02."""
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, kauto_v34, verdict

d = sys.argv[1]
res = compare(d, "head", "v36p", lambda b, k: kauto_v34(k), lambda b, k: kauto_v34(k))
if res:
    full, _ = res
    d64 = {k: x for k, x in full.items() if " d64 " in k}
    d128 = {k: x for k, x in full.items() if " d128 " in k}
    ctl = statistics.median(d128.values())
    print(f"control (d128 rows): median {ctl:.3f}, {min(d128.values()):.3f}-{max(d128.values()):.3f}")
    grid = {}
    for k, x in d64.items():
        m = re.match(r"b\d+ s(\d+) h\d+ d64 (full|causal)$", k)
        if m:
            grid[(int(m[1]), m[2])] = x
    s512 = [grid.get((512, "full"), 0.0), grid.get((512, "causal"), 0.0)]
    longest = 0
    for s in sorted({s for s, _ in grid}):
        if grid.get((s, "full"), 0.0) >= 1.01 and grid.get((s, "causal"), 0.0) >= 1.01:
            longest = s
        else:
            break
    print(f"d64 s512 full / causal: {s512[0]:.3f} / {s512[1]:.3f}; both masks >= 1.01 up to s = {longest}")
    verdict(d, "v36p's direction", not 0.98 <= ctl <= 1.02, min(s512) >= 1.03)
