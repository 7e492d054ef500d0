#!/usr/bin/env python3
"""v48's and v49's rules on v51 (NOTES.md "v48 and v49 on v51", written in session 57 before
any run): session 54's rule_v48_v49.py with the head's kernels (v51) as the base instead of
v42: each of v48 (three K/V stages at d64) and v49 (four) against v51, by
rule_common.short_and_long on the d64 rows only (their d128 kernels are the head's machine
code, cuobjdump, and call Z5 times d64 only), the s512 bar 1.01 on the median of the bf16 d64
rows, every d64 s512 row (bf16 and fp16) >= 0.99, and the d64 rows past 512 keys with a median
>= 0.99 and none below 0.97. Reads call Z5's DIR/s512 and DIR/long; writes DIR/v48/adopt and
DIR/v49/adopt. (If both are adopted, v49 only if its bf16 d64 s512 median beats v48's by
>= 0.5 %, as in session 54.)

  rule_v48_v49_on_v51.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
for new in ("v48", "v49"):
    print(f"## {new} against v51")
    short_and_long(d, "v51", new, 1.01, f"{d}/{new}", judged=lambda k: " d64 " in k + " ")
