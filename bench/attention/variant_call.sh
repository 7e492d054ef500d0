#!/usr/bin/env bash
# One device call that decides a kernel variant against a base build (CONTRIBUTING.md: a
# before/after rule reads a same-code control; bench/attention/NOTES.md has each variant's
# prediction and rule, written before its call):
#   1. a gate: NEW's attention_cuda_test on GATE_FILTER at full lengths (60 s; a failure ends
#      the call);
#   2. BASE / NEW alternating, ROUNDS rounds (alternate_bench.sh; BENCH_ARGS as it takes them);
#   3. RULE (a script given the folder: prints the ratios and a RULE line, writes adopt);
#   4. if adopted and RESULTS_IF_ADOPTED=1 with >= 230 s left: RESULTS.md's run of NEW
#      (results_run.sh; NEW.commit names it); if not adopted and RESULTS_ELSE_BASE=1 with
#      >= 230 s left: RESULTS.md's run of BASE (BASE.commit names it); else NEW's whole test
#      binary (120 s), then memcheck + racecheck of SAN_FILTER (sanitize_tests.sh) with the
#      time left. (RESULTS.md's run takes the whole grid: the rounds' BENCH_ARGS and
#      BENCH_TIMEOUT are unset for it; session 48's call S ran it with them, a 1,024-key bf16
#      bench and a peers stage that refused --max-keys.)
# Bundles: $CHUNKS/BASE.txz and NEW.txz (scripts/gpu-bundle.sh folders tarred: tar -cJf
# NAME.txz -C DIR .gpu; git-ignored). Everything under /tmp/NAME, tarred to $OUT/NAME.tgz
# every 30 s and at the end.
#
#   bench/attention/variant_call.sh NAME BASE NEW ROUNDS RULE GATE_FILTER SAN_FILTER [DEADLINE]
set -u
[[ $# -ge 7 ]] || { echo "usage: $0 NAME BASE NEW ROUNDS RULE GATE_FILTER SAN_FILTER [DEADLINE]" >&2; exit 2; }
name=$1 base=$2 new=$3 rounds=$4 rule=$5 gate=$6 san=$7 deadline=${8:-560}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
C=${CHUNKS:-.chunks/s47}
R=/tmp/$name; rm -rf "$R"; mkdir -p "$R"
save() { tar -czf "$OUT/$name.tgz.part" -C /tmp "$name" && mv "$OUT/$name.tgz.part" "$OUT/$name.tgz"; }
( while sleep 30; do save; done ) > /dev/null 2>&1 &
saver=$!
finish() { kill $saver 2>/dev/null; wait $saver 2>/dev/null; save; echo "end $(el) s"; exit "${1:-0}"; }
for b in "$base" "$new"; do rm -rf "/tmp/b_$b" && mkdir -p "/tmp/b_$b" && tar -xJf "$C/$b.txz" -C "/tmp/b_$b"; done
N=/tmp/b_$new/.gpu
L=$N/lib:/usr/local/cuda/lib64
LD_LIBRARY_PATH=$L timeout 60 "$N/bin/attention_cuda_test" --gtest_filter="$gate" > "$R/gate.txt" 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' "$R/gate.txt" | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then grep -E '^\[  FAILED' "$R/gate.txt" | head; tail -5 "$R/gate.txt"; finish 1; fi
BENCH_TIMEOUT=${BENCH_TIMEOUT:-110} bench/attention/alternate_bench.sh "$R" "$rounds" \
  "$base=/tmp/b_$base/.gpu" "$new=$N"
echo "bench done $(el) s"
python3 "$rule" "$R" | tee "$R/ratios.md" | grep -E '^(RULE|controls|class|all rows|short)'
save
if [[ -f $R/adopt && ${RESULTS_IF_ADOPTED:-0} == 1 && $(( deadline - $(el) )) -ge 230 ]]; then
  rm -rf .gpu && cp -r "$N" .gpu
  env -u BENCH_ARGS -u BENCH_TIMEOUT \
    bench/attention/results_run.sh "$R/r" "$(cat "$C/$new.commit")" $(( deadline - $(el) ))
  finish
fi
if [[ ! -f $R/adopt && ${RESULTS_ELSE_BASE:-0} == 1 && $(( deadline - $(el) )) -ge 230 ]]; then
  rm -rf .gpu && cp -r "/tmp/b_$base/.gpu" .gpu
  env -u BENCH_ARGS -u BENCH_TIMEOUT \
    bench/attention/results_run.sh "$R/r" "$(cat "$C/$base.commit")" $(( deadline - $(el) ))
  finish
fi
LD_LIBRARY_PATH=$L timeout 120 "$N/bin/attention_cuda_test" > "$R/tests_$new.txt" 2>&1
echo "tests $new rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED) ' "$R/tests_$new.txt" | tr '\n' ' ')" \
  "$(grep -cE '^\[  SKIPPED \] .*\(' "$R/tests_$new.txt") skipped"
grep -E '^\[  FAILED  \]' "$R/tests_$new.txt" | head
save
left=$(( (deadline - $(el)) / 2 ))
if [[ $left -ge 30 ]]; then bench/attention/sanitize_tests.sh "$R" "$new" "$N" "$left" "$san"; fi
finish
