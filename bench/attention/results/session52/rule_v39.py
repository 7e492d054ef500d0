#!/usr/bin/env python3
"""v39's rule (NOTES.md v39, written in session 52 before call O): v39 (+ the output
staged by stmatrix) against v38, as rule_v38.py's with an s512 bar of 1.005. Writes
DIR/v39/adopt.

  rule_v39.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v38", "v39", 1.005, f"{d}/v39")
