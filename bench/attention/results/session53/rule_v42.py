#!/usr/bin/env python3
"""v42's rule, stated in callQ.sh's header before call Q ran (this script, written after it,
applies it): v42 (the walk divides by its fixed divisors as multiply-high and shift) against
the head, as rule_v39.py's. Reads
call Q's DIR/s512 and DIR/long; writes DIR/v42/adopt.

  rule_v42.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import short_and_long

d = sys.argv[1]
short_and_long(d, "head", "v42", 1.005, f"{d}/v42")
