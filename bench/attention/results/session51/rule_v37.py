#!/usr/bin/env python3
"""v37's rule (NOTES.md v37, written in session 51 before any run): reads
DIR/bench_{head,v37}_{1..R}.csv (alternate_bench.sh, `--prefill --serving --dtype bf16
--max-keys=4096`) and prints, for every row, head ms / v37 ms per round and the median for
kAuto's kernel (rule_common.kauto_v34, the same in both builds), the control (the portable
`mma` kernel, whose code v37 does not touch) likewise, then the RULE line; writes DIR/adopt
when v37 is adopted.

  rule_v37.py DIR

Rule: adopted if the rows' median of medians is >= 1.005 and no row's median is below 0.99;
inconclusive if the control's median of row medians leaves 0.98-1.02."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, control_drifted, kauto_v34, verdict

d = sys.argv[1]
res = compare(d, "head", "v37", lambda b, k: kauto_v34(k), lambda b, k: "mma")
if res:
    full, cmed = res
    mid = statistics.median(full.values())
    lo = min(full, key=full.get)
    print(f"rows: median {mid:.3f}, lowest {full[lo]:.3f} ({lo})")
    verdict(d, "v37", control_drifted(cmed), mid >= 1.005 and full[lo] >= 0.99)
