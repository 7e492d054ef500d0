#!/usr/bin/env python3
"""v27's re-test rule (NOTES.md "v27 re-test", written before call P): reads DIR/bench_{head,v27}_{1..R}.csv
(alternate_bench.sh) and prints, for each row of at most 1,024 keys, head's kAuto kernel over
v27's per round and their median, the control (the one-tile `wgmma`, the same kernel in both
builds) likewise, then the RULE line; writes DIR/adopt when v27 is adopted.

  rule_v27_retest.py DIR

kAuto's kernel: head `wgmma_ps` at <= 512 keys (v25's static walk), else `wgmma`; v27
`wgmma_ps` at <= 1,024 keys (the counter walk). Rule: every class row's median >= 0.98, the
median over the class rows >= 1.03, and the median of the control rows' medians within
0.98-1.02 (else the call is inconclusive: the machine drifted between the builds' runs; one
control row off alone is that row's noise, printed)."""

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import control_drifted, persistent_class, verdict

d = sys.argv[1]
res = persistent_class(d, "head", "v27", 512, 1024)
if res:
    full, cmed = res
    lo = min(full, key=full.get)
    med = statistics.median(full.values())
    print(f"class <= 1,024 keys: {len(full)} rows, lowest median {full[lo]:.3f} ({lo}), median {med:.3f}")
    verdict(d, "v27", control_drifted(cmed), full[lo] >= 0.98 and med >= 1.03)
