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

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, kauto, no_loss_and_short_causal_gain

d = sys.argv[1]
res = compare(d, "head", "v28", lambda b, k: kauto(512)(k), lambda b, k: "mma")
if res:
    no_loss_and_short_causal_gain(d, "v28", *res)
