#!/usr/bin/env python3
"""v40's rule (NOTES.md v40, written in session 52 before call O): v40 (+ whole Q tiles by
TMA) against v39, as rule_v39.py's. Writes DIR/v40/adopt.

  rule_v40.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v39", "v40", 1.005, f"{d}/v40")
