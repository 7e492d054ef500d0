#!/usr/bin/env python3
"""v43's rule (NOTES.md v43, written in session 53 before its call): v43 (the walk's divisors
as a kernel parameter) against v42, by rule_common.short_and_long with the s512 bar 1.0, and
the d128 full rows past 512 keys (the stream-K walk's, where v42's producer spilled more)
with a median >= 1.01. Reads call R's DIR/s512 and DIR/long (the whole bf16 grid); writes
DIR/v43/adopt.

  rule_v43.py DIR
"""

import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long


def d128_full(full):
    rows = {k: x for k, x in full.items() if re.match(r"b\d+ s\d+ h\d+ d128 full$", k)}
    if not rows:
        print("d128 full rows past 512 keys: none read")
        return False
    mid = statistics.median(rows.values())
    print(f"d128 full rows past 512 keys: median {mid:.3f} (bar 1.01): "
          + ", ".join(f"{k} {x:.3f}" for k, x in rows.items()))
    return mid >= 1.01


d = sys.argv[1]
short_and_long(d, "v42", "v43", 1.0, f"{d}/v43", long_clause=d128_full)
