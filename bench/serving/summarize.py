#!/usr/bin/env python3
"""The serving results table from `flashserve-cli load` outputs (used by bench/serving/run.sh).

Each input is the text one `flashserve-cli load` run printed (tools/cli/load.cc). The table
has one row per run: output tokens/s (generated tokens over the run's wall time), TTFT and
inter-token latency p50/p99 (client-side), and a check that every request succeeded and
generated exactly --new-tokens tokens (EOS ignored). peer_hf.py prints rows in the same
format (format_table). Exit status 1 when a run failed or fell short of the tokens asked.

Usage: summarize.py --label TEXT --new-tokens N [--env env.txt] --out results.md LOAD_OUTPUT...
"""
import argparse
import re
import sys

COLUMNS = ["concurrency", "requests ok", "output tokens/s", "TTFT p50 ms", "TTFT p99 ms",
           "ITL p50 ms", "ITL p99 ms", "tokens/request"]

PATTERNS = {
    "concurrency": r"target \S+: (\d+) requests, concurrency (\d+), ([\d.]+) s",
    "succeeded": r"succeeded (\d+), failed (\d+)",
    "throughput": r"throughput: [\d.]+ req/s, ([\d.]+) generated tokens/s",
    "tokens": r"tokens: (\d+) prompt, (\d+) generated \(([\d.]+) per request\)",
    "ttft": r"time to first token\s+p50\s+([\d.]+) ms\s+p90\s+([\d.]+) ms\s+p99\s+([\d.]+) ms",
    "itl": r"inter-token latency\s+p50\s+([\d.]+) ms\s+p90\s+([\d.]+) ms\s+p99\s+([\d.]+) ms",
}


def parse_load_output(path):
    """One run's figures; raises ValueError naming the file and the missing line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = {}
    for name, pattern in PATTERNS.items():
        m = re.search(pattern, text)
        if m is None:
            raise ValueError(f"{path}: no '{name}' line in the load output:\n{text[-2000:]}")
        found[name] = m.groups()
    requests, concurrency, _ = found["concurrency"]
    ok, _failed = found["succeeded"]
    return {
        "concurrency": int(concurrency),
        "requests": int(requests),
        "ok": int(ok),
        "tokens_per_s": float(found["throughput"][0]),
        "ttft_p50": float(found["ttft"][0]), "ttft_p99": float(found["ttft"][2]),
        "itl_p50": float(found["itl"][0]), "itl_p99": float(found["itl"][2]),
        "tokens_per_request": float(found["tokens"][2]),
    }


def format_row(r):
    return "| " + " | ".join([
        str(r["concurrency"]), f'{r["ok"]}/{r["requests"]}', f'{r["tokens_per_s"]:,.1f}',
        f'{r["ttft_p50"]:.1f}', f'{r["ttft_p99"]:.1f}', f'{r["itl_p50"]:.2f}', f'{r["itl_p99"]:.2f}',
        f'{r["tokens_per_request"]:.1f}']) + " |"


def format_table(label, rows):
    lines = [f"### {label}", "", "| " + " | ".join(COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    lines += [format_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--new-tokens", type=int, required=True)
    parser.add_argument("--env", help="env.txt written by run.sh, quoted under the table")
    parser.add_argument("--out", required=True)
    parser.add_argument("outputs", nargs="+")
    args = parser.parse_args()
    rows, problems = [], []
    for path in args.outputs:
        try:
            r = parse_load_output(path)
        except (OSError, ValueError) as e:
            problems.append(str(e))
            continue
        if r["ok"] != r["requests"]:
            problems.append(f"{path}: {r['requests'] - r['ok']} of {r['requests']} requests failed")
        if r["tokens_per_request"] != args.new_tokens:
            problems.append(f"{path}: {r['tokens_per_request']} tokens per request, not {args.new_tokens}")
        rows.append(r)
    text = format_table(args.label, rows)
    if args.env:
        with open(args.env, encoding="utf-8") as f:
            text += "\n```\n" + f.read() + "```\n"
    if problems:
        text += "\n**Problems:**\n" + "".join(f"- {p}\n" for p in problems)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    for p in problems:
        print(f"summarize.py: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
