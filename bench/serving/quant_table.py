#!/usr/bin/env python3
"""Issue 19's quantized-weights table from weights_ratio.sh output folders.

    quant_table.py LABEL=DIR[,DIR...] [LABEL=DIR[,DIR...] ...]

Each LABEL (a model: "8B shape, Q4_K_M") names one or more output folders of
bench/serving/weights_ratio.sh on that model (a first call with CONCURRENCY="1 64 256" and the
TTFT row, then more rounds at 256 streams, say). Every round found there (r<k>_bf16 with its
r<k>_native) counts. Prints one markdown table with a row per model and concurrency: the
native and bf16 output tokens/s of every round, each round's native / bf16 and the ratio of the
sums (the rows' figure), and the HBM fraction of the first round's runs (summarize.py's column,
when run.sh had PEAK_HBM_GBPS); a row per model for the TTFT p50 of run.sh's long-prompt table
(native / bf16 of the medians' sums); and per model the device weights of the native and bf16
servers' start-up lines against the model file's size (run.sh's env.txt). A value a run lacks
reads "-". Exit status: 0 when every model had at least one complete round, 1 otherwise, 2 bad
usage.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weights_ratio import first_table, run_columns, tokens_per_s  # noqa: E402


def rounds_of(folder):
    """[(bf16 run folder, native run folder)] of the complete rounds in a weights_ratio.sh
    output folder, in round order."""
    found = []
    for bf16 in glob.glob(os.path.join(folder, "r*_bf16")):
        m = re.fullmatch(r"r(\d+)_bf16", os.path.basename(bf16))
        native = os.path.join(folder, f"r{m.group(1)}_native") if m else ""
        if m and os.path.isdir(native):
            found.append((int(m.group(1)), bf16, native))
    return [(b, n) for _, b, n in sorted(found)]


def ttft_p50(results_md):
    """The TTFT p50 ms of run.sh's long-prompt table (under a "TTFT with" title) of a
    results.md; None without one."""
    cells = run_columns(first_table(results_md, after="TTFT with"), ("TTFT p50 ms",), "")
    try:
        return float(next(iter(cells.values())))
    except (StopIteration, ValueError):
        return None


def weights_gib(run_folder):
    """The device weights in GiB of a run's server start-up line (server.log): the native
    line's "weights native (...) A GiB + bf16/fp32 B GiB" counts A + B; None without one."""
    log = os.path.join(run_folder, "server.log")
    if not os.path.exists(log):
        return None
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    m = re.search(r"weights native \([^)]*\) ([0-9.]+) GiB \+ bf16/fp32 ([0-9.]+) GiB", text)
    if m:
        return float(m.group(1)) + float(m.group(2))
    m = re.search(r"weights bf16 ([0-9.]+) GiB", text)
    return float(m.group(1)) if m else None


def model_bytes(run_folder):
    """The model file's size from run.sh's env.txt ("model: PATH (N bytes)"); None without."""
    env = os.path.join(run_folder, "env.txt")
    if not os.path.exists(env):
        return None
    with open(env, encoding="utf-8") as f:
        m = re.search(r"^model: .* \((\d+) bytes\)$", f.read(), re.M)
    return int(m.group(1)) if m else None


def join(values, fmt):
    return ", ".join(fmt(v) for v in values) if values else "-"


def model_rows(label, folders):
    """(table lines, device-bytes line, whether a complete round was found) of one model."""
    pairs = [p for folder in folders for p in rounds_of(folder)]
    runs = [(first_table(os.path.join(b, "results.md")), first_table(os.path.join(n, "results.md")))
            for b, n in pairs]
    speeds = [(tokens_per_s(tb), tokens_per_s(tn)) for tb, tn in runs]
    lines = []
    for c in sorted({c for b, n in speeds for c in b if c in n}):
        both = [(b[c], n[c]) for b, n in speeds if c in b and c in n]
        ratios = [n / b for b, n in both if b > 0]
        total_b, total_n = sum(b for b, _ in both), sum(n for _, n in both)
        overall = f"**{total_n / total_b:.3f}x**" if total_b > 0 else "-"
        hbm = "-"
        for tb, tn in runs:  # the first round that has the concurrency
            hb = run_columns(tb, ("HBM fraction",), "").get(c)
            hn = run_columns(tn, ("HBM fraction",), "").get(c)
            if hb is not None and hn is not None:
                hbm = f"{hn} / {hb}"
                break
        lines.append(f"| {label} | {c} | {join([n for _, n in both], lambda v: f'{v:,.1f}')} | "
                     f"{join([b for b, _ in both], lambda v: f'{v:,.1f}')} | "
                     f"{join(ratios, lambda v: f'{v:.3f}')}; {overall} | {hbm} |")
    ttft = [(ttft_p50(os.path.join(b, "results.md")), ttft_p50(os.path.join(n, "results.md")))
            for b, n in pairs]
    ttft = [(b, n) for b, n in ttft if b is not None and n is not None]
    if ttft:
        tb, tn = sum(b for b, _ in ttft), sum(n for _, n in ttft)
        lines.append(f"| {label} | TTFT p50 ms, long prompt | {join([n for _, n in ttft], str)} | "
                     f"{join([b for b, _ in ttft], str)} | "
                     f"{f'{tn / tb:.2f}x' if tb > 0 else '-'} (native / bf16) | |")
    device = "-"
    if pairs:
        bf16_gib, native_gib = weights_gib(pairs[0][0]), weights_gib(pairs[0][1])
        size = model_bytes(pairs[0][1])
        if native_gib is not None and size:
            device = (f"{native_gib:.2f} GiB native for a {size / 2**30:.2f} GiB file "
                      f"({native_gib / (size / 2**30):.2f}x)")
            if bf16_gib is not None:
                device += f", {bf16_gib:.2f} GiB bf16"
    return lines, f"- {label}: {device}", bool(lines)


def main(argv):
    specs = argv[1:]
    if not specs or any("=" not in s or not s.split("=", 1)[1] for s in specs):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    table = ["| model | streams | native tok/s (rounds) | bf16 tok/s (rounds) | "
             "native / bf16 (rounds; sums) | HBM fraction native / bf16 |",
             "|---|---|---|---|---|---|"]
    devices, complete = [], True
    for spec in specs:
        label, folders = spec.split("=", 1)
        lines, device, found = model_rows(label, folders.split(","))
        if not found:
            lines = [f"| {label} | - | - | - | no complete round in {folders} | - |"]
        table += lines
        devices.append(device)
        complete = complete and found
    print("\n".join(table + ["", "Device weights (the start-up lines) against the model "
                             "file:", ""] + devices))
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
