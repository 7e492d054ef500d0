"""What a before/after rule (e.g. results/session46/rule_v28.py) shares: reading
alternate_bench.sh's CSVs of two builds, a measured and a control column per row, their
per-round ratios (base ms / new ms: > 1 is the new build faster) and medians, the table, and
the control's verdict (the median of its rows' medians within 0.98-1.02, else the machine
drifted between the builds' runs and the call decides nothing). Tested by
tests/unit/bench_attention/rule_common_test.py."""
import csv
import glob
import os
import re
import statistics


def max_k(config):
    """A bench row's max_seqlen_k: s of a grid row, ctx + q of a chunk row, the upper length of
    a varlen batch."""
    for pat, f in ((r" s(\d+) ", lambda m: int(m[1])), (r" q(\d+) ctx(\d+) ", lambda m: int(m[1]) + int(m[2])),
                   (r" varlen\d+-(\d+) ", lambda m: int(m[1]))):
        m = re.search(pat, config)
        if m:
            return f(m)
    return 1 << 30


def kauto(ps_max_keys):
    """kAuto's Hopper kernel on a row, the persistent form up to ps_max_keys keys."""
    return lambda k: "wgmma_ps" if max_k(k) <= ps_max_keys else "wgmma"


def kauto_v32(config, num_sms=132, full_d128_max_keys=8192, causal_d64_max_keys=4096):
    """kAuto's Hopper kernel on a bench row in v32 (kernels/attention/attention_prefill.cu:
    attention_prefill_num_splits, hopper_persistent_preferred), restated: the one-tile `wgmma`
    on a split call (row blocks of 192 queries at d64, 128 at d128, x heads x sequences fewer
    than half the SMs, with >= 8 key tiles of 128), else the persistent form `wgmma_ps` up to
    1,024 keys, and past them on grids of more tiles than SMs up to 4,096 keys,
    full_d128_max_keys at d128 without the causal mask or a window (the stream-K walk),
    causal_d64_max_keys at d64 causal without a window; the one-tile `wgmma` elsewhere."""
    keys = max_k(config)
    d = int(re.search(r" d(\d+)", config)[1])
    heads = int(re.search(r" h(\d+)", config)[1])
    m = re.search(r"^b(\d+) (?:s|q)(\d+) ", config)
    tiles = -(-int(m[2]) // (192 if d == 64 else 128)) * heads * int(m[1]) if m else 1 << 30
    if tiles < num_sms and num_sms // tiles >= 2 and -(-keys // 128) // 4 >= 2:
        return "wgmma"  # split
    if keys <= 1024:
        return "wgmma_ps"
    if tiles <= num_sms:
        return "wgmma"
    full = " full" in config and " w" not in config
    causal = " causal" in config and " w" not in config
    limit = full_d128_max_keys if d == 128 and full else causal_d64_max_keys if d == 64 and causal else 4096
    return "wgmma_ps" if keys <= limit else "wgmma"


def kauto_v33(config, num_sms=132):
    """kAuto's Hopper kernel on a bench row since v33: v32's table with every class at 4,096
    keys (the stream-K walk, d128 full, no longer kAuto's past them)."""
    return kauto_v32(config, num_sms, full_d128_max_keys=4096)


def kauto_v34(config, num_sms=132):
    """kAuto's Hopper kernel on a bench row since v34: v33's with the class grown by
    results/session51's rule_long run (d128 full to 8,192 keys, d64 causal to 16,384)."""
    return kauto_v32(config, num_sms, full_d128_max_keys=8192, causal_d64_max_keys=16384)


def persistent_class(d, base, new, base_ps_max_keys, new_ps_max_keys, max_keys=1024):
    """compare() for a change to kAuto's persistent class or walk (v27, v30): each build's
    kAuto kernel by its own class (`wgmma_ps` up to its max keys), the one-tile `wgmma` (the
    same code in both) as the control, over the rows of at most max_keys keys."""
    kb, kn = kauto(base_ps_max_keys), kauto(new_ps_max_keys)
    return compare(d, base, new, lambda b, k: (kb if b == base else kn)(k), lambda b, k: "wgmma",
                   keep=lambda k: max_k(k) <= max_keys)


def compare(d, base, new, measured, control, keep=lambda k: True):
    """Per-round ratios {row: [..]} of the measured and the control columns (each a function
    (build, row) -> impl), the rounds, printed as a table; returns (medians, control medians)
    over the rows that have every round, or None when some row lacks one."""
    # The rounds with both builds' files (a call cut short may leave a round half run).
    rounds = sorted(r for r in (int(re.search(r"_(\d+)\.csv$", f)[1])
                                for f in glob.glob(f"{d}/bench_{base}_*.csv"))
                    if os.path.exists(f"{d}/bench_{new}_{r}.csv"))
    if not rounds:
        print(f"RULE: inconclusive: no round of both bench_{base}_*.csv and bench_{new}_*.csv in {d}")
        return None

    def load(b, r):
        return {(x["config"], x["impl"]): float(x["ms"]) for x in csv.DictReader(open(f"{d}/bench_{b}_{r}.csv"))
                if x["kind"] in ("prefill", "serving")}
    runs = {(b, r): load(b, r) for b in (base, new) for r in rounds}
    rows = [k for k, i in runs[(base, rounds[0])] if i == "wgmma" and keep(k)]
    tab, ctl = {}, {}
    for k in rows:
        for r in rounds:
            h, v = runs[(base, r)], runs[(new, r)]
            for out, col in ((tab, measured), (ctl, control)):
                a, b = (k, col(base, k)), (k, col(new, k))
                if a in h and b in v:
                    out.setdefault(k, []).append(h[a] / v[b])
    print(f"rounds: {rounds}")
    print(f"| config | {base} / {new}, by round | median | control, by round | median |")
    print("|---|---|---|---|---|")
    med = lambda xs: f"{statistics.median(xs):.3f}" if xs else "n/a"
    for k in rows:
        t, c = tab.get(k, []), ctl.get(k, [])
        print(f"| {k} | {' '.join(f'{x:.3f}' for x in t)} | {med(t)} | {' '.join(f'{x:.3f}' for x in c)} | {med(c)} |")
    full = {k: statistics.median(v) for k, v in tab.items() if len(v) == len(rounds)}
    cmed = {k: statistics.median(v) for k, v in ctl.items() if len(v) == len(rounds)}
    if len(full) < len(rows) or not cmed:
        print(f"RULE: inconclusive: {len(full)} of {len(rows)} rows have all {len(rounds)} rounds")
        return None
    return full, cmed


def control_drifted(cmed):
    """Prints the control's spread; True when its rows' median leaves 0.98-1.02."""
    cmid = statistics.median(cmed.values())
    wide = [k for k, x in cmed.items() if not 0.97 <= x <= 1.03]
    print(f"controls: median {cmid:.3f}, rows {min(cmed.values()):.3f}-{max(cmed.values()):.3f}"
          + (f"; rows outside 0.97-1.03 (noise, not the rule): {', '.join(wide)}" if wide else ""))
    return not 0.98 <= cmid <= 1.02


def verdict(d, name, drifted, adopted):
    """The RULE line; DIR/adopt written when adopted."""
    if drifted:
        v = "inconclusive (controls drifted)"
    elif adopted:
        v = f"{name} adopted"
        open(f"{d}/adopt", "w").write("1")
    else:
        v = f"{name} not adopted"
    print(f"RULE: {v}")


def no_loss_and_short_causal_gain(d, name, full, cmed):
    """v28's and v29's bar (a change to the mask): every row's median >= 0.98 and the d64
    causal grid rows s512 and s1k, where the mask's share is the largest, >= 1.03 each."""
    short = {k: x for k, x in full.items() if re.match(r"b\d+ s(512|1024) h\d+ d64 causal$", k)}
    lo = min(full, key=full.get)
    print(f"all rows: median {statistics.median(full.values()):.3f}, lowest {full[lo]:.3f} ({lo})")
    print("short causal rows: " + ", ".join(f"{k} {x:.3f}" for k, x in short.items()))
    verdict(d, name, control_drifted(cmed),
            full[lo] >= 0.98 and len(short) == 2 and min(short.values()) >= 1.03)


def s512_rule(d, base, new, measured, control, bar, bar_rows=lambda k: True,
              judged=lambda k: True):
    """The s512 half of a rule (v35, v37's re-test, the stack's short region): compare() over
    the rows of at most 512 keys that judged keeps (all by default), then (drifted, passed):
    passed when the median of medians of the bf16 rows that bar_rows keeps (all by default) is
    >= bar and every judged row's median (bf16 and fp16) is >= 0.99; None when compare() found
    a row without every round."""
    res = compare(d, base, new, measured, control, keep=lambda k: max_k(k) <= 512 and judged(k))
    if not res:
        return None
    full, cmed = res
    bf16 = [k for k in full if "fp16" not in k]
    kept = [k for k in bf16 if bar_rows(k)]
    if not kept:
        print("bf16 rows: none of the bar's rows came back")
        return control_drifted(cmed), False
    mid = statistics.median(full[k] for k in kept)
    lo = min(full, key=full.get)
    which = "bf16 rows" if len(kept) == len(bf16) else f"bf16 rows ({', '.join(kept)})"
    print(f"{which}: median {mid:.3f}; all rows: lowest {full[lo]:.3f} ({lo})")
    return control_drifted(cmed), mid >= bar and full[lo] >= 0.99


def d128_full_clause(bar):
    """A long_clause for short_and_long (v43's, v50's): the d128 full rows past 512 keys (the
    stream-K walk's) must have a median >= bar; prints their medians."""
    def clause(full):
        rows = {k: x for k, x in full.items() if re.match(r"b\d+ s\d+ h\d+ d128 full$", k)}
        if not rows:
            print("d128 full rows past 512 keys: none read")
            return False
        mid = statistics.median(rows.values())
        print(f"d128 full rows past 512 keys: median {mid:.3f} (bar {bar:g}): "
              + ", ".join(f"{k} {x:.3f}" for k, x in rows.items()))
        return mid >= bar
    return clause


def short_and_long(d, base, new, short_bar, verdict_dir=None, long_clause=None,
                   short_rows=lambda k: True, judged=lambda k: True):
    """The rule of a change to the Hopper kernel's code measured on two folders (session 52's
    stack v38-v40): DIR/s512 (`--prefill --max-keys=512 --dtype both`, kAuto's `wgmma_ps`)
    and DIR/long (`--prefill --dtype bf16 --max-keys=4096`, kAuto's kernel by kauto_v34), the
    portable `mma` the control of both. Adopted if (a) the bf16 s512 rows' median of medians
    is >= short_bar and every s512 row's median (bf16 and fp16) is >= 0.99, and (b) the rows
    past 512 keys came back with >= 2 rounds, their median of medians >= 0.99 and none below
    0.97; inconclusive if either control's median leaves 0.98-1.02, if no s512 round was read,
    or if (a) passes and (b) is missing. long_clause, if given, is a further part of (b): a
    function of the rows past 512 keys' medians {row: median} that prints its reading and
    returns whether it holds. short_rows picks the s512 rows whose median meets short_bar (all
    by default; the 0.99 floor holds for every row). judged, if given, keeps the rows read in
    both regions (a change whose kernels for the other rows are the same machine code, as
    cuobjdump shows, leaves those rows out: they would measure noise). The verdict (and its
    adopt file) goes to verdict_dir, DIR by default."""
    # (No s512 rounds read: inconclusive, as a drifted control.)
    drift, a = s512_rule(f"{d}/s512", base, new, lambda b, k: "wgmma_ps", lambda b, k: "mma",
                         short_bar, short_rows, judged) or (True, False)
    rounds = len(glob.glob(f"{d}/long/bench_{new}_*.csv"))
    longer = compare(f"{d}/long", base, new, lambda b, k: kauto_v34(k), lambda b, k: "mma",
                     keep=lambda k: max_k(k) > 512 and judged(k)) if rounds >= 2 else None
    b = False
    if longer:
        full, cmed = longer
        mid = statistics.median(full.values())
        lo = min(full, key=full.get)
        print(f"past 512 keys ({rounds} rounds): median {mid:.3f}, lowest {full[lo]:.3f} ({lo})")
        drift |= control_drifted(cmed)
        b = mid >= 0.99 and full[lo] >= 0.97
        if long_clause is not None:
            b = long_clause(full) and b
    elif a:
        print(f"past 512 keys: not read ({rounds} rounds came back, 2 needed, each with every row)")
        drift = True
    out = verdict_dir or d
    os.makedirs(out, exist_ok=True)
    verdict(out, new, drift, a and b)
