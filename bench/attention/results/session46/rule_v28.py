#!/usr/bin/env python3
"""v28's rule (NOTES.md v28, written before call Q): reads DIR/bench_{head,v28}_{1..R}.csv
(alternate_bench.sh) and prints, for every prefill and serving row, head's kAuto kernel over
v28's per round and the median, the control (`mma`, the same code in both builds) likewise,
then the RULE line; writes DIR/adopt when v28 is adopted.

  rule_v28.py DIR

kAuto's kernel in both builds: `wgmma_ps` at <= 512 keys, else `wgmma` (mainline's routing;
v28 changes the consumers' mask, which both forms run). Rule: every row's median >= 0.98, the
d64 causal grid rows s512 and s1k (where the mask's cost is predicted to matter) median >= 1.03
each, and the median of the control rows' medians within 0.98-1.02 (else inconclusive: the
machine drifted between the builds' runs)."""

import re
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, control_drifted, kauto, verdict

d = sys.argv[1]
res = compare(d, "head", "v28", lambda b, k: kauto(512)(k), lambda b, k: "mma")
if res:
    full, cmed = res
    short_causal = {k: x for k, x in full.items() if re.match(r"b\d+ s(512|1024) h\d+ d64 causal$", k)}
    lo = min(full, key=full.get)
    print(f"all rows: median {statistics.median(full.values()):.3f}, lowest {full[lo]:.3f} ({lo})")
    print("short causal rows: " + ", ".join(f"{k} {x:.3f}" for k, x in short_causal.items()))
    verdict(d, "v28", control_drifted(cmed),
            full[lo] >= 0.98 and len(short_causal) == 2 and min(short_causal.values()) >= 1.03)
