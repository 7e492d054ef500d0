#!/usr/bin/env python3
"""v46's rule (NOTES.md v46, written in session 53 before its call): v46 (one loop body for
every key tile under the causal mask; the first tile peeled without it: v38 split by the mask)
against v44, by rule_common.short_and_long with the s512 bar 1.015 on the bf16 causal rows,
every s512 row (full ones included) >= 0.99, and the rows past 512 keys as usual. Reads call
T's DIR/s512 and DIR/long; writes DIR/v46/adopt.

  rule_v46.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v44", "v46", 1.015, f"{d}/v46", short_rows=lambda k: k.endswith("causal"))
