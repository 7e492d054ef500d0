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
columns), so that a ratio is read beside the clocks it ran at, and a third its engine steps
(decode-only and with prompt tokens: count and mean ms), so that a ratio is read by the kind
of step it lost in.

Usage: weights_ratio.py OUT_DIR ROUNDS [--variant]
"""
import os
import sys


def first_table(path, after=None):
    """(header cells, {concurrency: row cells}) of the first table of a results.md, or with
    `after` of the first table under a "### " title that contains it (run.sh's TTFT table);
    ([], {}) if absent."""
    header, rows = [], {}
    if not os.path.exists(path):
        return header, rows
    with open(path, encoding="utf-8") as f:
        for line in f:
            if after is not None:
                if line.startswith("### ") and after in line:
                    after = None
                continue
            if not line.startswith("|"):
                if rows:
                    break  # the first table has ended
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "concurrency":
                if header:
                    break  # a second table
                header = cells
            elif header and cells[0].isdigit():
                rows[int(cells[0])] = cells
    return header, rows


def tokens_per_s(table):
    """{concurrency: output tokens/s} of a first_table()."""
    header, rows = table
    if "output tokens/s" not in header:
        return {}
    i, out = header.index("output tokens/s"), {}
    for c, cells in rows.items():
        try:
            out[c] = float(cells[i].replace(",", ""))
        except (IndexError, ValueError):
            continue
    return out


GPU_COLUMNS = ("SM MHz", "GPU W", "power-capped")
STEP_COLUMNS = ("decode steps (n / mean ms)", "steps with prompts (n / mean ms)")


def run_columns(table, names, sep):
    """{concurrency: the cells of `names` joined by sep} of a first_table() that has those
    columns; rows whose cells all read "-" are left out."""
    header, rows = table
    if not all(n in header for n in names):
        return {}
    index = [header.index(n) for n in names]
    out = {}
    for c, cells in rows.items():
        values = [cells[i] if i < len(cells) else "-" for i in index]
        if any(v != "-" for v in values):
            out[c] = sep.join(values)
    return out


def gpu_columns(table):
    """{concurrency: "MHz / W / capped"} of a first_table() with summarize.py's GPU columns
    (a GPU run)."""
    return run_columns(table, GPU_COLUMNS, " / ")


def step_columns(table):
    """{concurrency: "decode n / ms; prompts n / ms"} of a first_table() with summarize.py's
    engine-step columns (servers with the decode-step histogram)."""
    return run_columns(table, STEP_COLUMNS, "; ")


def run_table(title, per_run, rounds, modes):
    """Lines of one cell a run (per_run: {(round, mode): {concurrency: cell}}) under `title`;
    [] when no run has a cell."""
    concurrencies = sorted({c for rows in per_run.values() for c in rows})
    if not concurrencies:
        return []
    lines = ["", title, "", "| concurrency | round | " + " | ".join(modes) + " |",
             "|---|---|" + "---|" * len(modes)]
    for c in concurrencies:
        for r in range(1, rounds + 1):
            lines.append(f"| {c} | {r} | " +
                         " | ".join(per_run[(r, w)].get(c, "-") for w in modes) + " |")
    return lines


def gpu_table(tables, rounds, modes):
    """Lines of each run's SM clock, power and power-capped share, then of its engine steps
    (decode-only steps and steps with prompts: count and mean ms, which say where a ratio's
    time went); [] for a table no run has. tables: {(round, mode): first_table()}."""
    return (run_table("GPU during each run (SM MHz median / W mean / power-capped share):",
                      {k: gpu_columns(t) for k, t in tables.items()}, rounds, modes) +
            run_table("Engine steps of each run (decode-only steps: n / mean ms; steps with "
                      "prompt tokens: n / mean ms):",
                      {k: step_columns(t) for k, t in tables.items()}, rounds, modes))


def ratio_table(out_dir, rounds, variant=False):
    """The markdown lines and whether every run had every concurrency."""
    modes = ("bf16", "native", "variant") if variant else ("bf16", "native")
    tables = {(r, w): first_table(os.path.join(out_dir, f"r{r}_{w}", "results.md"))
              for r in range(1, rounds + 1) for w in modes}  # each file read once
    runs = {key: tokens_per_s(t) for key, t in tables.items()}
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
    return lines + [""] + overall + gpu_table(tables, rounds, modes), complete


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
