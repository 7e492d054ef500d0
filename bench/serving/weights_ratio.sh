#!/usr/bin/env bash
# Native against bf16 device weights on one machine, served in alternation: the protocol of
# issue 19's ">= 0.95x the bf16 path" rows (bench/serving/RESULTS.md).
#
#   bench/serving/weights_ratio.sh BUNDLE_DIR MODEL_PATH OUT_DIR [ROUNDS]
#
# Runs bench/serving/run.sh ROUNDS times (default 2) with `--weights bf16` and then
# `--weights native` appended to SERVER_ARGS (its default: run.sh's), each into
# OUT_DIR/r<round>_<weights>/, and writes OUT_DIR/ratio.md: for every concurrency, each
# round's output tokens/s of both and their ratio (native / bf16), and the ratio of the
# rounds' sums. Alternating in one call matters: the bf16 servers' throughput moved by 3-4 %
# between two H200 machines in one session while the native ones' did not (bench/serving/
# NOTES.md, step 26), so a ratio is only a ratio within one machine's rounds. Every other
# variable of run.sh (CONCURRENCY, REQUESTS_PER_STREAM, TTFT_PROMPT_TOKENS, ...) passes
# through. With VARIANT_BUNDLE=DIR (a second build: a change against the head), each round
# also serves DIR's flashserve with `--weights native` into OUT_DIR/r<round>_variant, after
# the head's two runs, and OUT_DIR/ratio.md adds its tokens/s and its ratios to bf16 and to the
# head's native (the protocol of CONTRIBUTING.md "GPU calls" for a change to the native
# path). Exit status: 0 when every run succeeded, 1 otherwise, 2 bad usage.
set -uo pipefail
usage() { echo "usage: $0 BUNDLE_DIR MODEL_PATH OUT_DIR [ROUNDS]" >&2; exit 2; }
[[ $# -eq 3 || $# -eq 4 ]] || usage
bundle=$1 model=$2 out=$3 rounds=${4:-2}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a count >= 1, not '$rounds'" >&2; exit 2; }
variant=${VARIANT_BUNDLE:-}
[[ -z $variant || -d $variant ]] || { echo "$0: VARIANT_BUNDLE is not a directory: '$variant'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
base_args=${SERVER_ARGS:-"--max-num-seqs 256 --max-waiting 1024 --noprefix_caching"}
mkdir -p "$out"
status=0
for ((r = 1; r <= rounds; ++r)); do
  for mode in bf16 native ${variant:+variant}; do
    dir=$out/r${r}_$mode w=$mode b=$bundle
    [[ $mode == variant ]] && w=native b=$variant
    if ! SERVER_ARGS="$base_args --weights $w" "$here/run.sh" "$b" "$model" "$dir" \
        > "$dir.log" 2>&1; then
      echo "$0: run.sh failed for round $r, $b --weights $w (log: $dir.log)" >&2
      status=1
    fi
  done
done
python3 "$here/weights_ratio.py" "$out" "$rounds" ${variant:+--variant} > "$out/ratio.md" || status=1
cat "$out/ratio.md"
exit $status
