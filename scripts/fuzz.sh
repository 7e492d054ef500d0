#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan) and runs each for SECONDS on
# a working copy of its seed corpus (tests/fuzz/corpus/<name>; new inputs stay in the build
# dir). Prints one line per target: executions, coverage, crashes. Exit 1 if any target found
# a crash (the reproducer is under $FLASHSERVE_FUZZ_BUILD/artifacts/; turn it into a unit test).
#
#   scripts/fuzz.sh [SECONDS=30] [TARGET...]   targets: gguf tokenizer chat_template request
# CI runs `scripts/fuzz.sh 15` (4 targets x 15 s, two at a time on its two cores).
# Environment: FLASHSERVE_FUZZ_BUILD (build dir, default build-fuzz), FLASHSERVE_FUZZ_JOBS
# (build jobs and targets run at once, default 2), FLASHSERVE_FUZZ_MODEL (GGUF whose BPE
# tokenizer fuzz_tokenizer uses; default the fetched SmolLM2 file).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-30}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf tokenizer chat_template request)
build="${FLASHSERVE_FUZZ_BUILD:-build-fuzz}"

CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${FLASHSERVE_FUZZ_JOBS:-2}" >/dev/null
export FLASHSERVE_FUZZ_MODEL="${FLASHSERVE_FUZZ_MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# One target's run; its summary line goes to $build/fuzz_$t.summary, its exit to .rc.
run_target() {
  local t=$1 work="$build/corpus/$1" artifacts="$build/artifacts/$1" log="$build/fuzz_$1.log"
  mkdir -p "$work" "$artifacts"
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  local rc=0
  "$build/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" >"$log" 2>&1 || rc=$?
  local runs cov ft crashes
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  crashes=$(find "$artifacts" -type f | wc -l)
  echo "fuzz_$t: ${seconds}s, ${runs} executions, cov ${cov} edges, ft ${ft}, corpus $(ls "$work" | wc -l), crashes ${crashes}, exit ${rc}" >"$build/fuzz_$t.summary"
  if [ "$rc" -eq 0 ] && [ "$crashes" -ne 0 ]; then rc=1; fi
  echo "$rc" >"$build/fuzz_$t.rc"
}

# The targets run side by side, FLASHSERVE_FUZZ_JOBS at a time (each is one process on one
# core, so each still gets its SECONDS of a core), then report in the order given.
jobs="${FLASHSERVE_FUZZ_JOBS:-2}"
rm -f "$build"/fuzz_*.summary "$build"/fuzz_*.rc
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  for t in "${targets[@]:i:jobs}"; do run_target "$t" & done
  wait
done
failed=0
for t in "${targets[@]}"; do
  cat "$build/fuzz_$t.summary"
  if [ "$(cat "$build/fuzz_$t.rc")" -ne 0 ]; then
    failed=1
    tail -40 "$build/fuzz_$t.log"
  fi
done
exit "$failed"
