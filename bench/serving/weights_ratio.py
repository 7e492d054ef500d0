#!/usr/bin/env python3
"""The native / bf16 throughput table of bench/serving/weights_ratio.sh.

Reads results.md in OUT_DIR/r<round>_bf16 and OUT_DIR/r<round>_native (bench/serving/run.sh's
tables, written by summarize.py: one row per concurrency, "| concurrency | requests ok |
output tokens/s | ...") for rounds 1..ROUNDS and prints a markdown table: per concurrency and round, both servers'
output tokens/s and native / bf16; then the rounds' sums' ratio. With --variant, also
OUT_DIR/r<round>_variant (a second build served with native weights: a change against the
head), its tokens/s and its ratios to bf16 and to the head's native. A run whose table is
missing or lacks a concurrency reads "-" there and leaves that concurrency's overall ratios
out (the exit status is then 1). Only the first table of each results.md is read (the load
matrix; run.sh may append others, e.g. TTFT or extra models). Where the runs were on a GPU, a
second table gives each run's SM clock, power and power-capped share (summarize.py's
columns), so that a ratio is read beside the clocks it ran at.

Usage: weights_ratio.py OUT_DIR ROUNDS [--variant]
"""
import os
import sys


def load_rows(path):
    """{concurrency: output tokens/s} from the first table of a results.md; {} if absent."""
    if not os.path.exists(path):
        return {}
    rows = {}
    in_table = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| concurrency |"):
                if rows:
                    break  # a second table: stop at the first one's end
                in_table = True
                continue
            if not in_table or not line.startswith("|"):
                if in_table and rows:
                    break
                continue
            if len(cells) < 3 or not cells[0].isdigit():
                continue
            try:
                rows[int(cells[0])] = float(cells[2].replace(",", ""))
            except ValueError:
                continue
    return rows


def load_gpu_columns(path):
    """{concurrency: "MHz / W / capped"} from the first table's "SM MHz", "GPU W" and
    "power-capped" columns (summarize.py; a GPU run), {} if absent or all "-"."""
    if not os.path.exists(path):
        return {}
    rows, index = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| concurrency |"):
                if index is not None:
                    break
                names = ("SM MHz", "GPU W", "power-capped")
                if not all(n in cells for n in names):
                    return {}
                index = [cells.index(n) for n in names]
                continue
            if index is None or not line.startswith("|") or not cells[0].isdigit():
                if index is not None and rows and not line.startswith("|"):
                    break
                continue
            values = [cells[i] if i < len(cells) else "-" for i in index]
            if any(v != "-" for v in values):
                rows[int(cells[0])] = " / ".join(values)
    return rows


def gpu_table(out_dir, rounds, modes):
    """Lines of each run's SM clock, power and power-capped share; [] when no run has them."""
    runs = {(r, w): load_gpu_columns(os.path.join(out_dir, f"r{r}_{w}", "results.md"))
            for r in range(1, rounds + 1) for w in modes}
    concurrencies = sorted({c for rows in runs.values() for c in rows})
    if not concurrencies:
        return []
    lines = ["", "GPU during each run (SM MHz median / W mean / power-capped share):", "",
             "| concurrency | round | " + " | ".join(modes) + " |",
             "|---|---|" + "---|" * len(modes)]
    for c in concurrencies:
        for r in range(1, rounds + 1):
            lines.append(f"| {c} | {r} | " +
                         " | ".join(runs[(r, w)].get(c, "-") for w in modes) + " |")
    return lines


def ratio_table(out_dir, rounds, variant=False):
    """The markdown lines and whether every run had every concurrency."""
    modes = ("bf16", "native", "variant") if variant else ("bf16", "native")
    runs = {(r, w): load_rows(os.path.join(out_dir, f"r{r}_{w}", "results.md"))
            for r in range(1, rounds + 1) for w in modes}
    concurrencies = sorted({c for rows in runs.values() for c in rows})
    complete = bool(concurrencies)
    # (numerator, denominator) of each ratio column.
    pairs = [("native", "bf16")] + ([("variant", "bf16"), ("variant", "native")] if variant else [])
    lines = ["| concurrency | round | " + " | ".join(f"{w} tok/s" for w in modes) + " | " +
             " | ".join(f"{a} / {b}" for a, b in pairs) + " |",
             "|---|---|" + "---|" * (len(modes) + len(pairs))]
    fmt = lambda v: "-" if v is None else f"{v:,.1f}"
    overall = []
    for c in concurrencies:
        sums = dict.fromkeys(modes, 0.0)
        whole = True
        for r in range(1, rounds + 1):
            tps = {w: runs[(r, w)].get(c) for w in modes}
            if any(v is None for v in tps.values()):
                whole = False
            else:
                for w in modes:
                    sums[w] += tps[w]
            ratios = [f"{tps[a] / tps[b]:.3f}" if tps[a] is not None and tps[b] else "-"
                      for a, b in pairs]
            lines.append(f"| {c} | {r} | " + " | ".join(fmt(tps[w]) for w in modes) + " | " +
                         " | ".join(ratios) + " |")
        if whole and all(sums[b] > 0 for _, b in pairs):
            overall.append(f"concurrency {c}: " + ", ".join(
                f"{sums[a] / sums[b]:.3f} ({a} / {b})" for a, b in pairs) +
                f" over {rounds} rounds")
        complete = complete and whole
    return lines + [""] + overall + gpu_table(out_dir, rounds, modes), complete


def main(argv):
    variant = argv[3:] == ["--variant"]
    if len(argv) != 3 + variant or not argv[2].isdigit() or int(argv[2]) < 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    lines, complete = ratio_table(argv[1], int(argv[2]), variant)
    print("\n".join(lines))
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
