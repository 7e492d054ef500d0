#!/usr/bin/env python3
"""Peers for bench/attention: PyTorch SDPA's FlashAttention-2 and cuDNN backends on the same
grid as attention_bench (bf16 and fp16, " fp16" after the config; dense [b, h, s, d] K/V, since
SDPA has no paged cache), timed the same way (CUDA events, warm-up, median), with the same FLOP
and byte formulas. Then merges our CSV (attention_bench --csv) with these numbers into one
markdown table.

    python3 peers_sdpa.py --ours ours.csv --csv peers.csv --table table.md [--quick]
        [--prefill] [--decode] [--serving] [--window] [--dtype bf16|fp16|both]
    python3 peers_sdpa.py --ours ours.csv --csv peers.csv --table table.md --merge-only
    python3 peers_sdpa.py --selftest      (CPU, tiny sizes: the serving feeds and masks)

Serving-shaped rows (kind "serving", attention_bench's bench_serving; bench/attention/NOTES.md):
the varlen batch of 64 causal prompts with lengths from varlen_lengths() (the same LCG and seed
as attention_bench) and chunked prefill (512 new queries after ctx cached keys, bottom-right
causal: query i sits at position ctx + i, as in kernels/attention/attention.h). SDPA is fed
the same work in every way it accepts (FEEDS below: dense padded, one call per sequence, a
jagged nested tensor; for chunks torch's causal_lower_right bias or an explicit boolean mask),
each checked against an fp32 reference before timing; the fastest valid feed is kept per
backend and named in the table's "feed" columns.

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
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 1  # clock warm-up as attention_bench's time_ms: >= 25 ms of back-to-back launches
    while True:
        start.record()
        for _ in range(n):
            fn()
        stop.record()
        stop.synchronize()
        if start.elapsed_time(stop) >= 25.0 or n >= 4096:
            break
        n *= 2
    times, total = [], 0.0
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


TOL = 8 * 2**-8  # relative L2, as attention_bench's validation
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def suffix(dtype):
    """attention_bench's config suffix: nothing for bf16, " fp16" for fp16."""
    return " fp16" if dtype == torch.float16 else ""


def line(kind, config, name, ms, flops, nbytes, feed=""):
    print(f"| {kind:7} | {config:34} | {name:6} | {ms:9.3f} | {flops / ms * 1e-9:7.1f} | {nbytes / ms * 1e-6:7.0f} |"
          + (f" via {feed}" if feed else ""), flush=True)


def run_backends(kind, config, q, k, v, causal, flops, nbytes, rows, gqa):
    outs = {}
    for name, backend in BACKENDS.items():
        try:
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                outs[name] = fn()
                ms = time_ms(fn)
            rows.append((kind, config, name, ms, flops / ms * 1e-9, nbytes / ms * 1e-6, ""))
            line(kind, config, name, ms, flops, nbytes)
        except Exception as e:  # a backend that does not support the shape
            print(f"| {kind:7} | {config:34} | {name:6} | n/a: {str(e).splitlines()[0][:60]}", flush=True)
    if len(outs) == 2:
        a, b = outs["fa2"].float(), outs["cudnn"].float()
        rel = ((a - b).norm() / b.norm()).item()
        if not (rel <= TOL) or not torch.isfinite(a).all():
            print(f"PEER MISMATCH {config}: rel L2 {rel:.3g}")


def prefill(rows, quick, dtype, heads=0):
    lens = [1024, 8192] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    for d in (64, 128):
        for causal in (False, True):
            for s in lens:
                b, h = 16384 // s, (heads or 2048 // d)
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
                config = f"b{b} s{s} h{h} d{d} " + ("causal" if causal else "full") + suffix(dtype)
                # kernels::attention_cost: exactly s(s+1)/2 (query, key) pairs per head when causal.
                flops = 4.0 * b * h * d * (s * (s + 1) / 2 if causal else s * s)
                nbytes = 4.0 * b * s * h * d * 2
                run_backends("prefill", config, q, k, v, causal, flops, nbytes, rows, False)
                del q, k, v


def decode(rows, quick, dtype):
    shapes = [(9, 3, 64), (32, 8, 128)]
    batches = [64] if quick else [1, 16, 64]
    contexts = [4096] if quick else [1024, 4096, 16384]
    for hq, hkv, d in shapes:
        for b in batches:
            for ctx in contexts:
                q = torch.randn(b, hq, 1, d, device="cuda", dtype=dtype)
                k = torch.randn(b, hkv, ctx, d, device="cuda", dtype=dtype)
                v = torch.randn(b, hkv, ctx, d, device="cuda", dtype=dtype)
                config = f"b{b} ctx{ctx} h{hq}/{hkv} d{d}" + suffix(dtype)
                flops = 4.0 * b * hq * ctx * d
                nbytes = 2.0 * (2.0 * b * ctx * hkv * d + 2.0 * b * hq * d)
                run_backends("decode", config, q, k, v, False, flops, nbytes, rows, True)
                del q, k, v


# ---- serving-shaped prefill: attention_bench's bench_serving (same lengths, configs, cost) ----
VARLEN_SEQS, VARLEN_MIN, VARLEN_MAX, VARLEN_SEED = 64, 64, 1024, 20
CHUNK = 512  # chunked prefill: new tokens per sequence
CHUNK_BATCHES, CHUNK_CONTEXTS = [1, 8], [1024, 2048, 4096, 8192]  # --quick: [8], [1024, 8192]
SERVING_SHAPES = [(9, 3, 64), (32, 8, 64), (32, 8, 128)]


def varlen_lengths():
    """attention_bench's serving_varlen_lengths(): the same LCG (mod 2^32), seed and range."""
    state, lens = VARLEN_SEED, []
    for _ in range(VARLEN_SEQS):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        lens.append(VARLEN_MIN + (state >> 8) % (VARLEN_MAX - VARLEN_MIN + 1))
    return lens


def attention_cost(q_lens, k_lens, hq, hkv, d, elem=2):
    """kernels::attention_cost, causal, no window: query i of a sequence of q queries over k
    keys sees k - q + i + 1 keys; FLOPs 4 d hq pairs, bytes Q, O once and each K/V row once."""
    pairs = sum(q * (k - q) + q * (q + 1) / 2 for q, k in zip(q_lens, k_lens))
    return 4.0 * d * hq * pairs, elem * d * (2.0 * hq * sum(q_lens) + 2.0 * hkv * sum(k_lens))


def bottom_right_mask(lq, lk, device):
    """[lq, lk] bool, True = attend: query i sits at position lk - lq + i and sees the keys at
    positions <= its own (kernels/attention/attention.h; torch's causal_lower_right)."""
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    return j <= i + (lk - lq)


def reference(q, k, v, mask):
    """fp32 attention of q [b, hq, lq, d] over k, v [b, hkv, lk, d] (GQA), mask [lq, lk]."""
    g = q.shape[1] // k.shape[1]
    k, v = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    s = (q.float() @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v


def sdpa(q, k, v, **kw):
    """SDPA with enable_gqa passed only when the heads differ (the "+kvx" retries and torch
    versions whose CausalBias dispatch predates the argument never see it)."""
    if q.shape[1] != k.shape[1]:
        kw["enable_gqa"] = True
    return F.scaled_dot_product_attention(q, k, v, **kw)


def varlen_feeds(lens):
    """Ways to give SDPA the varlen batch; each builds (call, output -> packed [T, hq, d]) from
    packed q [T, hq, d], k, v [T, hkv, d]. Prompts are whole (queries = keys), so is_causal's
    top-left alignment is the bottom-right one, and padded keys come after every real query."""
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    b, lmax = len(lens), max(lens)

    def padded(q, k, v):  # one dense call on [b, h, max_len, d], zero padding
        def pad(x):
            out = x.new_zeros(b, lmax, *x.shape[1:])
            for i in range(b):
                out[i, : lens[i]] = x[cu[i] : cu[i + 1]]
            return out.transpose(1, 2).contiguous()

        qp, kp, vp = pad(q), pad(k), pad(v)
        return (lambda: sdpa(qp, kp, vp, is_causal=True),
                lambda o: torch.cat([o[i, :, : lens[i]].transpose(0, 1) for i in range(b)]))

    def per_seq(q, k, v):  # one call per sequence on [1, h, len, d]
        seqs = [[x[cu[i] : cu[i + 1]].transpose(0, 1).unsqueeze(0).contiguous() for x in (q, k, v)]
                for i in range(b)]
        return (lambda: [sdpa(*t, is_causal=True) for t in seqs],
                lambda o: torch.cat([x[0].transpose(0, 1) for x in o]))

    def jagged(q, k, v):  # one call on nested (jagged) tensors: SDPA's own varlen path
        offsets = torch.tensor(cu, device=q.device, dtype=torch.int64)
        nt = [torch.nested.nested_tensor_from_jagged(x, offsets).transpose(1, 2) for x in (q, k, v)]
        return lambda: sdpa(*nt, is_causal=True), lambda o: o.transpose(1, 2).values()

    return {"padded": padded, "per-seq": per_seq, "jagged": jagged}


def chunk_feeds(backend):
    """Ways to give SDPA chunked prefill (q [b, hq, lq, d] after lk - lq cached keys); every
    way computes the same outputs. torch's is_causal is top-left aligned (tril of [lq, lk]),
    wrong here; its causal_lower_right bias goes (torch.nn.attention.bias) straight to the
    flash kernel's own bottom-right causal mode when the enabled backends allow flash, so FA2
    gets that (can_use_flash_attention is asked first, under the same backend context, so that
    a refusal reads as one instead of as the mask error of torch's materialising fallback). The
    cuDNN backend in torch sets only top-left causal, so it gets the mask explicitly (boolean,
    or additive 0/-inf in the input dtype): it then computes every (query, key) tile, the
    512 x 511 / 2 masked pairs included (+20 % work at ctx 1k, +3 % at 8k; FLOPs count only the
    attended pairs, as ours)."""
    def lower_right(q, k, v):
        from torch.backends.cuda import SDPAParams, can_use_flash_attention
        from torch.nn.attention.bias import causal_lower_right
        if not can_use_flash_attention(SDPAParams(q, k, v, None, 0.0, False, q.shape[1] != k.shape[1])):
            raise RuntimeError("causal_lower_right would not run the flash kernel")
        bias = causal_lower_right(q.shape[2], k.shape[2])
        return lambda: sdpa(q, k, v, attn_mask=bias), lambda o: o

    def mask(q, k, v):
        m = bottom_right_mask(q.shape[2], k.shape[2], q.device)
        return lambda: sdpa(q, k, v, attn_mask=m), lambda o: o

    def additive(q, k, v):
        m = bottom_right_mask(q.shape[2], k.shape[2], q.device)
        add = torch.zeros(m.shape, dtype=q.dtype, device=q.device).masked_fill(~m, float("-inf"))
        add = add[None, None]
        return lambda: sdpa(q, k, v, attn_mask=add), lambda o: o

    return {"lower_right": lower_right} if backend == "fa2" else {"mask": mask, "additive": additive}


def run_feeds(kind, config, feeds_for, q, k, v, ref, flops, nbytes, rows):
    """Under each backend, every feed of feeds_for(backend) is built, checked against the fp32
    reference (rel L2 <= TOL) and timed; a feed whose GQA call fails is retried with K/V heads
    repeated ("+kvx": same FLOPs, more K/V bytes). The fastest valid feed is the row, named."""
    g = q.shape[1] // k.shape[1]  # heads are dim 1 in both layouts ([T, h, d], [b, h, s, d])
    expanded = []
    for name, backend in BACKENDS.items():
        best = None
        for feed, build in feeds_for(name).items():
            for expand in (False, True) if g > 1 else (False,):
                label = feed + ("+kvx" if expand else "")
                try:
                    if expand and not expanded:
                        expanded = [k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)]
                    with sdpa_kernel([backend]):  # built inside: lower_right's check reads it
                        fn, extract = build(q, *(expanded if expand else (k, v)))
                        out = extract(fn()).float()
                        rel = ((out - ref).norm() / ref.norm()).item()
                        if not rel <= TOL:
                            raise ValueError(f"PEER MISMATCH rel L2 {rel:.3g} against the fp32 reference")
                        ms = time_ms(fn)
                except Exception as e:  # a feed the backend refuses (or gets wrong): noted
                    print(f"    {config} {name} via {label}: n/a: {str(e).splitlines()[0][:100]}", flush=True)
                    continue
                print(f"    {config} {name} via {label}: {ms:.3f} ms", flush=True)
                if best is None or ms < best[1]:
                    best = (label, ms)
                break
        if best is None:
            print(f"| {kind:7} | {config:34} | {name:6} | n/a: no feed ran", flush=True)
            continue
        feed, ms = best
        rows.append((kind, config, name, ms, flops / ms * 1e-9, nbytes / ms * 1e-6, feed))
        line(kind, config, name, ms, flops, nbytes, feed)


def serving(rows, quick, dtype, device="cuda"):
    lens = varlen_lengths()
    t = sum(lens)
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    for hq, hkv, d in SERVING_SHAPES:
        q = torch.randn(t, hq, d, device=device, dtype=dtype)
        k, v = (torch.randn(t, hkv, d, device=device, dtype=dtype) for _ in range(2))
        config = f"b{VARLEN_SEQS} varlen{VARLEN_MIN}-{VARLEN_MAX} t{t} h{hq}/{hkv} d{d} causal" + suffix(dtype)
        seq = lambda x, i: x[cu[i] : cu[i + 1]].transpose(0, 1)[None]
        ref = torch.cat([reference(seq(q, i), seq(k, i), seq(v, i), bottom_right_mask(n, n, device))[0]
                         .transpose(0, 1) for i, n in enumerate(lens)])
        flops, nbytes = attention_cost(lens, lens, hq, hkv, d)
        run_feeds("serving", config, lambda backend: varlen_feeds(lens), q, k, v, ref, flops, nbytes, rows)
        del q, k, v, ref
    for b in CHUNK_BATCHES[-1:] if quick else CHUNK_BATCHES:
        for ctx in CHUNK_CONTEXTS[:: len(CHUNK_CONTEXTS) - 1] if quick else CHUNK_CONTEXTS:
            for hq, hkv, d in SERVING_SHAPES:
                lk = ctx + CHUNK
                q = torch.randn(b, hq, CHUNK, d, device=device, dtype=dtype)
                k, v = (torch.randn(b, hkv, lk, d, device=device, dtype=dtype) for _ in range(2))
                config = f"b{b} q{CHUNK} ctx{ctx} h{hq}/{hkv} d{d} causal" + suffix(dtype)
                ref = reference(q, k, v, bottom_right_mask(CHUNK, lk, device))
                flops, nbytes = attention_cost([CHUNK] * b, [lk] * b, hq, hkv, d)
                run_feeds("serving", config, chunk_feeds, q, k, v, ref, flops, nbytes, rows)
                del q, k, v, ref
                if device == "cuda":
                    torch.cuda.empty_cache()


def selftest():
    """CPU, tiny sizes, fp32: the bottom-right mask against a loop and torch's
    causal_lower_right, the pair count against the mask, the reference against a per-query
    loop, and every serving feed against the reference (SDPA's CPU kernels: this checks how
    the work is built and masked, not the GPU backends). Exit status 1 on a mismatch."""
    from torch.nn.attention.bias import causal_lower_right
    torch.manual_seed(0)
    fails = []

    def check(what, cond):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    rel = lambda a, b: ((a.float() - b.float()).norm() / b.float().norm()).item()
    for lq, lk in [(3, 5), (4, 4), (1, 7), (5, 12)]:
        m = bottom_right_mask(lq, lk, "cpu")
        loop = torch.tensor([[j <= lk - lq + i for j in range(lk)] for i in range(lq)])
        check(f"mask {lq}x{lk} = loop", torch.equal(m, loop))
        check(f"mask {lq}x{lk} = causal_lower_right", torch.equal(m, causal_lower_right(lq, lk)._materialize("cpu")))
        check(f"pairs {lq}x{lk} = mask count", attention_cost([lq], [lk], 1, 1, 1)[0] / 4 == m.sum().item())
    lens = varlen_lengths()
    check(f"varlen lengths: {len(lens)} in [{VARLEN_MIN}, {VARLEN_MAX}], sum {sum(lens)}, first {lens[:6]}",
          len(lens) == VARLEN_SEQS and min(lens) >= VARLEN_MIN and max(lens) <= VARLEN_MAX)
    hq, hkv, d, lq, lk = 4, 2, 8, 3, 7
    q, k, v = torch.randn(2, hq, lq, d), torch.randn(2, hkv, lk, d), torch.randn(2, hkv, lk, d)
    ref = reference(q, k, v, bottom_right_mask(lq, lk, "cpu"))
    loop = torch.empty_like(ref)
    for b in range(2):
        for h in range(hq):
            for i in range(lq):
                n, kv = lk - lq + i + 1, h // (hq // hkv)  # keys at positions 0 .. lk - lq + i
                p = torch.softmax(k[b, kv, :n] @ q[b, h, i] / d**0.5, 0)
                loop[b, h, i] = p @ v[b, kv, :n]
    check("reference = per-query loop (chunk)", rel(ref, loop) < 1e-5)
    check("top-left is_causal differs (the test can fail)", rel(sdpa(q, k, v, is_causal=True), ref) > 1e-2)
    check("sdpa + causal_lower_right = reference", rel(sdpa(q, k, v, attn_mask=causal_lower_right(lq, lk)), ref) < 1e-5)
    kx, vx = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
    for backend in ("fa2", "cudnn"):
        for feed, build in chunk_feeds(backend).items():
            for label, kk, vv in ((feed, k, v), (feed + "+kvx", kx, vx)):
                try:
                    fn, extract = build(q, kk, vv)
                    out = extract(fn())
                except Exception as e:
                    print(f"skip {backend} {label} on CPU: {str(e).splitlines()[0][:80]}")
                    continue
                check(f"chunk feed {backend} {label} = reference", rel(out, ref) < 1e-5)
    small = [3, 5, 2, 1]
    cu = [0]
    for n in small:
        cu.append(cu[-1] + n)
    q, k, v = torch.randn(cu[-1], hq, d), torch.randn(cu[-1], hkv, d), torch.randn(cu[-1], hkv, d)
    seq = lambda x, i: x[cu[i] : cu[i + 1]].transpose(0, 1)[None]
    ref = torch.cat([reference(seq(q, i), seq(k, i), seq(v, i), bottom_right_mask(n, n, "cpu"))[0].transpose(0, 1)
                     for i, n in enumerate(small)])
    loop = torch.empty_like(ref)
    for i, n in enumerate(small):
        for h in range(hq):
            for j in range(n):
                kv = h // (hq // hkv)
                p = torch.softmax(k[cu[i] : cu[i] + j + 1, kv] @ q[cu[i] + j, h] / d**0.5, 0)
                loop[cu[i] + j, h] = p @ v[cu[i] : cu[i] + j + 1, kv]
    check("reference = per-query loop (varlen)", rel(ref, loop) < 1e-5)
    kx, vx = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
    for feed, build in varlen_feeds(small).items():
        for label, kk, vv in ((feed, k, v), (feed + "+kvx", kx, vx)):
            try:
                fn, extract = build(q, kk, vv)
                out = extract(fn())
            except Exception as e:
                print(f"skip varlen {label} on CPU: {str(e).splitlines()[0][:80]}")
                continue
            check(f"varlen feed {label} = reference", rel(out, ref) < 1e-5)
    print(f"{len(fails)} failed" if fails else "all passed")
    return 1 if fails else 0


class Rows(list):
    """Peer rows (kind, config, impl, ms, tflops, gbps, feed), each also written to the CSV and
    flushed as it is measured, so a run cut short by its timeout keeps what it measured."""

    HEADER = ["kind", "config", "impl", "ms", "tflops", "gbps", "feed"]

    def __init__(self, path):
        super().__init__()
        self.file = open(path, "w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(self.HEADER)
        self.file.flush()

    def append(self, r):
        super().append(r)
        self.writer.writerow([r[0], r[1], r[2], f"{r[3]:.5f}", f"{r[4]:.2f}", f"{r[5]:.1f}", r[6]])
        self.file.flush()


def read_peers(path):
    with open(path) as f:
        return [(r["kind"], r["config"], r["impl"], float(r["ms"]), float(r["tflops"]), float(r["gbps"]),
                 r.get("feed") or "") for r in csv.DictReader(f)]


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
    peers = {(k, c, i): (ms, tf, gb, feed) for k, c, i, ms, tf, gb, feed in rows}
    lines = []
    for kind, metric, idx in (("prefill", "TFLOP/s", 1), ("serving", "TFLOP/s", 1), ("decode", "GB/s", 2)):
        impls = ["ours"] if kind == "decode" else ["wgmma", "wgmma_ps", "mma"]
        impls = [i for i in impls if any(k == kind and j == i for k, _, j in ours)]
        configs = []
        for (k, c, i) in ours:
            if k == kind and i in impls and c not in configs:
                configs.append(c)
        if not configs:
            continue
        title = "serving-shaped prefill" if kind == "serving" else kind
        lines.append(f"\n### {title} ({metric}; bf16 unless the config says fp16; ratio = ours / peer)\n")
        if kind == "serving":
            lines.append("kAuto runs the Hopper kernel at d128; at d64 from 512 queries or 1,536 "
                         "keys: on the varlen rows (up to 1,013 queries) and the chunk rows; its "
                         "persistent form wgmma_ps on the varlen rows and the b8 chunk rows of at most "
                         "4,096 keys (d64: 16,384), the one-tile wgmma on the others "
                         "(kernels/attention/README.md). "
                         "Feed = how SDPA was given the work, the fastest valid of those tried "
                         "(peers_sdpa.py: varlen_feeds, chunk_feeds).\n")
        head = "| config |" + (" splits |" if kind == "decode" else "")
        head += "".join(f" {i} ms | {i} |" for i in impls) + " naive | FA2 | cuDNN |"
        head += "".join(f" {i}/FA2 | {i}/cuDNN |" for i in impls)
        head += " FA2 feed | cuDNN feed |" if kind == "serving" else ""
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
            if kind == "serving":
                row += f" {fa[3] if fa else 'n/a'} | {cu[3] if cu else 'n/a'} |"
            lines.append(row)
    copy = [v for (k, c, i), v in ours.items() if k == "copy"]
    if copy:
        lines.append(f"\nDevice-to-device copy (read + write): {copy[0][2]:.0f} GB/s\n")
    with open(table_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours")
    ap.add_argument("--csv")
    ap.add_argument("--table")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--prefill", action="store_true")
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--serving", action="store_true")
    ap.add_argument("--window", action="store_true", help="no peer rows (see the top)")
    ap.add_argument("--heads", type=int, default=0, help="prefill grid at N heads (attention_bench --heads=N)")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "both"], default="both")
    ap.add_argument("--merge-only", action="store_true", help="table from --ours and an existing --csv")
    ap.add_argument("--selftest", action="store_true", help="CPU check of the serving feeds and masks")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    if not (args.ours and args.csv and args.table):
        ap.error("--ours, --csv and --table are required")
    if args.merge_only:
        merge(args.ours, read_peers(args.csv), args.table)
        return 0
    if not args.prefill and not args.decode and not args.serving and not args.window:
        args.prefill = args.decode = args.serving = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cudnn {torch.backends.cudnn.version()}")
    rows = Rows(args.csv)
    for name in ["bf16", "fp16"] if args.dtype == "both" else [args.dtype]:
        dtype = DTYPES[name]
        if args.prefill:
            prefill(rows, args.quick, dtype, args.heads)
        if args.serving:
            serving(rows, args.quick, dtype)
        if args.decode:
            decode(rows, args.quick, dtype)
    rows.file.close()
    merge(args.ours, rows, args.table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
