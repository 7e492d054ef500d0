#!/usr/bin/env python3
"""v29's rule (NOTES.md v29, written before call R): reads DIR/bench_{v28,v29}_{1..R}.csv
(alternate_bench.sh) and prints, for every prefill and serving row, v28's portable `mma`
kernel over v29's per round and the median, the control (kAuto's Hopper kernel, the same code
in both builds) likewise, then the RULE line; writes DIR/adopt when v29 is adopted.

  rule_v29.py DIR

The measured column is `mma` (v29 changes the portable kernel's mask only); the control is
`wgmma_ps` at <= 512 keys, else `wgmma`. Rule: every row's median >= 0.98, the d64 causal grid
rows s512 and s1k median >= 1.03 each, and the median of the control rows' medians within
0.98-1.02 (else inconclusive)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, kauto, no_loss_and_short_causal_gain

d = sys.argv[1]
res = compare(d, "v28", "v29", lambda b, k: "mma", lambda b, k: kauto(512)(k))
if res:
    no_loss_and_short_causal_gain(d, "v29", *res)
