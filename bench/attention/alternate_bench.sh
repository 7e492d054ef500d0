#!/usr/bin/env bash
# Before/after timing on one GPU: runs `attention_bench --prefill --serving --dtype bf16` of
# several bundles (scripts/gpu-bundle.sh folders) in turn, ROUNDS times, so that drift of the
# machine falls on all of them alike (NOTES.md: the run-to-run spread). Writes
# OUT_DIR/bench_NAME_ROUND.csv and .log; compare with compare_runs.py.
#
#   bench/attention/alternate_bench.sh OUT_DIR ROUNDS NAME=BUNDLE_DIR [NAME=BUNDLE_DIR ...]
#
# BENCH_TIMEOUT (s, default 80) bounds each run; BENCH_ARGS replaces the bench's arguments
# (default "--prefill --serving --dtype bf16"; e.g. add --max-keys=1024 for the short rows
# only). Prints one line a run.
set -u
[[ $# -ge 3 ]] || { echo "usage: $0 OUT_DIR ROUNDS NAME=BUNDLE_DIR..." >&2; exit 2; }
out=$1 rounds=$2; shift 2
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    name=${spec%%=*} dir=${spec#*=}
    LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64 timeout "${BENCH_TIMEOUT:-80}" \
      "$dir/bin/attention_bench" ${BENCH_ARGS:---prefill --serving --dtype bf16} --csv "$out/bench_${name}_$r.csv" \
      > "$out/bench_${name}_$r.log" 2>&1
    echo "bench $name round $r rc=$? $(grep -ciE 'fail' "$out/bench_${name}_$r.log") fail lines"
  done
done
