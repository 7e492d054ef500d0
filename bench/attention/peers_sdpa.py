#!/usr/bin/env python3
"""Peers for bench/attention: PyTorch SDPA's FlashAttention-2 and cuDNN backends on the same
grid as attention_bench (bf16; dense [b, h, s, d] K/V, since SDPA has no paged cache), timed
the same way (CUDA events, warm-up, median), with the same FLOP and byte formulas. Then merges
our CSV (attention_bench --csv) with these numbers into one markdown table.

    python3 peers_sdpa.py --ours ours.csv --csv peers.csv --table table.md [--quick]

Each backend's output is checked against the other's (relative L2 <= 8 bf16 units of
roundoff) before timing; a backend that refuses a shape is reported as n/a with the reason.

The sliding-window rows of attention_bench (" w512", " w4096") have no peer: SDPA has no
window argument, its FA2 and cuDNN backends take no arbitrary mask here, and a dense boolean
mask would send it to a kernel that computes every tile (not the same work). They appear in
the merged table with n/a in the peer columns; --window is accepted so that one BENCH_ARGS
serves both programs.
"""
import argparse
import csv
import math
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def time_ms(fn):
    fn()
    fn()
    torch.cuda.synchronize()
    times, total = [], 0.0
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while len(times) < 5 or (total < 200.0 and len(times) < 100):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        t = start.elapsed_time(stop)
        times.append(t)
        total += t
    times.sort()
    return times[len(times) // 2]


def run_backends(kind, config, q, k, v, causal, flops, nbytes, rows, gqa):
    outs = {}
    for name, backend in BACKENDS.items():
        try:
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                outs[name] = fn()
                ms = time_ms(fn)
            rows.append((kind, config, name, ms, flops / ms * 1e-9, nbytes / ms * 1e-6))
            print(f"| {kind:7} | {config:34} | {name:6} | {ms:9.3f} | {flops / ms * 1e-9:7.1f} | {nbytes / ms * 1e-6:7.0f} |",
                  flush=True)
        except Exception as e:  # a backend that does not support the shape
            print(f"| {kind:7} | {config:34} | {name:6} | n/a: {str(e).splitlines()[0][:60]}", flush=True)
    if len(outs) == 2:
        a, b = outs["fa2"].float(), outs["cudnn"].float()
        rel = ((a - b).norm() / b.norm()).item()
        if not (rel <= 8 * 2**-8) or not torch.isfinite(a).all():
            print(f"PEER MISMATCH {config}: rel L2 {rel:.3g}")


def prefill(rows, quick):
    lens = [1024, 8192] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    for d in (64, 128):
        for causal in (False, True):
            for s in lens:
                b, h = 16384 // s, 2048 // d
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                config = f"b{b} s{s} h{h} d{d} " + ("causal" if causal else "full")
                # kernels::attention_cost: exactly s(s+1)/2 (query, key) pairs per head when causal.
                flops = 4.0 * b * h * d * (s * (s + 1) / 2 if causal else s * s)
                nbytes = 4.0 * b * s * h * d * 2
                run_backends("prefill", config, q, k, v, causal, flops, nbytes, rows, False)
                del q, k, v


def decode(rows, quick):
    shapes = [(9, 3, 64), (32, 8, 128)]
    batches = [64] if quick else [1, 16, 64]
    contexts = [4096] if quick else [1024, 4096, 16384]
    for hq, hkv, d in shapes:
        for b in batches:
            for ctx in contexts:
                q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
                v = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
                config = f"b{b} ctx{ctx} h{hq}/{hkv} d{d}"
                flops = 4.0 * b * hq * ctx * d
                nbytes = 2.0 * (2.0 * b * ctx * hkv * d + 2.0 * b * hq * d)
                run_backends("decode", config, q, k, v, False, flops, nbytes, rows, True)
                del q, k, v


def merge(ours_csv, rows, table_path):
    ours = {}
    with open(ours_csv) as f:
        for r in csv.DictReader(f):
            config = r["config"]
            splits = ""
            m = re.search(r" sp(\d+)$", config)
            if m:
                splits, config = m.group(1), config[: m.start()]
            ours[(r["kind"], config, r["impl"])] = (float(r["ms"]), float(r["tflops"]), float(r["gbps"]), splits)
    peers = {(k, c, i): (ms, tf, gb) for k, c, i, ms, tf, gb in rows}
    lines = []
    for kind, metric, idx in (("prefill", "TFLOP/s", 1), ("decode", "GB/s", 2)):
        impls = ["wgmma", "mma"] if kind == "prefill" else ["ours"]
        configs = []
        for (k, c, i) in ours:
            if k == kind and i in impls and c not in configs:
                configs.append(c)
        if not configs:
            continue
        lines.append(f"\n### {kind} (bf16, {metric}; ratio = ours / peer)\n")
        head = "| config |" + (" splits |" if kind == "decode" else "")
        head += "".join(f" {i} ms | {i} |" for i in impls) + " naive | FA2 | cuDNN |"
        head += "".join(f" {i}/FA2 | {i}/cuDNN |" for i in impls)
        lines.append(head)
        lines.append("|---" * (head.count("|") - 1) + "|")
        for c in configs:
            fa, cu = peers.get((kind, c, "fa2")), peers.get((kind, c, "cudnn"))
            n = ours.get((kind, c, "naive"))
            val = lambda t: f"{t[idx]:.0f}" if t else "n/a"
            ratio = lambda a, b: f"{a[idx] / b[idx]:.2f}" if a and b else "n/a"
            row = f"| {c} |"
            if kind == "decode":
                row += f" {ours[(kind, c, 'ours')][3]} |"
            for i in impls:
                o = ours.get((kind, c, i))
                row += (f" {o[0]:.3f} |" if o else " n/a |") + f" {val(o)} |"
            row += f" {val(n)} | {val(fa)} | {val(cu)} |"
            for i in impls:
                o = ours.get((kind, c, i))
                row += f" {ratio(o, fa)} | {ratio(o, cu)} |"
            lines.append(row)
    copy = [v for (k, c, i), v in ours.items() if k == "copy"]
    if copy:
        lines.append(f"\nDevice-to-device copy (read + write): {copy[0][2]:.0f} GB/s\n")
    with open(table_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--prefill", action="store_true")
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--window", action="store_true", help="no peer rows (see the top)")
    args = ap.parse_args()
    if not args.prefill and not args.decode and not args.window:
        args.prefill = args.decode = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cudnn {torch.backends.cudnn.version()}")
    rows = []
    if args.prefill:
        prefill(rows, args.quick)
    if args.decode:
        decode(rows, args.quick)
    with open(args.csv, "w") as f:
        w = csv.writer(f)
        w.writerow(["kind", "config", "impl", "ms", "tflops", "gbps"])
        for r in rows:
            w.writerow([r[0], r[1], r[2], f"{r[3]:.5f}", f"{r[4]:.2f}", f"{r[5]:.1f}"])
    merge(args.ours, rows, args.table)


if __name__ == "__main__":
    sys.exit(main())
