#!/usr/bin/env python3
"""v29's re-test rule (NOTES.md "v29 re-test", written before call T): reads
DIR/bench_{head,v29}_{1..R}.csv (alternate_bench.sh over the prefill grid) and prints, for
every grid row, head's portable `mma` kernel over v29's per round and the median, the control
(kAuto's Hopper kernel, the same code in both builds) likewise, then the RULE line; writes
DIR/adopt when v29 is adopted.

  rule_v29_retest.py DIR

The bar is call R's (rule_v29.py beside session 46's callR.sh), now over five rounds: every
row's median >= 0.98, the d64 causal s512 and s1k medians >= 1.03 each, and the control rows'
median within 0.98-1.02."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, kauto, no_loss_and_short_causal_gain

d = sys.argv[1]
res = compare(d, "head", "v29", lambda b, k: "mma", lambda b, k: kauto(512)(k))
if res:
    no_loss_and_short_causal_gain(d, "v29", *res)
