#!/usr/bin/env python3
"""Before/after table of two attention_bench builds run in alternation on one GPU.

  compare_runs.py --base A_1.csv A_2.csv --new B_1.csv B_2.csv [--impl wgmma] [--also mma]

Each CSV is one `attention_bench --csv` run (columns kind,config,impl,ms,...). For every
(kind, config) row of --impl it prints the best (lowest) ms of each build over its runs and
speedup = base / new (above 1: the new build is faster), as a markdown table; with --also, the
ratio of that implementation's best time (over both builds' runs) to the new build's --impl
(the automatic choice's crossover).
"""
import argparse
import csv


def load(paths):
    runs = []
    for path in paths:
        with open(path, newline="") as f:
            runs.append({(r["kind"], r["config"], r["impl"]): float(r["ms"]) for r in csv.DictReader(f)})
    return runs


def best(runs, key):
    vals = [run[key] for run in runs if key in run]
    return min(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--impl", default="wgmma")
    ap.add_argument("--also")
    a = ap.parse_args()
    base, new = load(a.base), load(a.new)
    head = f"| kind | config | base ms | new ms | base / new |"
    sep = "|---|---|---|---|---|"
    if a.also:
        head += f" {a.also} / new |"
        sep += "---|"
    print(head)
    print(sep)
    for key in base[0]:
        kind, config, impl = key
        if impl != a.impl:
            continue
        b, n = best(base, key), best(new, key)
        if b is None or n is None:
            continue
        line = f"| {kind} | {config} | {b:.4f} | {n:.4f} | {b / n:.3f} |"
        if a.also:
            o = best(base + new, (kind, config, a.also))
            line += f" {o / n:.3f} |" if o is not None else " n/a |"
        print(line)


if __name__ == "__main__":
    main()
