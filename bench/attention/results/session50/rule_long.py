#!/usr/bin/env python3
"""Past 4,096 keys: the persistent form against the one-tile grid, in one build's own columns
(NOTES.md "Session 50", next step 1; rule written in session 50 before any such call).
Reads DIR/bench_head_{1..R}.csv (attention_bench --prefill --serving --dtype bf16
--min-keys=4097, R runs of the head) and prints, per row, wgmma ms / wgmma_ps ms by run and
the median (> 1: the persistent form faster; its walk: stream-K on d128 full rows, the counter
walk on the others), then one RULE line per (head_dim, mask) of the grid.

  rule_long.py DIR

Rule: kAuto's persistent class for a (head_dim, mask) grows from 4,096 to the longest grid
length L such that at every grid length in (4,096, L] the median is >= 1.01 with more than
two thirds of the runs > 1.0; for the causal ones only if no chunk row (b8, 4,608 and 8,704
keys, same head_dim) at or under L reads a median < 0.99."""
import csv
import glob
import re
import statistics
import sys

d = sys.argv[1]
runs = []
for f in sorted(glob.glob(f"{d}/bench_head_*.csv")):
    runs.append({(x["config"], x["impl"]): float(x["ms"]) for x in csv.DictReader(open(f))
                 if x["kind"] in ("prefill", "serving")})
rows = [c for (c, i) in runs[0] if i == "wgmma"]
med = {}
print("| config | wgmma / wgmma_ps, by run | median |\n|---|---|---|")
for c in rows:
    r = [x[(c, "wgmma")] / x[(c, "wgmma_ps")] for x in runs if (c, "wgmma_ps") in x]
    if len(r) == len(runs):
        med[c] = (statistics.median(r), sum(v > 1.0 for v in r) / len(r))
        print(f"| {c} | {' '.join(f'{v:.3f}' for v in r)} | {med[c][0]:.3f} |")
for dim in (64, 128):
    for mask in ("full", "causal"):
        grid = sorted((int(m[1]), c) for c in med if (m := re.match(rf"b\d+ s(\d+) h\d+ d{dim} {mask}$", c)))
        limit = 4096
        for s, c in grid:
            if s <= 4096:
                continue
            m, share = med[c]
            chunks_ok = mask == "full" or all(
                med[k][0] >= 0.99 for k in med
                if re.match(rf"b8 q512 ctx(\d+) h\d+/\d+ d{dim} causal$", k)
                and int(re.search(r"ctx(\d+)", k)[1]) + 512 <= s)
            if m >= 1.01 and share > 2 / 3 and chunks_ok:
                limit = s
            else:
                break
        print(f"RULE d{dim} {mask}: the persistent class to {limit} keys")
