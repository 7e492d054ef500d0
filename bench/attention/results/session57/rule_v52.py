#!/usr/bin/env python3
"""v52's rule (NOTES.md v52, written in session 57 before any run): v52 (d128's setmaxnreg
split 208 / 88 instead of 232 / 40: no producer spills, inside the CTA's launch registers)
against v51 (the head's kernels), as v50's rule was against v42: rule_common.short_and_long on
the d128 rows only (v52's d64 kernels are the head's machine code, cuobjdump, and call Z4
times d128 only), the s512 bar 1.01 on the median of the bf16 d128 rows, every d128 s512 row
(bf16 and fp16) >= 0.99 over call Z4's 15 rounds, the d128 rows past 512 keys with a median
>= 0.99 and none below 0.97, and the d128 full rows past 512 keys (the stream-K walk's, whose
producer spilled most) with a median >= 1.0. Reads call Z4's DIR/s512 and DIR/long; writes
DIR/v52/adopt.

  rule_v52.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import d128_full_clause, short_and_long

d = sys.argv[1]
short_and_long(d, "v51", "v52", 1.01, f"{d}/v52", long_clause=d128_full_clause(1.0),
               judged=lambda k: " d128 " in k + " ")
