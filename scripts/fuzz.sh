#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan) and runs each for SECONDS on
# a working copy of its seed corpus (tests/fuzz/corpus/<name>; new inputs stay in the build
# dir). Prints one line per target: executions, coverage, crashes. Exit 1 if any target found
# a crash (the reproducer is under $FLASHSERVE_FUZZ_BUILD/artifacts/; turn it into a unit test).
#
#   scripts/fuzz.sh [SECONDS=30] [TARGET...]   targets: gguf tokenizer chat_template request
# CI runs `scripts/fuzz.sh 20` (4 targets x 20 s). Environment: FLASHSERVE_FUZZ_BUILD (build
# dir, default build-fuzz), FLASHSERVE_FUZZ_JOBS (build jobs, default 2), FLASHSERVE_FUZZ_MODEL
# (GGUF whose BPE tokenizer fuzz_tokenizer uses; default the fetched SmolLM2 file).
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

failed=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  log="$build/fuzz_$t.log"
  set +e
  "$build/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  crashes=$(find "$artifacts" -type f | wc -l)
  echo "fuzz_$t: ${seconds}s, ${runs} executions, cov ${cov} edges, ft ${ft}, corpus $(ls "$work" | wc -l), crashes ${crashes}, exit ${rc}"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    tail -40 "$log"
  fi
done
exit "$failed"
