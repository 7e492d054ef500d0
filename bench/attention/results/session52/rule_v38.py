#!/usr/bin/env python3
"""v38's rule (NOTES.md v38, written in session 52 before call O): v38 (one loop body)
against the head, on call O's DIR/s512 and DIR/long (rule_common.short_and_long: the bf16
s512 rows' median of medians >= 1.01, every s512 row >= 0.99; past 512 keys, >= 2 rounds,
median >= 0.99, none below 0.97; the portable `mma` the control). Writes DIR/adopt.

  rule_v38.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "head", "v38", 1.01)
