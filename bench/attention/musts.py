#!/usr/bin/env python3
"""Issue 20's musts, read off a peers table (bench/attention/peers_sdpa.py's table.md).

  musts.py OUT_DIR/table.md [OTHER_RUN_DIR/table.md ...] [--impl auto|wgmma|wgmma_ps|mma]

Ratios are a column against the same run's cuDNN (`IMPL/cuDNN`), bf16 rows unless said. The
default, auto, reads the kernel kAuto runs on each row (kernels/attention/README.md): wgmma
on every grid and serving row (the d64 thresholds sit at 512 queries), in its persistent form
`wgmma_ps` on the unsplit rows of its class (v34: rule_common.kauto_v34) where the
table has that column (tables from before v25 have not:
wgmma there, which kAuto then ran; from v25 to v31 kAuto's class stopped at 512, then 1,024
keys: --impl reads one column). --impl pins one column everywhere. Decode is `ours/cuDNN`.
  - prefill grid at s >= 1k: >= 0.95 everywhere;  at s >= 4k: >= 1.0;  s = 512: >= 1.0
    (the sliding-window rows have no peer and are left out);
  - serving-shaped rows: >= 1.0;  decode: >= 1.0 at every point.
Prints one markdown bullet a must, "met" or "not met", with the rows that decide it.
With several tables (runs of one build), each row's ratio is the median over the tables that
have it, and a first line says so: between two runs the short rows' ratios move by up to 0.2
(bench/attention/NOTES.md, session 42), and one table decides a row only far from its bar.
"""
import argparse
import re
import statistics

from rule_common import kauto_v34  # kAuto's kernel on a row (beside this script)


def sections(path):
    """{section title's first word: [row dict]} of the markdown tables in `path`."""
    out, title, head = {}, None, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("### "):
                title, head = line[4:].split()[0], None
            elif line.startswith("|") and title is not None:
                cells = [c.strip() for c in line.strip("|").split("|")]
                if head is None:
                    head = cells
                elif not set(line) <= set("|-: "):
                    out.setdefault(title, []).append(dict(zip(head, cells)))
    return out


def merged(paths, cols):
    """sections() of one table, or of several with each row's `cols` the median over the
    tables that have a number there (rows keyed by section and config, in the first table's
    order; a row missing from the first table is left out)."""
    tables = [sections(p) for p in paths]
    if len(tables) == 1:
        return tables[0]
    out = {}
    for title, rows in tables[0].items():
        for row in rows:
            row = dict(row)
            for c in cols:
                vals = [num(r.get(c)) for t in tables for r in t.get(title, [])
                        if r.get("config") == row.get("config")]
                vals = [v for v in vals if v is not None]
                row[c] = str(statistics.median(vals)) if vals else None
            out.setdefault(title, []).append(row)
    return out


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


GRID = re.compile(r"^b\d+ s(\d+) h\d+ d(\d+) (full|causal)( fp16)?$")

# kAuto's persistent class (kernels/attention/attention_prefill.cu,
# hopper_persistent_preferred), restated in rule_common.kauto_v34; the test
# (tests/unit/bench_attention/musts_test.py) pins which column each row reads.




def fmt(x):
    return f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--impl", default="auto")
    a = ap.parse_args()
    col = "wgmma/cuDNN" if a.impl == "auto" else f"{a.impl}/cuDNN"
    short_col = "wgmma_ps/cuDNN" if a.impl == "auto" else col  # kAuto's persistent rows
    t = merged(a.tables, [col, short_col, "ours/cuDNN"])

    def ratio_of(r):
        """The row's ratio in the column of the kernel kAuto runs there."""
        short = num(r.get(short_col))
        if short is not None and kauto_v34(r["config"]) == "wgmma_ps":
            return short
        return num(r.get(col))

    grid = {}  # (fp16, d, mask) -> [(s, ratio)]
    for r in t.get("prefill", []):
        m = GRID.match(r["config"])
        ratio = ratio_of(r)
        if m and ratio is not None:
            grid.setdefault((bool(m[4]), int(m[2]), m[3]), []).append((int(m[1]), ratio))
    bf16 = {k[1:]: sorted(v) for k, v in grid.items() if not k[0]}
    order = sorted(bf16)  # (64, 'causal'), (64, 'full'), (128, ...)

    def rows(pred):
        return [(d, mask, s, x) for (d, mask) in order for s, x in bf16[(d, mask)] if pred(s)]

    def span(rs):
        xs = [x for *_, x in rs]
        return f"{fmt(min(xs))}-{fmt(max(xs))}" if xs else "no rows"

    def per_shape(pred):
        return "; ".join(f"d{d} {mask} " + " / ".join(fmt(x) for s, x in bf16[(d, mask)] if pred(s))
                         for d, mask in order)

    def name(d, mask, s):
        return f"d{d} {mask} {s // 1024}k" if s >= 1024 else f"d{d} {mask} s{s}"

    out = []
    if len(a.tables) > 1:
        out.append(f"- Each row's ratio: the median of {len(a.tables)} runs")
    r1k = rows(lambda s: s >= 1024)
    low = [name(d, m, s) for d, m, s, x in r1k if x < 0.95]
    out.append(f"- Prefill grid at s >= 1k, must >= 0.95 everywhere: **{'met' if r1k and not low else 'not met'}**: "
               f"{span(r1k)} ({per_shape(lambda s: s >= 1024)})"
               + (f"; below 0.95: {', '.join(low)}" if low else ""))
    r4k = rows(lambda s: s >= 4096)
    ok4 = [name(d, m, s) for d, m, s, x in r4k if x >= 1.0]
    no4 = [f"{name(d, m, s)} {fmt(x)}" for d, m, s, x in r4k if x < 1.0]
    out.append(f"- Prefill at s >= 4k, must >= 1.0: **{'met' if r4k and not no4 else f'met at {len(ok4)} of {len(r4k)} rows'}**"
               + (f"; not at {', '.join(no4)}" if no4 else ""))
    r512 = rows(lambda s: s == 512)
    out.append(f"- s = 512, must >= 1.0: **{'met' if r512 and all(x >= 1.0 for *_, x in r512) else 'not met'}**: "
               + ", ".join(f"d{d} {m} {fmt(x)}" for d, m, s, x in r512))
    fp16 = [x for k, v in grid.items() if k[0] for _, x in v]
    if fp16:
        out.append(f"- fp16 grid (measured, no must): {fmt(min(fp16))}-{fmt(max(fp16))}")
    for kind, get, label in (("serving-shaped", ratio_of, "Serving-shaped rows"),
                             ("decode", lambda r: num(r.get("ours/cuDNN")), "Decode")):
        parts, met = [], True
        for fp in (False, True):
            vals = [(get(r), r["config"]) for r in t.get(kind, [])
                    if r["config"].endswith(" fp16") == fp and get(r) is not None]
            if not vals:
                continue
            lo = min(vals)
            met &= lo[0] >= 1.0
            parts.append(f"{'fp16' if fp else 'bf16'} {fmt(lo[0])}-{fmt(max(vals)[0])} (lowest: {lo[1]})")
        out.append(f"- {label}, must >= 1.0: **{'met' if parts and met else 'not met'}**: " + "; ".join(parts))
    print("\n".join(out))


if __name__ == "__main__":
    main()
