#!/usr/bin/env python3
"""Reads call Y's files (callY.sh): bench_N.txt (attention_bench's stdout, each line prefixed
with its arrival time) and smi.txt (nvidia-smi samples every 10 ms, each prefixed likewise:
SM clock MHz, power W, the active clock-event reasons as a bit mask), and prints, for every
timed row of the s512 prefill grid, each run's TFLOP/s next to the SM clock and power that
nvidia-smi saw while that row ran (the row's span: from the previous stdout line to its own),
and the share of those samples with the software power cap active (reason bit 0x4).

  clocks_by_row.py DIR
"""
import glob
import re
import statistics
import sys

d = sys.argv[1]
smi = []
for line in open(f"{d}/smi.txt"):
    f = [x.strip() for x in line.split(" ", 1)[1].split(",")] if " " in line else []
    try:
        t = float(line.split(" ", 1)[0])
        smi.append((t, float(f[0].split()[0]), float(f[1].split()[0]), int(f[2], 16)))
    except (ValueError, IndexError):
        continue
rows = {}
for path in sorted(glob.glob(f"{d}/bench_*.txt"), key=lambda p: int(re.search(r"_(\d+)\.txt$", p)[1])):
    prev = None
    for line in open(path):
        t, _, text = line.partition(" ")
        t = float(t)
        m = re.match(r"\| prefill \| (.+?)\s+\| (\S+)\s+\|\s+\S+ \|\s+(\S+) \|", text)
        if m and prev is not None and m[2] != "naive":
            s = [x for x in smi if prev <= x[0] <= t]
            if s:
                rows.setdefault((m[1], m[2]), []).append(
                    (float(m[3]), statistics.median(x[1] for x in s), statistics.median(x[2] for x in s),
                     sum(1 for x in s if x[3] & 0x4) / len(s), len(s)))
        prev = t
print("| row | impl | TFLOP/s by run | SM MHz (median in the row) by run | W by run | power-capped share |")
print("|---|---|---|---|---|---|")
for (cfg, impl), v in rows.items():
    print(f"| {cfg} | {impl} | " + " ".join(f"{x[0]:.0f}" for x in v) + " | "
          + " ".join(f"{x[1]:.0f}" for x in v) + " | " + " ".join(f"{x[2]:.0f}" for x in v) + " | "
          + " ".join(f"{x[3]:.2f}" for x in v) + " |")
