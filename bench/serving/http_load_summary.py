"""The table of bench/serving/http_load.sh: per concurrency, output tokens/s and TTFT p50 of
the gRPC client (`flashserve-cli load`), the third-party generators over HTTP/SSE (guidellm,
NVIDIA's aiperf; either or both) and, when given, our thin SSE client (openai_sse_load.py);
the HTTP/gRPC ratios and issue 22's musts, for each generator; with the server's log and each
run's lines of it, the engine's own TTFT p50 per run beside the client's. Exit status 1 when
a run is missing or had failed requests.

    python3 bench/serving/http_load_summary.py --prompt-tokens 128 --new-tokens 128 \\
        --run 1:grpc_c1.txt:guidellm_c1_s0.json[:raw_c1.txt] \\
        --run 64:grpc_c64.txt:guidellm_c64_s0.json,guidellm_c64_s1.json,...[:raw_c64.txt] \\
        [--aiperf 1:aiperf_c1/profile_export_aiperf.json ...]

An empty guidellm field (`64:grpc_c64.txt::raw_c64.txt`) leaves guidellm out (aiperf alone).
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


def read_aiperf(path, new_tokens):
    """(tokens/s, TTFT p50 ms, failed requests, streams in flight, version) of aiperf's
    profile_export_aiperf.json: its output tokens/s (output tokens of the completed requests /
    its benchmark duration, first request sent to last response: as the gRPC client counts),
    its TTFT p50 (request sent -> first streamed token), errored requests plus those whose
    output length was not new_tokens (its OSL mismatch count), and its effective concurrency
    (the mean number of requests in flight over the run)."""
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    if not report.get("is_complete", False) or report.get("was_cancelled", False):
        raise ValueError(f"{path}: the run did not complete")
    failed = int(report.get("error_request_count", {}).get("avg", 0))
    failed += int(report.get("osl_mismatch_count", {}).get("avg", 0))
    if report["output_sequence_length"]["min"] < new_tokens and not failed:
        failed = 1  # a short request the mismatch count did not count (at least one)
    return (report["output_token_throughput"]["avg"], report["time_to_first_token"]["p50"],
            failed, report.get("effective_concurrency", {}).get("avg", float("nan")),
            report.get("aiperf_version", "?"))


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


def read_runs(args, problems):
    """One row per --run: the readings of each client present, problems appended."""
    aiperf = {}  # concurrency -> aiperf JSON
    for item in args.aiperf or []:
        c, path = item.split(":", 1)
        aiperf[int(c)] = path
    rows = []
    for run in args.run:
        parts = run.split(":")
        c = int(parts[0])
        guidellm = parts[2] if len(parts) > 2 else ""
        row = {"c": c, "processes": len(guidellm.split(",")) if guidellm else 0}
        sources = {"grpc": (parts[1], read_grpc),
                   "http": (guidellm, lambda p: read_guidellm(p, args.new_tokens)),
                   "raw": (parts[3] if len(parts) > 3 else "", read_raw),
                   "aiperf": (aiperf.pop(c, ""), lambda p: read_aiperf(p, args.new_tokens))}
        for key, (path, reader) in sources.items():
            if not path:
                continue
            try:
                row[key] = reader(path)
            except (OSError, ValueError, KeyError, IndexError, TypeError,
                    json.JSONDecodeError) as e:
                problems.append(f"{NAMES[key]} at {c} streams: {e}")
                continue
            if row[key][2]:
                problems.append(f"{NAMES[key]} at {c} streams: {row[key][2]} requests failed "
                                "or short")
        rows.append(row)
    problems += [f"aiperf at {c} streams: no --run for it" for c in aiperf]
    return rows


NAMES = {"grpc": "gRPC", "http": "guidellm", "aiperf": "aiperf", "raw": "raw SSE"}


def table(rows):
    """The markdown table: the columns of the clients that any row has."""
    has = {key: any(key in row for row in rows) for key in NAMES}
    versions = sorted({row["aiperf"][4] for row in rows if "aiperf" in row})
    aiperf = f"aiperf {'/'.join(versions)}"

    def cell(row, key, i, fmt):
        return fmt.format(row[key][i]) if key in row else "-"

    def ratio(row, key):
        if key in row and "grpc" in row and row["grpc"][0] > 0:
            return f"{100 * row[key][0] / row['grpc'][0]:.1f} %"
        return "-"

    head, rule = "| streams | gRPC tokens/s | gRPC TTFT p50 ms |", "|---|---|---|"
    if has["http"]:
        head += (" guidellm tokens/s | guidellm / gRPC | guidellm TTFT p50 ms | guidellm "
                 "streams in flight (mean) | guidellm processes | guidellm common window / "
                 "span s |")
        rule += "---|---|---|---|---|---|"
    if has["aiperf"]:
        head += (f" {aiperf} tokens/s | {aiperf} / gRPC | {aiperf} TTFT p50 ms | {aiperf} "
                 "streams in flight (mean) |")
        rule += "---|---|---|---|"
    if has["raw"]:
        head += " raw SSE tokens/s | raw / gRPC | raw TTFT p50 ms |"
        rule += "---|---|---|"
    out = [head, rule]
    for row in rows:
        line = (f"| {row['c']} | {cell(row, 'grpc', 0, '{:,.0f}')} "
                f"| {cell(row, 'grpc', 1, '{:.2f}')} |")
        if has["http"]:
            line += (f" {cell(row, 'http', 0, '{:,.0f}')} | {ratio(row, 'http')} "
                     f"| {cell(row, 'http', 1, '{:.2f}')} | {cell(row, 'http', 3, '{:.1f}')} "
                     f"| {row['processes']} | {cell(row, 'http', 4, '{:.1f}')} / "
                     f"{cell(row, 'http', 5, '{:.1f}')} |")
        if has["aiperf"]:
            line += (f" {cell(row, 'aiperf', 0, '{:,.0f}')} | {ratio(row, 'aiperf')} "
                     f"| {cell(row, 'aiperf', 1, '{:.2f}')} "
                     f"| {cell(row, 'aiperf', 3, '{:.1f}')} |")
        if has["raw"]:
            line += (f" {cell(row, 'raw', 0, '{:,.0f}')} | {ratio(row, 'raw')} "
                     f"| {cell(row, 'raw', 1, '{:.2f}')} |")
        out.append(line)
    return out


def must_lines(rows):
    """Issue 22's musts, one line per third-party generator present in a row."""
    musts = []
    for row in rows:
        for key in ("http", "aiperf"):
            if key not in row or "grpc" not in row:
                continue
            name = NAMES[key] + (f" {row[key][4]}" if key == "aiperf" else "")
            raw = "raw" in row
            if row["c"] in MUST_RATIO_STREAMS:
                r = row[key][0] / row["grpc"][0]
                extra = f", raw SSE {row['raw'][0] / row['grpc'][0]:.1%}" if raw else ""
                ok = r >= MUST_RATIO
                musts.append(f"- must: HTTP/SSE >= {MUST_RATIO:.0%} of gRPC tokens/s at "
                             f"{row['c']} streams ({name} {r:.1%}{extra}): "
                             f"{'PASS' if ok else 'FAIL'}")
            if row["c"] == 1:
                d = row[key][1] - row["grpc"][1]
                extra = f", raw SSE {row['raw'][1] - row['grpc'][1]:+.2f} ms" if raw else ""
                ok = abs(d) <= MUST_TTFT_MS
                musts.append(f"- must: TTFT p50 within {MUST_TTFT_MS:g} ms of gRPC at 1 stream "
                             f"({name} {d:+.2f} ms{extra}): {'PASS' if ok else 'FAIL'}")
    return musts


def overhead_lines(rows, engine_ttft):
    """Each client's TTFT p50 minus the engine's over the same run's access lines."""
    overheads = []
    for row in rows:
        parts = []
        for key, name in NAMES.items():
            engine = engine_ttft.get((key, row["c"]))
            if key in row and engine is not None:
                parts.append(f"{name} {row[key][1] - engine:.2f} ms (engine {engine:.2f})")
        if parts:
            overheads.append(f"- {row['c']} streams: " + ", ".join(parts))
    if not overheads:
        return []
    return ["", "The client's TTFT p50 minus the engine's (submit -> first token sampled, "
            "from the server's access lines of the same run): about what the transport "
            "and the client add (a difference of two medians: small samples can make it "
            "negative):"] + overheads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt-tokens", type=int, required=True)
    parser.add_argument("--new-tokens", type=int, required=True)
    parser.add_argument("--run", action="append", required=True,
                        help="CONCURRENCY:GRPC_OUTPUT:[GUIDELLM_JSON[,GUIDELLM_JSON...]][:RAW_OUTPUT]")
    parser.add_argument("--aiperf", action="append",
                        help="CONCURRENCY:AIPERF_JSON (profile_export_aiperf.json)")
    parser.add_argument("--env")
    parser.add_argument("--server-log", help="with --log-ranges: the engine's TTFT per run")
    parser.add_argument("--log-ranges", help="lines 'CLIENT CONCURRENCY FIRST LAST' of the log "
                        "(CLIENT: grpc, http (guidellm), aiperf or raw)")
    args = parser.parse_args()
    engine_ttft = {}  # (client, concurrency) -> engine TTFT p50 ms
    if args.server_log and args.log_ranges:
        log_lines = open(args.server_log, encoding="utf-8", errors="replace").read().splitlines()
        for line in open(args.log_ranges, encoding="utf-8").read().splitlines():
            client, c, first, last = line.split()
            engine_ttft[(client, int(c))] = engine_ttft_p50(log_lines, int(first), int(last),
                                                            client == "grpc")
    problems = []
    rows = read_runs(args, problems)
    generators = [NAMES[k] for k in ("http", "aiperf") if any(k in row for row in rows)]
    out = [f"### HTTP/SSE ({', '.join(generators) or 'no third-party generator'}) beside gRPC "
           f"(flashserve-cli load): {args.prompt_tokens} prompt tokens -> {args.new_tokens} "
           "new tokens, ignore EOS, greedy", ""]
    out += table(rows) + [""] + must_lines(rows) + overhead_lines(rows, engine_ttft)
    if problems:
        out += ["", "Problems:"] + [f"- {p}" for p in problems]
    if args.env:
        out += ["", "```", open(args.env, encoding="utf-8").read().rstrip(), "```"]
    print("\n".join(out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
