#!/usr/bin/env python3
"""What ran beside what in a traced decode step: the CSV of
`flashserve-bench-decode-step --timeline-out FILE` (one row a kernel or copy: label, start us,
end us, CUPTI stream id, CTAs, name) as Markdown tables, one set per label (weights mode,
graphs mode, N).

The main stream is the one with the most kernels (a captured graph's chain; its other
branches, the side stream's GEMM or dequantize, get stream ids of their own). Per label:
  - the span and each stream's kernels and busy time;
  - each side-stream kernel: launches, mean time, and the mean time a main-stream kernel ran
    beside it;
  - each main-stream kernel: launches and mean time alone and beside a side-stream kernel,
    which is what a kernel run "in the shadow" of another costs the critical path
    (bench/serving/NOTES.md, step 23: SmolLM2's RMSNorm 2.0 us alone, 4.3-4.9 beside the
    grouped dequantize).

    timeline_summary.py TIMELINE.csv [--out FILE.md]
"""
import argparse
import collections
import csv
import re
import sys

Kernel = collections.namedtuple("Kernel", "start end stream ctas name")


def base_name(name):
    """The kernel's own name: no return type, namespaces, template arguments or parameters
    ("void ns::(anonymous namespace)::k<(F)3, true>(P)" -> "k")."""
    name = name.replace("(anonymous namespace)", "anonymous")
    while True:  # innermost template argument lists first (they may hold casts' parentheses)
        shorter = re.sub(r"<[^<>]*>", "", name)
        if shorter == name:
            break
        name = shorter
    name = name.split("(", 1)[0].strip()
    return name.split()[-1].split("::")[-1] if name else ""


def read(path):
    """label -> [Kernel] in start order. ValueError naming the line for a malformed row."""
    steps = collections.OrderedDict()
    with open(path, newline="") as f:
        for line, row in enumerate(csv.reader(f), 1):
            if len(row) != 6:
                raise ValueError(f"{path}:{line}: {len(row)} fields, want 6")
            try:
                k = Kernel(float(row[1]), float(row[2]), int(row[3]), int(row[4]),
                           base_name(row[5]))
            except ValueError as e:
                raise ValueError(f"{path}:{line}: {e}") from None
            if k.end < k.start:
                raise ValueError(f"{path}:{line}: ends before it starts")
            steps.setdefault(row[0], []).append(k)
    for kernels in steps.values():
        kernels.sort(key=lambda k: k.start)
    return steps


def overlap(a, b):
    return max(0.0, min(a.end, b.end) - max(a.start, b.start))


def union_length(kernels):
    total, end = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k.start):
        if k.start >= end:
            total += k.end - k.start
            end = k.end
        elif k.end > end:
            total += k.end - end
            end = k.end
    return total


def mean_time(kernels):
    """The kernels' mean duration in us, 2 decimals; "-" for none."""
    return f"{sum(k.end - k.start for k in kernels) / len(kernels):.2f}" if kernels else "-"


def summarize(label, kernels):
    by_stream = collections.Counter(k.stream for k in kernels if k.ctas > 0)
    main = by_stream.most_common(1)[0][0] if by_stream else None
    on_main = [k for k in kernels if k.stream == main and k.ctas > 0]
    beside = [k for k in kernels if k.stream != main and k.ctas > 0]
    span = max(k.end for k in kernels) - min(k.start for k in kernels)
    out = [f"### {label}", "",
           f"Span {span:.1f} us; main stream {main} (its kernels' union "
           f"{union_length(on_main):.1f} us).", "",
           "| stream | kernels | busy us |", "|---|---|---|"]
    for stream, count in by_stream.most_common():
        busy = sum(k.end - k.start for k in kernels if k.stream == stream and k.ctas > 0)
        out.append(f"| {stream}{' (main)' if stream == main else ''} | {count} | {busy:.1f} |")
    out += ["", "| beside the main stream | launches | mean us | main kernels beside it, mean us |",
            "|---|---|---|---|"]
    groups = collections.OrderedDict()
    for k in beside:
        groups.setdefault(k.name, []).append(k)
    for name, ks in groups.items():
        shadow = sum(sum(overlap(k, m) for m in on_main) for k in ks) / len(ks)
        out.append(f"| {name} | {len(ks)} | {mean_time(ks)} | {shadow:.2f} |")
    out += ["", "| main-stream kernel | launches | mean us alone | launches beside another "
            "stream | mean us beside |", "|---|---|---|---|---|"]
    main_groups = collections.OrderedDict()
    for k in on_main:
        main_groups.setdefault(k.name, []).append(k)
    for name, ks in main_groups.items():
        shared = [k for k in ks if any(overlap(k, b) > 0 for b in beside)]
        alone = [k for k in ks if k not in shared]
        out.append(f"| {name} | {len(ks)} | {mean_time(alone)} | {len(shared)} | "
                   f"{mean_time(shared)} |")
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    try:
        steps = read(args.timeline)
    except (OSError, ValueError) as e:
        print(f"timeline_summary: {e}", file=sys.stderr)
        return 1
    text = "\n".join(summarize(label, kernels) for label, kernels in steps.items())
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
