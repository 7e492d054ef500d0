#!/usr/bin/env python3
"""The native / bf16 throughput table of bench/serving/weights_ratio.sh.

Reads results.md in OUT_DIR/r<round>_bf16 and OUT_DIR/r<round>_native (bench/serving/run.sh's
tables, written by summarize.py: one row per concurrency, "| concurrency | requests ok |
output tokens/s | ...") for rounds 1..ROUNDS and prints a markdown table: per concurrency and round, both servers'
output tokens/s and native / bf16; then the rounds' sums' ratio. A run whose table is missing
or lacks a concurrency reads "-" there and leaves that concurrency's overall ratio out (the
exit status is then 1). Only the first table of each results.md is read (the load matrix;
run.sh may append others, e.g. TTFT or extra models).

Usage: weights_ratio.py OUT_DIR ROUNDS
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


def ratio_table(out_dir, rounds):
    """The markdown lines and whether every run had every concurrency."""
    runs = {(r, w): load_rows(os.path.join(out_dir, f"r{r}_{w}", "results.md"))
            for r in range(1, rounds + 1) for w in ("bf16", "native")}
    concurrencies = sorted({c for rows in runs.values() for c in rows})
    complete = bool(concurrencies)
    lines = ["| concurrency | round | bf16 tok/s | native tok/s | native / bf16 |",
             "|---|---|---|---|---|"]
    overall = []
    for c in concurrencies:
        sums = {"bf16": 0.0, "native": 0.0}
        whole = True
        for r in range(1, rounds + 1):
            b, n = runs[(r, "bf16")].get(c), runs[(r, "native")].get(c)
            if b is None or n is None:
                whole = False
            else:
                sums["bf16"] += b
                sums["native"] += n
            ratio = f"{n / b:.3f}" if b and n is not None else "-"
            fmt = lambda v: "-" if v is None else f"{v:,.1f}"
            lines.append(f"| {c} | {r} | {fmt(b)} | {fmt(n)} | {ratio} |")
        if whole and sums["bf16"] > 0:
            overall.append(f"concurrency {c}: {sums['native'] / sums['bf16']:.3f} "
                           f"(native / bf16 over {rounds} rounds)")
        complete = complete and whole
    return lines + [""] + overall, complete


def main(argv):
    if len(argv) != 3 or not argv[2].isdigit() or int(argv[2]) < 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    lines, complete = ratio_table(argv[1], int(argv[2]))
    print("\n".join(lines))
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
