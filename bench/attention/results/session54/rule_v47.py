#!/usr/bin/env python3
"""v47's rule (NOTES.md v47, written in session 54 before call U): v47 (session 53's v46, the
one loop body under the causal mask only, applied on v43 instead of v44, which call R did not
adopt) against v43, by rule_common.short_and_long with the s512 bar 1.015 on the bf16 causal
rows, every s512 row (full ones included) >= 0.99, and the rows past 512 keys as usual. Reads
call U's DIR/s512 and DIR/long; writes DIR/v47/adopt.

  rule_v47.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v43", "v47", 1.015, f"{d}/v47", short_rows=lambda k: k.endswith("causal"))
