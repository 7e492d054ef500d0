#!/usr/bin/env bash
# The repeat runs of RESULTS.md's prefill rows in one device call (after results_call.sh's E on
# the same machine): for each NAME, gpu-check's bench and peers stages of the bf16 prefill grid
# (`BENCH_ARGS="--prefill --dtype bf16"`, ~57 s a run on an H100) with the bundle in .gpu, into
# /tmp/NAME, tarred to $OUT/NAME.tgz. RESULTS.md's prefill musts are the median of E's table
# and these (bench/attention/musts.py E/r/check/table.md W/table.md X/table.md).
#
#   bench/attention/results_repeats.sh BUNDLE.txz COMMIT NAME...     (e.g. ... w x)
set -u
[[ $# -ge 3 ]] || { echo "usage: $0 BUNDLE.txz COMMIT NAME..." >&2; exit 2; }
bundle=$1 commit=$2; shift 2
rm -rf .gpu /tmp/b_repeats && mkdir -p /tmp/b_repeats && tar -xJf "$bundle" -C /tmp/b_repeats &&
  cp -r /tmp/b_repeats/.gpu .gpu || exit 1
for name in "$@"; do
  rm -rf "/tmp/$name"
  GIT_COMMIT=$commit BENCH_ARGS="--prefill --dtype bf16" timeout 225 \
    scripts/gpu-check.sh "/tmp/$name" bench peers > "/tmp/$name.log" 2>&1
  echo "$name rc=$?"
  mv "/tmp/$name.log" "/tmp/$name/gpu_check_stdout.txt" 2>/dev/null
  tar -czf "$OUT/$name.tgz" -C /tmp "$name"
done
