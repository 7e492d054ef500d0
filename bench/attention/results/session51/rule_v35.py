#!/usr/bin/env python3
"""v35's rule (NOTES.md v35, written before call I): reads DIR/bench_{head,v35}_{1..R}.csv
(alternate_bench.sh, `--prefill --max-keys=512 --dtype both`: the s512 grid rows, bf16 and
fp16, where the static walk runs) and prints, for every row, head `wgmma_ps` ms over v35's per
round and the median, the control (the one-tile `wgmma`: its code unchanged but for one more
kernel parameter) likewise, then the RULE line; writes DIR/adopt when v35 is adopted.

  rule_v35.py DIR

Rule: the bf16 rows' median of medians >= 1.01 and every row's median (bf16 and fp16) >= 0.99;
inconclusive if the control's median of row medians leaves 0.98-1.02."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import s512_rule, verdict

d = sys.argv[1]
res = s512_rule(d, "head", "v35", lambda b, k: "wgmma_ps", lambda b, k: "wgmma", 1.01)
if res:
    verdict(d, "v35", *res)
