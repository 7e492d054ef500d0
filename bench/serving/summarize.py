#!/usr/bin/env python3
"""The serving results tables from `flashserve-cli load` outputs (used by bench/serving/run.sh).

Table mode (the default): each input is the text one `flashserve-cli load` run printed
(tools/cli/load.cc), with the lines run.sh appends ("server cpu: S s"); one row per run:
output tokens/s (generated tokens over the run's wall time), TTFT and inter-token latency
p50/p99 (client-side), generated tokens per stream message, the server's and the client's CPU
time per generated token, the HBM bandwidth fraction of the engine steps (below) and a check
that every request succeeded and generated exactly --new-tokens tokens (EOS ignored).
peer_hf.py prints rows in the same format (format_table). Exit status 1 when a run failed or
fell short of the tokens asked.

HBM bandwidth fraction of a run (needs --server-log, --info, --peak-hbm-gbps and the /metrics
scrapes run.sh takes just before and after the run, X.before.prom and X.after.prom beside X.txt):

    steps      = delta flashserve_engine_steps_total
    step_s     = delta flashserve_engine_step_seconds_sum             (engine wall time)
    weights    = the device weight bytes the server logged at start-up: "weights bf16 X GiB",
                 or "weights native (formats) X GiB + bf16/fp32 Y GiB" (X + Y; older servers:
                 "weights X MiB bf16")
    kv_token   = 2 (K, V) x layers x KV heads x head_dim x 2 bytes    (`flashserve-cli info`)
    kv_bytes   = ok requests x ((N - 1) x (P + N / 2) + P) x kv_token
    fraction   = (steps * weights + kv_bytes) / step_s / (peak GB/s * 1e9)

Every step reads every weight once (the GEMMs of all its tokens share one pass) and the K/V
of its sequences: a request of P prompt tokens and N new tokens reads P tokens' K/V in its
prefill and P + 1, ..., P + N - 1 in its N - 1 decode steps. The KV bytes are computed from
the shape, not read from flashserve_attention_kernel_bytes_total: the CUDA runner leaves that
counter out of the decode steps it replays from CUDA graphs.

GPU clock and power of a run (CUDA servers; run.sh samples `nvidia-smi --query-gpu=clocks.sm,
power.draw,clocks_event_reasons.active` every 100 ms during the load into X.smi.csv beside
X.txt): "SM MHz" is the median SM clock of the samples, "GPU W" their mean power draw, and
"power-capped" the fraction of samples whose clock-event reasons include the software power
cap (0x4) or hardware power braking (0x80): whether the run was held by the card's power
limit, which a kernel that spends more energy per multiply meets first (bench/serving/NOTES.md,
twenty-seventh session). "-" where there are no samples (no GPU, or an older run).

Engine steps of a run, from the same scrapes: "decode steps" counts the steps whose batch was
decodes only (delta flashserve_engine_decode_step_seconds_count) and gives their mean wall
time; "steps with prompts" the rest of flashserve_engine_step_seconds (every step that carried
prompt tokens, with or without decodes). Together they say which kind of step a throughput
difference is in (bench/gemm/NOTES.md, twenty-ninth session). "-" for servers before that
histogram.

Metrics mode (--metrics-on ... --metrics-off ...): the same load run with metrics on and off
(several rounds each, alternating); one row per concurrency with the mean tokens/s of each and
the throughput lost to metrics, (off - on) / off.

Usage: summarize.py --label TEXT --new-tokens N [--env env.txt] [--server-log LOG]
                    [--info INFO] [--peak-hbm-gbps GBPS] --out results.md LOAD_OUTPUT...
       summarize.py --label TEXT --out metrics.md --metrics-on A.txt... --metrics-off B.txt...
"""
import argparse
import os
import re
import statistics
import sys

COLUMNS = ["concurrency", "requests ok", "output tokens/s", "TTFT p50 ms", "TTFT p99 ms",
           "ITL p50 ms", "ITL p99 ms", "tokens/request", "tokens/message",
           "server CPU us/token", "client CPU us/token", "HBM fraction", "SM MHz", "GPU W",
           "power-capped", "decode steps (n / mean ms)", "steps with prompts (n / mean ms)"]
# nvidia-smi's clock-event reason bits that say the card's power limit held the clock.
POWER_REASONS = 0x4 | 0x80  # software power cap, hardware power brake

PATTERNS = {
    "concurrency": r"target \S+: (\d+) requests, concurrency (\d+), ([\d.]+) s",
    "succeeded": r"succeeded (\d+), failed (\d+)",
    "throughput": r"throughput: [\d.]+ req/s, ([\d.]+) generated tokens/s",
    "tokens": r"tokens: (\d+) prompt, (\d+) generated \(([\d.]+) per request\)",
    "ttft": r"time to first token\s+p50\s+([\d.]+) ms\s+p90\s+([\d.]+) ms\s+p99\s+([\d.]+) ms",
    "itl": r"inter-token latency\s+p50\s+([\d.]+) ms\s+p90\s+([\d.]+) ms\s+p99\s+([\d.]+) ms",
}
OPTIONAL_PATTERNS = {
    "messages": r"messages: (\d+) stream messages",
    "client_cpu": r"client cpu: ([\d.]+) s",
    "server_cpu": r"server cpu: ([\d.]+) s",
}
# (pattern, bytes a unit): the start-up line of model/cuda/device_weights.cc's summary(), then
# the older form. A native file's line adds its quantized and its bf16/fp32 tensors.
WEIGHTS_PATTERNS = [
    (r"weights native \([^)]*\) ([\d.]+) GiB \+ bf16/fp32 ([\d.]+) GiB", 2**30),
    (r"weights bf16 ([\d.]+) GiB", 2**30),
    (r"weights ([\d.]+) MiB bf16", 2**20),
]
SHAPE_PATTERN = r"shape:\s+(\d+) layers, hidden \d+, \d+ heads / (\d+) KV heads, head_dim (\d+)"


def read_load_output(path, problems):
    """parse_load_output(path), or None; unreadable files and failed requests go to problems."""
    try:
        r = parse_load_output(path)
    except (OSError, ValueError) as e:
        problems.append(str(e))
        return None
    if r["ok"] != r["requests"]:
        problems.append(f"{path}: {r['requests'] - r['ok']} of {r['requests']} requests failed")
    return r


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
    generated = int(found["tokens"][1])
    row = {
        "prompt_tokens": int(found["tokens"][0]),
        "concurrency": int(concurrency),
        "requests": int(requests),
        "ok": int(ok),
        "tokens_per_s": float(found["throughput"][0]),
        "ttft_p50": float(found["ttft"][0]), "ttft_p99": float(found["ttft"][2]),
        "itl_p50": float(found["itl"][0]), "itl_p99": float(found["itl"][2]),
        "tokens_per_request": float(found["tokens"][2]),
        "generated": generated,
    }
    for name, pattern in OPTIONAL_PATTERNS.items():
        m = re.search(pattern, text)
        row[name] = float(m.group(1)) if m else None
    if row["messages"]:
        row["tokens_per_message"] = generated / row["messages"]
    for side in ("server", "client"):
        cpu = row[f"{side}_cpu"]
        if cpu is not None and generated > 0:
            row[f"{side}_us_per_token"] = 1e6 * cpu / generated
    return row


def parse_exposition(path):
    """{series: value} of a Prometheus text exposition, label sets as written; {} if absent."""
    series = {}
    if not os.path.exists(path):
        return series
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rstrip("\n").rpartition(" ")
            try:
                series[name] = float(value)
            except ValueError:
                continue
    return series


def metric_sum(series, name, label=None):
    """Sum of every series of `name` (any labels) whose labels contain `label`."""
    total = 0.0
    for key, value in series.items():
        base = key.split("{", 1)[0]
        if base == name and (label is None or label in key):
            total += value
    return total


def weight_bytes(server_log):
    """The device weight bytes flashserve logged at start-up (CUDA backend); None if absent."""
    if not server_log or not os.path.exists(server_log):
        return None
    with open(server_log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for pattern, unit in WEIGHTS_PATTERNS:
        m = re.search(pattern, text)
        if m:
            return sum(float(g) for g in m.groups()) * unit
    return None


def kv_bytes_per_token(info):
    """K and V bytes of one token in every layer (bf16) from `flashserve-cli info`; None if absent."""
    if not info or not os.path.exists(info):
        return None
    with open(info, encoding="utf-8", errors="replace") as f:
        m = re.search(SHAPE_PATTERN, f.read())
    if m is None:
        return None
    layers, kv_heads, head_dim = (int(x) for x in m.groups())
    return 2 * layers * kv_heads * head_dim * 2


def hbm_fraction(load_output, row, weights, kv_token, peak_gbps):
    """The formula in the module docstring over the scrapes beside load_output; None when a
    figure is missing."""
    if weights is None or kv_token is None or not peak_gbps or row["ok"] == 0:
        return None
    stem = load_output[:-4] if load_output.endswith(".txt") else load_output
    before = parse_exposition(stem + ".before.prom")
    after = parse_exposition(stem + ".after.prom")
    if not before or not after:
        return None
    steps = metric_sum(after, "flashserve_engine_steps_total") - metric_sum(
        before, "flashserve_engine_steps_total")
    step_seconds = metric_sum(after, "flashserve_engine_step_seconds_sum") - metric_sum(
        before, "flashserve_engine_step_seconds_sum")
    if steps <= 0 or step_seconds <= 0:
        return None
    p = row["prompt_tokens"] / row["ok"]
    n = row["generated"] / row["ok"]
    kv_bytes = row["ok"] * ((n - 1) * (p + n / 2) + p) * kv_token
    return (steps * weights + kv_bytes) / step_seconds / (peak_gbps * 1e9)


def engine_steps(load_output):
    """{"decode_steps", "decode_step_ms", "prompt_steps", "prompt_step_ms"} from the scrapes
    beside load_output (the module docstring); {} when a scrape or the decode-step histogram
    is missing. A mean is None where its count is 0."""
    stem = load_output[:-4] if load_output.endswith(".txt") else load_output
    before = parse_exposition(stem + ".before.prom")
    after = parse_exposition(stem + ".after.prom")
    decode = "flashserve_engine_decode_step_seconds"
    if not before or not any(k.split("{", 1)[0] == decode + "_count" for k in after):
        return {}
    delta = lambda name: metric_sum(after, name) - metric_sum(before, name)
    n_all = delta("flashserve_engine_step_seconds_count")
    s_all = delta("flashserve_engine_step_seconds_sum")
    n_decode, s_decode = delta(decode + "_count"), delta(decode + "_sum")
    mean_ms = lambda seconds, n: 1e3 * seconds / n if n > 0 else None
    return {"decode_steps": n_decode, "decode_step_ms": mean_ms(s_decode, n_decode),
            "prompt_steps": n_all - n_decode,
            "prompt_step_ms": mean_ms(s_all - s_decode, n_all - n_decode)}


def gpu_samples(load_output):
    """{"sm_mhz", "gpu_w", "power_capped"} from X.smi.csv beside load output X.txt (lines
    "MHz, W, 0xREASONS"; others skipped), or {} when there is no sample."""
    path = os.path.splitext(load_output)[0] + ".smi.csv"
    if not os.path.exists(path):
        return {}
    mhz, watts, capped = [], [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = [x.strip() for x in line.split(",")]
            if len(fields) != 3:
                continue
            try:
                clock, power, reasons = float(fields[0]), float(fields[1]), int(fields[2], 16)
            except ValueError:
                continue
            mhz.append(clock)
            watts.append(power)
            capped += bool(reasons & POWER_REASONS)
    if not mhz:
        return {}
    return {"sm_mhz": statistics.median(mhz), "gpu_w": statistics.mean(watts),
            "power_capped": capped / len(mhz)}


def optional(value, fmt):
    return "-" if value is None else format(value, fmt)


def steps_cell(n, mean_ms):
    if n is None:
        return "-"
    return f"{n:.0f} / " + optional(mean_ms, ".3f")


def format_row(r):
    return "| " + " | ".join([
        str(r["concurrency"]), f'{r["ok"]}/{r["requests"]}', f'{r["tokens_per_s"]:,.1f}',
        f'{r["ttft_p50"]:.1f}', f'{r["ttft_p99"]:.1f}', f'{r["itl_p50"]:.2f}', f'{r["itl_p99"]:.2f}',
        f'{r["tokens_per_request"]:.1f}', optional(r.get("tokens_per_message"), ".2f"),
        optional(r.get("server_us_per_token"), ".1f"), optional(r.get("client_us_per_token"), ".1f"),
        optional(r.get("hbm_fraction"), ".1%"), optional(r.get("sm_mhz"), ".0f"),
        optional(r.get("gpu_w"), ".0f"), optional(r.get("power_capped"), ".0%"),
        steps_cell(r.get("decode_steps"), r.get("decode_step_ms")),
        steps_cell(r.get("prompt_steps"), r.get("prompt_step_ms"))]) + " |"


def format_table(label, rows):
    lines = [f"### {label}", "", "| " + " | ".join(COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    lines += [format_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def metrics_table(label, on_paths, off_paths):
    """(markdown, problems): mean tokens/s with metrics on and off per concurrency."""
    problems = []
    by_concurrency = {}
    for setting, paths in (("on", on_paths), ("off", off_paths)):
        for path in paths:
            r = read_load_output(path, problems)
            if r is None:
                continue
            by_concurrency.setdefault(r["concurrency"], {"on": [], "off": []})[setting].append(
                r["tokens_per_s"])
    lines = [f"### {label}", "",
             "| concurrency | metrics on: tokens/s (rounds) | metrics off: tokens/s (rounds) "
             "| lost to metrics |", "|---|---|---|---|"]
    for c in sorted(by_concurrency):
        on, off = by_concurrency[c]["on"], by_concurrency[c]["off"]
        if not on or not off:
            problems.append(f"concurrency {c}: no run with metrics {'on' if not on else 'off'}")
            continue
        on_mean, off_mean = statistics.mean(on), statistics.mean(off)
        rounds = lambda xs: ", ".join(f"{x:,.0f}" for x in xs)  # noqa: E731
        lines.append(f"| {c} | {on_mean:,.1f} ({rounds(on)}) | {off_mean:,.1f} ({rounds(off)}) "
                     f"| {100 * (off_mean - on_mean) / off_mean:+.2f} % |")
    return "\n".join(lines) + "\n", problems


def table_mode(args):
    rows, problems = [], []
    weights = weight_bytes(args.server_log)
    kv_token = kv_bytes_per_token(args.info)
    for path in args.outputs:
        r = read_load_output(path, problems)
        if r is None:
            continue
        if r["tokens_per_request"] != args.new_tokens:
            problems.append(f"{path}: {r['tokens_per_request']} tokens per request, not {args.new_tokens}")
        r["hbm_fraction"] = hbm_fraction(path, r, weights, kv_token, args.peak_hbm_gbps)
        r.update(gpu_samples(path))
        r.update(engine_steps(path))
        rows.append(r)
    text = format_table(args.label, rows)
    if weights is not None and kv_token is not None and args.peak_hbm_gbps:
        text += (f"\nHBM fraction: (steps x {weights / 2**20:,.1f} MiB of device weights + the K/V "
                 f"the requests read, {kv_token:,} bytes per token) / engine step seconds / "
                 f"{args.peak_hbm_gbps:,.0f} GB/s (summarize.py).\n")
    return text, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--new-tokens", type=int)
    parser.add_argument("--env", help="env.txt written by run.sh, quoted under the table")
    parser.add_argument("--server-log", help="the server's log (its 'weights X MiB bf16' line)")
    parser.add_argument("--info", help="`flashserve-cli info` of the server (its shape line)")
    parser.add_argument("--peak-hbm-gbps", type=float, help="peak HBM bandwidth in GB/s")
    parser.add_argument("--metrics-on", nargs="+", default=[], help="metrics mode: runs with metrics on")
    parser.add_argument("--metrics-off", nargs="+", default=[], help="metrics mode: runs with metrics off")
    parser.add_argument("--out", required=True)
    parser.add_argument("outputs", nargs="*")
    args = parser.parse_args()
    if args.metrics_on or args.metrics_off:
        text, problems = metrics_table(args.label, args.metrics_on, args.metrics_off)
    else:
        if args.new_tokens is None or not args.outputs:
            parser.error("table mode needs --new-tokens and at least one LOAD_OUTPUT")
        text, problems = table_mode(args)
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
