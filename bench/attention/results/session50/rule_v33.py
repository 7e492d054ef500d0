#!/usr/bin/env python3
"""v33's rule (NOTES.md v33, written before call D): reads DIR/bench_{head,v33}_{1..R}.csv
(alternate_bench.sh, bf16 grid and serving rows of at most 4,096 keys) and prints, for every
row, the head's kAuto kernel over v33's per round and their median, the control (the one-tile
`wgmma`, the same machine code in both builds) likewise, then the RULE line; writes DIR/adopt
when v33 is adopted.

  rule_v33.py DIR

kAuto's kernel: head `wgmma_ps` at <= 1,024 keys, else `wgmma` (rule_common.kauto(1024));
v33 rule_common.kauto_v33 (4,096 keys on grids of more tiles than SMs past 1,024; the stream-K
walk on the d128 full rows of more than 512 keys).
Changed rows: those where v33 runs another kernel or walk than the head.
Rule: every changed row's median >= 0.99 and the changed rows' median >= 1.02; inconclusive
if the control's median of row medians or the unchanged rows' (the head's machine code and
choice: a second control) leave 0.98-1.02."""

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, control_drifted, kauto, kauto_v33, max_k, verdict

d = sys.argv[1]
head_kernel = kauto(1024)
res = compare(d, "head", "v33", lambda b, k: head_kernel(k) if b == "head" else kauto_v33(k),
              lambda b, k: "wgmma")


def changed(k):
    if head_kernel(k) != kauto_v33(k):
        return True
    return kauto_v33(k) == "wgmma_ps" and " d128 full" in k and 512 < max_k(k)


if res:
    full, cmed = res
    ch = {k: x for k, x in full.items() if changed(k)}
    un = {k: x for k, x in full.items() if not changed(k)}
    print("changed rows: " + ", ".join(f"{k} {x:.3f}" for k, x in ch.items()))
    lo_c = min(ch.values()) if ch else 0.0
    mid_c = statistics.median(ch.values()) if ch else 0.0
    mid_u = statistics.median(un.values()) if un else 1.0
    print(f"changed: {len(ch)} rows, median {mid_c:.3f}, lowest {lo_c:.3f} ({min(ch, key=ch.get) if ch else ''}); "
          f"unchanged: {len(un)} rows, median {mid_u:.3f}, {min(un.values()):.3f}-{max(un.values()):.3f}")
    drifted = control_drifted(cmed) or not 0.98 <= mid_u <= 1.02
    verdict(d, "v33", drifted, bool(ch) and lo_c >= 0.99 and mid_c >= 1.02)
