"""The table of bench/serving/http_load.sh: per concurrency, output tokens/s and TTFT p50 of
the gRPC client (`flashserve-cli load`), guidellm over HTTP/SSE and, when given, our thin SSE
client (openai_sse_load.py); the HTTP/gRPC ratios and issue 22's musts; with the server's log
and each run's lines of it, the engine's own TTFT p50 per run beside the client's. Exit
status 1 when a run is missing or had failed requests.

    python3 bench/serving/http_load_summary.py --prompt-tokens 128 --new-tokens 128 \\
        --run 1:grpc_c1.txt:guidellm_c1_s0.json[:raw_c1.txt] \\
        --run 64:grpc_c64.txt:guidellm_c64_s0.json,guidellm_c64_s1.json,...[:raw_c64.txt] ...
"""

import argparse
import json
import re
import sys

MUST_RATIO = 0.80          # HTTP/SSE tokens/s over gRPC's, at 64 and 256 streams
MUST_RATIO_STREAMS = (64, 256)
MUST_TTFT_MS = 1.0         # |HTTP TTFT p50 - gRPC TTFT p50| at one stream


def read_grpc(path):
    """(tokens/s, TTFT p50 ms, failed requests) of a `flashserve-cli load` output."""
    text = open(path, encoding="utf-8", errors="replace").read()
    rate = re.search(r"throughput: [\d.]+ req/s, ([\d.]+) generated tokens/s", text)
    ttft = re.search(r"time to first token\s+p50\s+([\d.]+) ms", text)
    failed = re.search(r"succeeded (\d+), failed (\d+)", text)
    if not (rate and ttft and failed):
        raise ValueError(f"{path}: no load summary (the run failed?)")
    return float(rate.group(1)), float(ttft.group(1)), int(failed.group(2))


def tokens_within(request, w0, w1):
    """Output tokens of one guidellm request that arrived within [w0, w1]: the first at
    start + TTFT, the others evenly spaced from there to the request's end (tokens stream at
    the engine's step rate)."""
    first = request["request_start_time"] + request["time_to_first_token_ms"] / 1000
    end, n = request["request_end_time"], request["output_tokens"]
    if n <= 0 or first > w1 or end < w0:
        return 0.0
    count = 1.0 if w0 <= first <= w1 else 0.0
    if n > 1 and end > first:
        overlap = max(0.0, min(end, w1) - max(first, w0))
        count += (n - 1) * overlap / (end - first)
    return count


# The window in which all guidellm processes ran must be this long (seconds) and this share
# of their span to stand for the steady state at the full concurrency.
MIN_COMMON_SECONDS, MIN_COMMON_FRACTION = 3.0, 0.25


def read_guidellm(paths, new_tokens):
    """(tokens/s, TTFT p50 ms, failed requests, streams in flight, common window s, span s)
    of guidellm JSON reports (one benchmark each), `paths` comma-separated: the processes
    http_load.sh ran side by side. Each process starts its benchmark when its own start-up
    (imports, tokenizer, synthetic prompts) ends, seconds apart under load, so the figure is
    taken over the window in which all of them ran (latest start to earliest end): output
    tokens of the successful requests that arrived within it / its length; with one process
    that is its whole run, as the gRPC client counts. TTFT p50 over all their successful
    requests; a request short of new_tokens counts as failed."""
    failed = in_flight = 0
    benches, requests = [], []
    for path in paths.split(","):
        with open(path, encoding="utf-8") as f:
            bench = json.load(f)["benchmarks"][0]
        totals = bench["metrics"]["request_totals"]
        failed += totals["errored"] + totals["incomplete"]
        requests += bench["requests"]["successful"]
        # The streams guidellm kept in flight (a client that cannot keep up keeps fewer).
        in_flight += bench["metrics"]["request_concurrency"]["successful"]["mean"]
        benches.append(bench)
    if not requests:
        raise ValueError(f"{paths}: no successful request")
    w0, w1 = max(b["start_time"] for b in benches), min(b["end_time"] for b in benches)
    span = max(b["end_time"] for b in benches) - min(b["start_time"] for b in benches)
    if len(benches) > 1 and w1 - w0 < max(MIN_COMMON_SECONDS, MIN_COMMON_FRACTION * span):
        raise ValueError(f"{paths}: the processes ran together {max(0, w1 - w0):.1f} s of "
                         f"{span:.1f} s: make the runs longer (REQUESTS_PER_STREAM)")
    failed += sum(r["output_tokens"] < new_tokens for r in requests)
    tokens = sum(tokens_within(r, w0, w1) for r in requests)
    ttfts = sorted(r["time_to_first_token_ms"] for r in requests)
    return (tokens / (w1 - w0), ttfts[(len(ttfts) - 1) // 2], failed, in_flight, w1 - w0,
            span)


def read_raw(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    m = re.search(r"= (\d+) tok/s; TTFT p50 ([\d.]+) ms; failed (\d+)", text)
    if not m:
        raise ValueError(f"{path}: no summary line (the run failed?)")
    return float(m.group(1)), float(m.group(2)), int(m.group(3))


def engine_ttft_p50(log_lines, first, last, grpc):
    """p50 of the engine's TTFT (submit -> first token sampled, the access lines'
    ttft_seconds) over the generation requests of one API logged in lines [first, last), ms."""
    api = "method=GenerateStream" if grpc else "path=/v1/completions"
    values = sorted(float(m.group(1)) * 1000 for line in log_lines[first:last]
                    if " access " in line and api in line and "completion_tokens=0" not in line
                    for m in [re.search(r"ttft_seconds=([\d.e+-]+)", line)] if m)
    return values[(len(values) - 1) // 2] if values else None  # the lower median, as the cli


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt-tokens", type=int, required=True)
    parser.add_argument("--new-tokens", type=int, required=True)
    parser.add_argument("--run", action="append", required=True,
                        help="CONCURRENCY:GRPC_OUTPUT:GUIDELLM_JSON[,GUIDELLM_JSON...][:RAW_OUTPUT]")
    parser.add_argument("--env")
    parser.add_argument("--server-log", help="with --log-ranges: the engine's TTFT per run")
    parser.add_argument("--log-ranges", help="lines 'CLIENT CONCURRENCY FIRST LAST' of the log")
    args = parser.parse_args()
    engine_ttft = {}  # (client, concurrency) -> engine TTFT p50 ms
    if args.server_log and args.log_ranges:
        log_lines = open(args.server_log, encoding="utf-8", errors="replace").read().splitlines()
        for line in open(args.log_ranges, encoding="utf-8").read().splitlines():
            client, c, first, last = line.split()
            engine_ttft[(client, int(c))] = engine_ttft_p50(log_lines, int(first), int(last),
                                                            client == "grpc")
    rows, problems, musts = [], [], []
    has_raw = any(len(r.split(":")) > 3 for r in args.run)
    for run in args.run:
        parts = run.split(":")
        c = int(parts[0])
        row = {"c": c, "processes": len(parts[2].split(",")) if len(parts) > 2 else 0}
        for key, reader in (("grpc", read_grpc), ("http", lambda p: read_guidellm(p, args.new_tokens)),
                            ("raw", read_raw)):
            index = {"grpc": 1, "http": 2, "raw": 3}[key]
            if index >= len(parts):
                continue
            try:
                row[key] = reader(parts[index])
            except (OSError, ValueError, KeyError, IndexError, json.JSONDecodeError) as e:
                problems.append(f"{key} at {c} streams: {e}")
                continue
            if row[key][2]:
                problems.append(f"{key} at {c} streams: {row[key][2]} requests failed or short")
        rows.append(row)

    def cell(row, key, i, fmt):
        return fmt.format(row[key][i]) if key in row else "-"

    def ratio(row, key):
        if key in row and "grpc" in row and row["grpc"][0] > 0:
            return f"{100 * row[key][0] / row['grpc'][0]:.1f} %"
        return "-"

    out = [f"### HTTP/SSE (guidellm) beside gRPC (flashserve-cli load): {args.prompt_tokens} "
           f"prompt tokens -> {args.new_tokens} new tokens, ignore EOS, greedy", ""]
    head = ("| streams | gRPC tokens/s | guidellm tokens/s | guidellm / gRPC | gRPC TTFT p50 ms "
            "| guidellm TTFT p50 ms | guidellm streams in flight (mean) | guidellm processes "
            "| guidellm common window / span s |")
    rule = "|---|---|---|---|---|---|---|---|---|"
    if has_raw:
        head += " raw SSE tokens/s | raw / gRPC | raw TTFT p50 ms |"
        rule += "---|---|---|"
    out += [head, rule]
    for row in rows:
        line = (f"| {row['c']} | {cell(row, 'grpc', 0, '{:,.0f}')} | {cell(row, 'http', 0, '{:,.0f}')} "
                f"| {ratio(row, 'http')} | {cell(row, 'grpc', 1, '{:.2f}')} | {cell(row, 'http', 1, '{:.2f}')} "
                f"| {cell(row, 'http', 3, '{:.1f}')} | {row['processes']} "
                f"| {cell(row, 'http', 4, '{:.1f}')} / {cell(row, 'http', 5, '{:.1f}')} |")
        if has_raw:
            line += (f" {cell(row, 'raw', 0, '{:,.0f}')} | {ratio(row, 'raw')} "
                     f"| {cell(row, 'raw', 1, '{:.2f}')} |")
        out.append(line)

    def must(text, ok):
        musts.append(f"- must: {text}: {'PASS' if ok else 'FAIL'}")

    for row in rows:
        if row["c"] in MUST_RATIO_STREAMS and "grpc" in row and "http" in row:
            r = row["http"][0] / row["grpc"][0]
            raw = (f", raw SSE {row['raw'][0] / row['grpc'][0]:.1%}" if "raw" in row else "")
            must(f"HTTP/SSE >= {MUST_RATIO:.0%} of gRPC tokens/s at {row['c']} streams "
                 f"(guidellm {r:.1%}{raw})", r >= MUST_RATIO)
        if row["c"] == 1 and "grpc" in row and "http" in row:
            d = row["http"][1] - row["grpc"][1]
            must(f"TTFT p50 within {MUST_TTFT_MS:g} ms of gRPC at 1 stream (guidellm {d:+.2f} ms"
                 + (f", raw SSE {row['raw'][1] - row['grpc'][1]:+.2f} ms" if "raw" in row else "")
                 + ")", abs(d) <= MUST_TTFT_MS)
    overheads = []
    for row in rows:
        parts = []
        for key, name in (("grpc", "gRPC"), ("http", "guidellm"), ("raw", "raw SSE")):
            engine = engine_ttft.get((key, row["c"]))
            if key in row and engine is not None:
                parts.append(f"{name} {row[key][1] - engine:.2f} ms (engine {engine:.2f})")
        if parts:
            overheads.append(f"- {row['c']} streams: " + ", ".join(parts))
    if overheads:
        musts += ["", "The client's TTFT p50 minus the engine's (submit -> first token sampled, "
                  "from the server's access lines of the same run): about what the transport "
                  "and the client add (a difference of two medians: small samples can make it "
                  "negative):"] + overheads
    out += [""] + musts
    if problems:
        out += ["", "Problems:"] + [f"- {p}" for p in problems]
    if args.env:
        out += ["", "```", open(args.env, encoding="utf-8").read().rstrip(), "```"]
    print("\n".join(out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
