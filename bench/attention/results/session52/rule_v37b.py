#!/usr/bin/env python3
"""v37's re-test rule (NOTES.md "v37 re-test", written in session 52 after call K and before
call L): reads DIR/bench_{head,v37}_{1..R}.csv (alternate_bench.sh, `--prefill --max-keys=512
--dtype both`: the s512 grid rows, bf16 and fp16, where kAuto runs the static walk) and
prints, for every row, head `wgmma_ps` ms over v37's per round and the median, the control
(the portable `mma` kernel, whose code v37 does not touch) likewise, then the RULE line;
writes DIR/adopt when v37 is adopted.

  rule_v37b.py DIR

Rule: the bf16 rows' median of medians >= 1.01 and every row's median (bf16 and fp16) >= 0.99;
inconclusive if the control's median of row medians leaves 0.98-1.02."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import s512_rule, verdict

d = sys.argv[1]
res = s512_rule(d, "head", "v37", lambda b, k: "wgmma_ps", lambda b, k: "mma", 1.01)
if res:
    verdict(d, "v37", *res)
