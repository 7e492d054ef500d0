#!/usr/bin/env python3
"""v45's rule (NOTES.md v45, written in session 53 before its call): v45 (+ whole Q row
blocks by TMA: session 52's v40 rebased onto v44) against v44, by rule_common.short_and_long
with the s512 bar 1.005. Reads call S's DIR/s512 and DIR/long; writes DIR/v45/adopt.

  rule_v45.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v44", "v45", 1.005, f"{d}/v45")
