#!/usr/bin/env python3
"""v51's rule (NOTES.md v51, written in session 54 before call Z3): v51 (row blocks aligned to
the sequence's end: a sequence's partial row block is its first) against v42 (the head's
kernels), by rule_common.short_and_long over every row (v51 changes every Hopper kernel's
geometry), with the s512 bar 1.02 on the bf16 d64 causal row (the one row whose tile steps
fall, 9 to 8 a head), every s512 row (bf16 and fp16) >= 0.99 over call Z3's 11 rounds, and the
rows past 512 keys with a median >= 0.99 and none below 0.97. Reads call Z3's DIR/s512 and
DIR/long; writes DIR/v51/adopt.

  rule_v51.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v42", "v51", 1.02, f"{d}/v51", short_rows=lambda k: k.endswith("d64 causal"))
