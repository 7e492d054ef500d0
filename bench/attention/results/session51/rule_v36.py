#!/usr/bin/env python3
"""v36's rule (NOTES.md v36, written in session 51 before any run): reads
DIR/bench_{head,v36}_{1..R}.csv (alternate_bench.sh, `--prefill --dtype both --max-keys=1024`)
and prints, for every row, head ms / v36 ms per round and the median for kAuto's kernel
(rule_common.kauto_v34, the same in both builds), then the RULE line; writes DIR/adopt when
v36 is adopted. v36 changes the machine code of the d64 rows of at most 512 keys only (the
narrow shape): every other row runs the head's code and is the control.

  rule_v36.py DIR

Rule: adopted if the bf16 d64 s512 full and causal rows read >= 1.02 each and the fp16 ones
>= 0.99; inconclusive if the other rows' median of medians leaves 0.98-1.02."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, kauto_v34, max_k, verdict

d = sys.argv[1]
res = compare(d, "head", "v36", lambda b, k: kauto_v34(k), lambda b, k: kauto_v34(k))
if res:
    full, _ = res
    changed = {k: x for k, x in full.items() if " d64 " in k and max_k(k) <= 512}
    other = {k: x for k, x in full.items() if k not in changed}
    ctl = statistics.median(other.values())
    print("changed: " + ", ".join(f"{k} {x:.3f}" for k, x in changed.items()))
    print(f"unchanged rows (control): median {ctl:.3f}, {min(other.values()):.3f}-{max(other.values()):.3f}")
    bf16 = [x for k, x in changed.items() if "fp16" not in k]
    fp16 = [x for k, x in changed.items() if "fp16" in k]
    ok = len(bf16) == 2 and min(bf16) >= 1.02 and (not fp16 or min(fp16) >= 0.99)
    verdict(d, "v36", not 0.98 <= ctl <= 1.02, ok)
