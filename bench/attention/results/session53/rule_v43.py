#!/usr/bin/env python3
"""v43's rule (NOTES.md v43, written in session 53 before its call): v43 (the walk's divisors
as a kernel parameter) against v42, by rule_common.short_and_long with the s512 bar 1.0, and
the d128 full rows past 512 keys (the stream-K walk's, where v42's producer spilled more)
with a median >= 1.01. Reads call R's DIR/s512 and DIR/long (the whole bf16 grid); writes
DIR/v43/adopt.

  rule_v43.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import d128_full_clause, short_and_long

d = sys.argv[1]
short_and_long(d, "v42", "v43", 1.0, f"{d}/v43", long_clause=d128_full_clause(1.01))
