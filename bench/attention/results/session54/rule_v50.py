#!/usr/bin/env python3
"""v50's rule (NOTES.md v50, written in session 54 before call Z2): v50 (d128's setmaxnreg
split 216 / 80 instead of 232 / 40: no producer spills) against v42 (the head's kernels), by
rule_common.short_and_long on the d128 rows only (judged: v50's d64 kernels are the same
machine code as v42's, cuobjdump, and call Z2 times d128 only), with the s512 bar 1.01 on the
median of the bf16 d128 rows, every d128 s512 row (bf16 and fp16) >= 0.99 over call Z2's 15
rounds, the d128 rows past 512 keys with a median >= 0.99 and none below 0.97, and in addition
the d128 full rows past 512 keys (the stream-K walk's, whose producer spilled most) with a
median >= 1.0. Reads call Z2's DIR/s512 and DIR/long; writes DIR/v50/adopt.

  rule_v50.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import d128_full_clause, short_and_long

d = sys.argv[1]
short_and_long(d, "v42", "v50", 1.01, f"{d}/v50", long_clause=d128_full_clause(1.0),
               judged=lambda k: " d128 " in k + " ")
