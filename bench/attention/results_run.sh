#!/usr/bin/env bash
# The run behind bench/attention/RESULTS.md, sized for one device call: gpu-check's info,
# tests, bench and peers stages into OUT_DIR/check, then its sanitize-full stage into
# OUT_DIR/san with the time left before DEADLINE seconds (half of it to memcheck, half to
# racecheck; skipped under 30 s each). Prints gpu-check's summaries (the musts' lines among
# them). Binaries from .gpu/ (scripts/gpu-bundle.sh); COMMIT names them in the summaries.
#
#   bench/attention/results_run.sh OUT_DIR COMMIT [DEADLINE]     (DEADLINE default 575)
#
# Then here: RESULTS.md = a header (date, GPU, commit, what ran, the musts from
# OUT_DIR/check/summary.txt or `bench/attention/musts.py OUT_DIR/check/table.md`) + table.md.
set -u
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR COMMIT [DEADLINE]" >&2; exit 2; }
out=$1 commit=$2 deadline=${3:-575}
mkdir -p "$out"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
GIT_COMMIT=$commit TESTS_TIMEOUT=${TESTS_TIMEOUT:-90} BENCH_TIMEOUT=${BENCH_TIMEOUT:-220} \
  PEERS_TIMEOUT=${PEERS_TIMEOUT:-280} \
  scripts/gpu-check.sh "$out/check" info tests bench peers > "$out/gpu_check_stdout.txt" 2>&1
echo "gpu-check rc=$? $(el) s"
cat "$out/check/summary.txt"
left=$(( (deadline - $(el)) / 2 ))
if [[ $left -ge 30 ]]; then
  SANITIZER_FULL_TIMEOUT=$left GIT_COMMIT=$commit scripts/gpu-check.sh "$out/san" sanitize-full \
    > "$out/san_stdout.txt" 2>&1
  echo "sanitize-full rc=$? $(el) s"
  cat "$out/san/summary.txt"
else
  echo "sanitize-full skipped: ${left} s a tool left"
fi
