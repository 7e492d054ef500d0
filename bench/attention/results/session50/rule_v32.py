#!/usr/bin/env python3
"""v32's rule (NOTES.md v32, written before call B): reads DIR/bench_{head,v32}_{1..R}.csv
(alternate_bench.sh, bf16 grid and serving rows) and prints, for every row, the head's kAuto
kernel over v32's per round and their median, the control (the one-tile `wgmma`, the same
machine code in both builds: cuobjdump, NOTES.md v32) likewise, then the RULE line; writes
DIR/adopt when v32 is adopted.

  rule_v32.py DIR

kAuto's kernel: head `wgmma_ps` at <= 1,024 keys, else `wgmma` (rule_common.kauto(1024));
v32 rule_common.kauto_v32 (4,096 keys, 8,192 at d128 full, grids of more tiles than SMs past
1,024 keys; the stream-K walk on the d128 full rows of more than 512 keys).
Changed rows: those where v32 runs another kernel or walk than the head (the class grown past
1,024 keys, and the d128 full rows of 1k: stream-K for the counter walk).
Rule: every changed row's median >= 0.99, the changed rows' median of medians >= 1.02, every
unchanged row's median >= 0.98, and the control rows' median within 0.98-1.02 (else
inconclusive)."""

import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, control_drifted, kauto, kauto_v32, max_k, verdict

d = sys.argv[1]
head_kernel = kauto(1024)
res = compare(d, "head", "v32", lambda b, k: head_kernel(k) if b == "head" else kauto_v32(k),
              lambda b, k: "wgmma")


def changed(k):
    if head_kernel(k) != kauto_v32(k):
        return True
    full_d128 = " d128 full" in k and " w" not in k
    return kauto_v32(k) == "wgmma_ps" and full_d128 and 512 < max_k(k)


if res:
    full, cmed = res
    ch = {k: x for k, x in full.items() if changed(k)}
    un = {k: x for k, x in full.items() if not changed(k)}
    print("changed rows: " + ", ".join(f"{k} {x:.3f}" for k, x in ch.items()))
    lo_c = min(ch.values()) if ch else 0.0
    mid_c = statistics.median(ch.values()) if ch else 0.0
    lo_u = min(un.values()) if un else 1.0
    print(f"changed: {len(ch)} rows, median {mid_c:.3f}, lowest {lo_c:.3f}; "
          f"unchanged: {len(un)} rows, lowest {lo_u:.3f}"
          + (f" ({min(un, key=un.get)})" if un else ""))
    verdict(d, "v32", control_drifted(cmed), bool(ch) and lo_c >= 0.99 and mid_c >= 1.02 and lo_u >= 0.98)
