#!/usr/bin/env python3
"""v41's rule (NOTES.md v41, written in session 52 before its call): v41 (+ the producer's
buffer waits with a suspend-time hint) against v40, as rule_v39.py's. Reads call P's
DIR/s512 and DIR/long; writes DIR/v41/adopt.

  rule_v41.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "v40", "v41", 1.005, f"{d}/v41")
