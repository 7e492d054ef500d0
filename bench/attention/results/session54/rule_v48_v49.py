#!/usr/bin/env python3
"""v48's and v49's rules (NOTES.md v48/v49, written in session 54 before call Z): v48 (three
K/V stages at d64) and v49 (four), each against v42 (the head's kernels), by
rule_common.short_and_long on the d64 rows only (judged: their d128 kernels are the same
machine code as v42's, cuobjdump, and call Z times d64 only), with the s512 bar 1.01 on the
median of the bf16 d64 rows, every d64 s512 row (bf16 and fp16) >= 0.99, and the d64 rows past
512 keys with a median >= 0.99 and none below 0.97. Reads call Z's DIR/s512 and DIR/long;
writes DIR/v48/adopt and DIR/v49/adopt. (If both are adopted, NOTES.md's tie-break picks.)

  [RULE_BASE=BUILD] rule_v48_v49.py DIR

RULE_BASE (default v42) is the build they are judged against: session 57 rebuilt both on v51,
the head then, and call Z5 (results/session57/callZ5.sh) sets v51; the rule is the same
otherwise (NOTES.md "v48 and v49 on v51").
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
base = os.environ.get("RULE_BASE", "v42")
for new in ("v48", "v49"):
    print(f"## {new} against {base}")
    short_and_long(d, base, new, 1.01, f"{d}/{new}", judged=lambda k: " d64 " in k + " ")
