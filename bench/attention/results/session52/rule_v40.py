#!/usr/bin/env python3
"""v40's rule (NOTES.md v40, written in session 52 before call O): v40 (whole Q tiles by TMA)
on top of v39 (itself on v38), against v39. Reads DIR/s512/ and DIR/long/, each alternate_bench.sh's
bench_{v39,v40}_{1..R}.csv: s512 = `--prefill
--max-keys=512 --dtype both` (7 rounds: kAuto's `wgmma_ps`, the static walk, measured),
long = `--prefill --dtype bf16 --max-keys=4096` (as many rounds as the call's time left:
kAuto's kernel, rule_common.kauto_v34). The control is the portable `mma`, whose code v40
does not touch. Prints both tables and the RULE line; writes DIR/v40/adopt when v40 is adopted.

  rule_v40.py DIR

Rule: adopted if (a) the bf16 s512 rows' median of medians is >= 1.005 and every s512 row's
median (bf16 and fp16) is >= 0.99, and (b) the rows past 512 keys came back with >= 2 rounds,
their median of medians >= 0.99 and none below 0.97; inconclusive if either control's median
leaves 0.98-1.02, or (a) passes and (b) is missing."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rule_common import compare, control_drifted, kauto_v34, max_k, verdict

d = sys.argv[1]
short = compare(f"{d}/s512", "v39", "v40", lambda b, k: "wgmma_ps", lambda b, k: "mma",
                keep=lambda k: max_k(k) <= 512)
a = drift = False
if short:
    full, cmed = short
    bf16 = {k: x for k, x in full.items() if "fp16" not in k}
    mid = statistics.median(bf16.values())
    lo = min(full, key=full.get)
    print(f"s512: bf16 rows median {mid:.3f}; all rows lowest {full[lo]:.3f} ({lo})")
    drift |= control_drifted(cmed)
    a = mid >= 1.005 and full[lo] >= 0.99
rounds = len([f for f in os.listdir(f"{d}/long") if f.startswith("bench_v40_") and f.endswith(".csv")]) \
    if os.path.isdir(f"{d}/long") else 0
longer = compare(f"{d}/long", "v39", "v40", lambda b, k: kauto_v34(k), lambda b, k: "mma",
                 keep=lambda k: max_k(k) > 512) if rounds >= 2 else None
b = None
if longer:
    full, cmed = longer
    mid = statistics.median(full.values())
    lo = min(full, key=full.get)
    print(f"past 512 keys ({rounds} rounds): median {mid:.3f}, lowest {full[lo]:.3f} ({lo})")
    drift |= control_drifted(cmed)
    b = mid >= 0.99 and full[lo] >= 0.97
elif a:
    print(f"past 512 keys: {rounds} rounds came back (2 needed)")
    drift = True  # (a) passed, (b) missing: inconclusive
os.makedirs(f"{d}/v40", exist_ok=True)  # (DIR/adopt is v38's verdict, DIR/v39/adopt v39's)
verdict(f"{d}/v40", "v40", drift, a and bool(b))
