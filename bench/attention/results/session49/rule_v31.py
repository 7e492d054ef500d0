#!/usr/bin/env python3
"""v31's rule (bench/attention/NOTES.md "v31"), from callA's folder of alternating runs:
per bf16 grid row, the head's kAuto kernel (wgmma_ps to 1,024 keys, wgmma past them; best of
the runs) over v31m's wgmma_ps, and the causal rows' wgmma_ps head / v31m (the controls).

  rule_v31.py DIR   (DIR/bench_head_N.csv, DIR/bench_v31_N.csv)
"""
import csv, glob, re, statistics, sys


def best(paths):
    out = {}
    for p in paths:
        for r in csv.DictReader(open(p)):
            if r["kind"] != "prefill":
                continue
            k = (r["config"], r["impl"])
            out[k] = min(out.get(k, 1e9), float(r["ms"]))
    return out


d = sys.argv[1]
head, new = best(glob.glob(f"{d}/bench_head_*.csv")), best(glob.glob(f"{d}/bench_v31_*.csv"))
rows = sorted({c for c, _ in head}, key=lambda c: (" d128" in c, "causal" in c, int(re.search(r" s(\d+)", c).group(1))))
print("| row | head kAuto | ms | v31 wgmma_ps ms | kAuto / v31 | head ps / v31 ps | head wgmma / v31 ps |")
print("|---|---|---|---|---|---|---|")
full, ctrl = {}, []
for c in rows:
    s = int(re.search(r" s(\d+)", c).group(1))
    auto = "wgmma_ps" if s <= 1024 else "wgmma"
    if (c, "wgmma_ps") not in new or (c, auto) not in head:
        continue
    r_auto = head[(c, auto)] / new[(c, "wgmma_ps")]
    r_ps = head[(c, "wgmma_ps")] / new[(c, "wgmma_ps")]
    r_w = head[(c, "wgmma")] / new[(c, "wgmma_ps")]
    print(f"| {c} | {auto} | {head[(c, auto)]:.3f} | {new[(c, 'wgmma_ps')]:.3f} | {r_auto:.3f} | {r_ps:.3f} | {r_w:.3f} |")
    if "causal" in c:
        ctrl.append(r_ps)
    else:
        full.setdefault(s, []).append(r_auto)
print()
print(f"controls (causal wgmma_ps head / v31): median {statistics.median(ctrl):.3f}, {min(ctrl):.3f}-{max(ctrl):.3f}")
ok_ctrl = all(0.98 <= x <= 1.02 for x in ctrl)
adopt = [s for s, v in sorted(full.items()) if min(v) >= 1.01]
low = [s for s, v in sorted(full.items()) if min(v) < 0.99]
print("full rows kAuto / v31 by length:", {s: [round(x, 3) for x in v] for s, v in sorted(full.items())})
print(f"RULE: {'adopted at ' + str(adopt) if adopt and ok_ctrl else 'not adopted'}"
      f" (controls {'in' if ok_ctrl else 'OUT OF'} 0.98-1.02; lengths with a full row < 0.99: {low})")
