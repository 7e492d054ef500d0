#!/usr/bin/env python3
"""v43's re-test rule (NOTES.md "v43 re-test", written in session 54 after call R and before
call U). Call R's rule_v43 read v43 against v42 as not adopted on one row: every bf16 s512 row
and the long clause held (bf16 s512 median 1.026; d128 full past 512 keys 1.019), but the
fp16 d128 full s512 row's median was 0.988 against the 0.99 floor, its seven rounds spread
0.958-1.079 (the widest of the table). Call U measures seven more s512 rounds of both builds.
This rule pools them with call R's seven (R's rounds 1-7, U's renumbered 8-14, in a scratch
folder) and applies the s512 half of rule_v43 to the fourteen: bf16 median of medians >= 1.0
and every row's median (bf16 and fp16) >= 0.99. The part past 512 keys is call R's, which
held (three rounds, rule_v43.md). Pooled, not a fresh seven alone: a second try judged alone
would pass a build on its luckier half.

  rule_v43b.py CALL_R_DIR CALL_U_DIR      (each with s512/bench_{v42,v43}_N.csv)
"""

import glob
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import s512_rule, verdict

r_dir, u_dir = sys.argv[1], sys.argv[2]
pool = tempfile.mkdtemp()
for src, shift in ((r_dir, 0), (u_dir, 7)):
    for f in glob.glob(f"{src}/s512/bench_v4[23]_*.csv"):
        b, n = re.search(r"bench_(v4[23])_(\d+)\.csv$", f).groups()
        shutil.copy(f, f"{pool}/bench_{b}_{int(n) + shift}.csv")
res = s512_rule(pool, "v42", "v43", lambda b, k: "wgmma_ps", lambda b, k: "mma", 1.0)
shutil.rmtree(pool)
out = f"{u_dir}/v43"
os.makedirs(out, exist_ok=True)
if res:
    verdict(out, "v43", *res)
