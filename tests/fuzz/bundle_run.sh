#!/usr/bin/env bash
# The long fuzz run, from a bundle made by scripts/fuzz-bundle.sh (which copies this file into
# the bundle as run.sh).
# Needs only bash, coreutils, awk and a Linux of the same architecture; no network.
#
#   run.sh SECONDS [JOBS=$(nproc)] [TARGET[:WORKERS]...]
#          targets: gguf tokenizer chat_template request (default: all four)
#
# Runs the targets at the same time for SECONDS, each in libFuzzer's fork mode with WORKERS
# processes (default JOBS / number of targets, at least 1), going on past crashes, timeouts and
# out-of-memory inputs so that one finding does not end the run. Each target starts from the
# bundled corpus (seeds + what earlier runs found) and grows its own under RESULTS/corpus/, so
# a second run in the same RESULTS continues the first; executions add up over the runs
# (RESULTS/history.tsv). Writes RESULTS/summary.txt (one line per target: this run's
# executions, exec/s, coverage, corpus, crashes/timeouts/ooms; the total executions over all
# runs, and whether the goal of 10M executions with 0 crashes is reached),
# RESULTS/fuzz_<target>.log and the reproducers under RESULTS/artifacts/<target>/. RESULTS is
# $FUZZ_RESULTS or the folder results/ next to this script. Exit 1 if any target crashed, timed out or
# ran out of memory.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
seconds="${1:?usage: run.sh SECONDS [JOBS] [TARGET...]}"
jobs="${2:-$(nproc)}"
shift $(( $# >= 2 ? 2 : $# ))
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(gguf tokenizer chat_template request)
default_workers=$(( jobs / ${#specs[@]} ))
[ "$default_workers" -ge 1 ] || default_workers=1
targets=()
declare -A workers
for spec in "${specs[@]}"; do
  t="${spec%%:*}"
  targets+=("$t")
  workers[$t]="$default_workers"
  [ "$spec" = "$t" ] || workers[$t]="${spec#*:}"
done
results="${FUZZ_RESULTS:-$here/results}"
goal=10000000

export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLASHSERVE_FUZZ_MODEL="$here/tokenizer.gguf"  # fuzz_tokenizer's BPE vocabulary
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

mkdir -p "$results"
for t in "${targets[@]}"; do
  [ -x "$here/bin/fuzz_$t" ] || { echo "run.sh: no target fuzz_$t in $here/bin" >&2; exit 2; }
  mkdir -p "$results/corpus/$t" "$results/artifacts/$t"
  "$here/bin/fuzz_$t" -fork="${workers[$t]}" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$results/artifacts/$t/" "$results/corpus/$t" "$here/corpus/$t" \
    >"$results/fuzz_$t.log" 2>&1 &
done
echo "run.sh: $(for t in "${targets[@]}"; do printf '%s:%s ' "$t" "${workers[$t]}"; done)for ${seconds}s; logs in $results"
wait

failed=0
: >"$results/summary.txt"
for t in "${targets[@]}"; do
  log="$results/fuzz_$t.log"
  # Fork mode's status line: #EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: O/T/K time: Ss ...
  line=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -1)
  # (Its exec/s is not executions / time in fork mode: compute that here.)
  read -r execs cov ft corp ooms timeouts crashes time < <(echo "$line" | awk '{
      gsub("#", "", $1); gsub(":", "", $1); split($11, c, "/"); gsub("s", "", $13);
      print $1, $3, $5, $7, c[1], c[2], c[3], $13 }')
  execs=${execs:-0}
  rate=$(( execs / ${time:-1} ))
  printf '%s\t%s\t%s\t%s\t%s\n' "$t" "${time:-0}" "${workers[$t]}" "$execs" "${crashes:-?}" \
    >>"$results/history.tsv"
  total=$(awk -v t="$t" '$1 == t { sum += $4 } END { print sum + 0 }' "$results/history.tsv")
  artifacts=$(find "$results/artifacts/$t" -type f | wc -l)
  verdict="goal reached"
  if [ "${crashes:-0}" != 0 ] || [ "${timeouts:-0}" != 0 ] || [ "${ooms:-0}" != 0 ] || \
     [ "$artifacts" -ne 0 ]; then
    verdict="FAILED (see $log and $results/artifacts/$t/)"
    failed=1
  elif [ "$total" -lt "$goal" ]; then
    verdict="below the goal of $goal executions"
  fi
  echo "fuzz_$t: ${time:-?}s x ${workers[$t]} workers, ${execs} executions (${rate}/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, crashes ${crashes:-?}, timeouts ${timeouts:-?}, ooms ${ooms:-?}, artifacts ${artifacts}; ${total} executions over all runs: ${verdict}" \
    | tee -a "$results/summary.txt"
done
exit "$failed"
