#!/usr/bin/env python3
"""v30's rule (NOTES.md v30, written before call S): reads DIR/bench_{head,v30}_{1..R}.csv
(alternate_bench.sh) and prints, for each row of at most 1,024 keys, head's kAuto kernel over
v30's per round and their median, the control (the one-tile `wgmma`, the same kernel in both
builds) likewise, then the RULE line; writes DIR/adopt when v30 is adopted.

  rule_v30.py DIR

kAuto's kernel: head `wgmma_ps` at <= 512 keys (the static walk), else `wgmma`; v30
`wgmma_ps` at <= 1,024 keys (the static walk at <= 512 keys, the counter walk past them).
Rule: every class row's median >= 0.98, each s1k grid row's median >= 1.03, and the median of
the control rows' medians within 0.98-1.02 (else the call is inconclusive)."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import control_drifted, persistent_class, verdict

d = sys.argv[1]
res = persistent_class(d, "head", "v30", 512, 1024)
if res:
    full, cmed = res
    lo = min(full, key=full.get)
    s1k = {k: x for k, x in full.items() if re.match(r"b\d+ s1024 h\d+ d\d+ (full|causal)$", k)}
    print(f"class <= 1,024 keys: {len(full)} rows, lowest median {full[lo]:.3f} ({lo})")
    print("s1k rows: " + ", ".join(f"{k} {x:.3f}" for k, x in s1k.items()))
    verdict(d, "v30", control_drifted(cmed),
            full[lo] >= 0.98 and len(s1k) == 4 and min(s1k.values()) >= 1.03)
