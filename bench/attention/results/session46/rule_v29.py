#!/usr/bin/env python3
"""v29's rule (NOTES.md v29, written before call R): reads DIR/bench_{v28,v29}_{1..R}.csv
(alternate_bench.sh) and prints, for every prefill and serving row, v28's portable `mma`
kernel over v29's per round and the median, the control (kAuto's Hopper kernel, the same code
in both builds) likewise, then the RULE line; writes DIR/adopt when v29 is adopted.

  rule_v29.py DIR

The measured column is `mma` (v29 changes the portable kernel's mask only); the control is
`wgmma_ps` at <= 512 keys, else `wgmma`. Rule: every row's median >= 0.98, the d64 causal grid
rows s512 and s1k median >= 1.03 each, and the median of the control rows' medians within
0.98-1.02 (else inconclusive)."""
import csv
import glob
import re
import statistics
import sys

d = sys.argv[1]
rounds = sorted(int(re.search(r"_(\d+)\.csv$", f)[1]) for f in glob.glob(f"{d}/bench_v28_*.csv"))


def load(b, r):
    return {(x["config"], x["impl"]): float(x["ms"]) for x in csv.DictReader(open(f"{d}/bench_{b}_{r}.csv"))
            if x["kind"] in ("prefill", "serving")}


def max_k(k):
    for pat, f in ((r" s(\d+) ", lambda m: int(m[1])), (r" q(\d+) ctx(\d+) ", lambda m: int(m[1]) + int(m[2])),
                   (r" varlen\d+-(\d+) ", lambda m: int(m[1]))):
        m = re.search(pat, k)
        if m:
            return f(m)
    return 1 << 30


runs = {(b, r): load(b, r) for b in ("v28", "v29") for r in rounds}
rows = [k for k, i in runs[("v28", rounds[0])] if i == "wgmma"]
tab, ctl = {}, {}
for k in rows:
    impl = "wgmma_ps" if max_k(k) <= 512 else "wgmma"
    for r in rounds:
        h, v = runs[("v28", r)], runs[("v29", r)]
        if (k, "mma") in h and (k, "mma") in v:
            tab.setdefault(k, []).append(h[(k, "mma")] / v[(k, "mma")])
        if (k, impl) in h and (k, impl) in v:
            ctl.setdefault(k, []).append(h[(k, impl)] / v[(k, impl)])
print(f"rounds: {rounds}")
print("| config | v28 mma / v29 mma, by round | median | control (kAuto Hopper kernel) | median |")
print("|---|---|---|---|---|")
for k in rows:
    t, c = tab.get(k, []), ctl.get(k, [])
    print(f"| {k} | {' '.join(f'{x:.3f}' for x in t)} | {statistics.median(t):.3f} | "
          f"{' '.join(f'{x:.3f}' for x in c)} | {statistics.median(c) if c else float('nan'):.3f} |")
full = {k: statistics.median(v) for k, v in tab.items() if len(v) == len(rounds)}
cmed = {k: statistics.median(v) for k, v in ctl.items() if len(v) == len(rounds)}
if len(full) < len(rows):
    print(f"RULE: inconclusive: {len(full)} of {len(rows)} rows have all {len(rounds)} rounds")
    sys.exit(0)
short_causal = {k: x for k, x in full.items() if re.match(r"b\d+ s(512|1024) h\d+ d64 causal$", k)}
lo = min(full, key=full.get)
wide = [k for k, x in cmed.items() if not 0.97 <= x <= 1.03]
cmid = statistics.median(cmed.values())
drift = not 0.98 <= cmid <= 1.02
print(f"all rows: median {statistics.median(full.values()):.3f}, lowest {full[lo]:.3f} ({lo})")
print("short causal rows: " + ", ".join(f"{k} {x:.3f}" for k, x in short_causal.items()))
print(f"controls: median {cmid:.3f}, rows {min(cmed.values()):.3f}-{max(cmed.values()):.3f}"
      + (f"; rows outside 0.97-1.03 (noise, not the rule): {', '.join(wide)}" if wide else ""))
if drift:
    verdict = "inconclusive (controls drifted)"
elif full[lo] >= 0.98 and len(short_causal) == 2 and min(short_causal.values()) >= 1.03:
    verdict = "v29 adopted"
    open(f"{d}/adopt", "w").write("1")
else:
    verdict = "v29 not adopted"
print(f"RULE: {verdict}")
