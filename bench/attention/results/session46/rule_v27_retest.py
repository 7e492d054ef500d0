#!/usr/bin/env python3
"""v27's re-test rule (NOTES.md "v27 re-test", written before call P): reads DIR/bench_{head,v27}_{1..R}.csv
(alternate_bench.sh) and prints, for each row of at most 1,024 keys, head's kAuto kernel over
v27's per round and their median, the control (the one-tile `wgmma`, the same kernel in both
builds) likewise, then the RULE line; writes DIR/adopt when v27 is adopted.

  rule_v27_retest.py DIR

kAuto's kernel: head `wgmma_ps` at <= 512 keys (v25's static walk), else `wgmma`; v27
`wgmma_ps` at <= 1,024 keys (the counter walk). Rule: every class row's median >= 0.98, the
median over the class rows >= 1.03, and the median of the control rows' medians within
0.98-1.02 (else the call is inconclusive: the machine drifted between the builds' runs; one
control row off alone is that row's noise, printed)."""
import csv
import glob
import re
import statistics
import sys

d = sys.argv[1]
rounds = sorted(int(re.search(r"_(\d+)\.csv$", f)[1]) for f in glob.glob(f"{d}/bench_head_*.csv"))


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


runs = {(b, r): load(b, r) for b in ("head", "v27") for r in rounds}
rows = [k for k, i in runs[("head", rounds[0])] if i == "wgmma" and max_k(k) <= 1024]
auto = {"head": lambda k: "wgmma_ps" if max_k(k) <= 512 else "wgmma", "v27": lambda k: "wgmma_ps"}
tab, ctl = {}, {}
for k in rows:
    for r in rounds:
        h, v = runs[("head", r)], runs[("v27", r)]
        a, b = (k, auto["head"](k)), (k, auto["v27"](k))
        if a in h and b in v:
            tab.setdefault(k, []).append(h[a] / v[b])
        if (k, "wgmma") in h and (k, "wgmma") in v:
            ctl.setdefault(k, []).append(h[(k, "wgmma")] / v[(k, "wgmma")])
print(f"rounds: {rounds}")
print("| config | head kAuto / v27 kAuto, by round | median | control (wgmma / wgmma) | median |")
print("|---|---|---|---|---|")
for k in rows:
    t, c = tab.get(k, []), ctl.get(k, [])
    print(f"| {k} | {' '.join(f'{x:.3f}' for x in t)} | {statistics.median(t):.3f} | "
          f"{' '.join(f'{x:.3f}' for x in c)} | {statistics.median(c):.3f} |")
full = {k: statistics.median(v) for k, v in tab.items() if len(v) == len(rounds)}
cmed = {k: statistics.median(v) for k, v in ctl.items() if len(v) == len(rounds)}
if not full or len(full) < len(rows):
    print(f"RULE: inconclusive: {len(full)} of {len(rows)} rows have all {len(rounds)} rounds")
    sys.exit(0)
lo = min(full, key=full.get)
med = statistics.median(full.values())
wide = [k for k, x in cmed.items() if not 0.97 <= x <= 1.03]
cmid = statistics.median(cmed.values())
drift = not 0.98 <= cmid <= 1.02
print(f"controls: median {cmid:.3f}, rows {min(cmed.values()):.3f}-{max(cmed.values()):.3f}"
      + (f"; rows outside 0.97-1.03 (noise, not the rule): {', '.join(wide)}" if wide else ""))
if drift:
    verdict = "inconclusive (controls drifted)"
elif full[lo] >= 0.98 and med >= 1.03:
    verdict = "v27 adopted"
    open(f"{d}/adopt", "w").write("1")
else:
    verdict = "v27 not adopted"
print(f"class <= 1,024 keys: {len(full)} rows, lowest median {full[lo]:.3f} ({lo}), median {med:.3f}: "
      f"RULE: {verdict}")
