#!/usr/bin/env python3
"""v44's rule (NOTES.md v44, written in session 53 before its call): v44 (+ the producer's
buffer waits with a suspend-time hint: session 52's v41 rebased onto v43) against v43, by
rule_common.short_and_long with the s512 bar 1.005. Reads call R's DIR/s512 and DIR/long;
writes DIR/v44/adopt.

  rule_v44.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v43", "v44", 1.005, f"{d}/v44")
