#!/usr/bin/env bash
# One device call that measures a stack of kernel variants (session 53's calls R, S and T): the
# bundles NAME.txz of CHUNKS (make_bundle.sh) unpacked, every bundle's attention_cuda_test but
# the first's, S512_ROUNDS alternating rounds of the s512 rows (both dtypes), LONG_ROUNDS
# alternating rounds of the bf16 rows past 512 keys, memcheck + racecheck of the last bundle (static walk
# at <= 512 keys; the d64 counter and d128 stream-K walks past 1k keys), then each RULE script
# on the folder. Everything goes to /tmp/CALL, tarred to $OUT/CALL.tgz every 20 s and at the
# end; the rules read CALL/s512 and CALL/long (rule_common.short_and_long's layout).
#
#   bench/attention/stack_call.sh CALL CHUNKS "BUILD BUILD..." [RULE_SCRIPT ...]
#
# LONG_ROUNDS (default 2); SAN_SHORT adds gtest cases to the <= 512-key sanitizer filter;
# LONG_BUILDS (default all the BUILDs, in order) names the builds of the long rounds and of the
# tests (each but its first; a re-test of an already tested build leaves that build out);
# BENCH_EXTRA goes to every bench run (e.g. --head-dim=64 for a change to d64's kernels only);
# S512_ROUNDS (default 7) sets the s512 rounds.
set -u
[[ $# -ge 3 ]] || { echo "usage: $0 CALL CHUNKS \"BUILD...\" [RULE_SCRIPT ...]" >&2; exit 2; }
call=$1 chunks=$2 builds=($3); shift 3
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
R=/tmp/$call B=/tmp/b_$call
rm -rf .gpu "$R" "$B" && mkdir -p "$R/long"
for n in "${builds[@]}"; do mkdir -p "$B/$n" && tar -xJf "$chunks/$n.txz" -C "$B/$n"; done
( while sleep 20; do tar -czf "$OUT/$call.tgz.part" -C /tmp "$call" && mv "$OUT/$call.tgz.part" "$OUT/$call.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
specs=()
for n in "${builds[@]}"; do specs+=("$n=$B/$n/.gpu"); done
long=(${LONG_BUILDS:-${builds[*]}})
lspecs=()
for n in "${long[@]}"; do lspecs+=("$n=$B/$n/.gpu"); done
failed=""
for n in "${long[@]:1}"; do
  V=$B/$n/.gpu
  LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > "$R/tests_$n.txt" 2>&1
  rc=$?
  echo "$n tests rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$R/tests_$n.txt" | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' "$R/tests_$n.txt" | head
  [[ $rc == 0 ]] || failed+=" $n"
done
# A build whose tests fail or hang is not adopted whatever it measures, and its bench runs may
# hang too (session 57's call Z2 spent 440 s timing out v50's): the call ends here.
if [[ -n $failed ]]; then
  echo "RULE: not adopted:$failed: tests failed or timed out; no bench ran"
  kill $saver; wait $saver 2>/dev/null
  tar -czf "$OUT/$call.tgz" -C /tmp "$call"
  exit 1
fi
BENCH_ARGS="--prefill --max-keys=512 --dtype both ${BENCH_EXTRA:-}" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh "$R/s512" "${S512_ROUNDS:-7}" "${specs[@]}" | tail -1
for r in $(seq 1 "${LONG_ROUNDS:-2}"); do
  BENCH_ARGS="--prefill --dtype bf16 --min-keys=513 ${BENCH_EXTRA:-}" BENCH_TIMEOUT=90 \
    bench/attention/alternate_bench.sh "$R/long_$r" 1 "${lspecs[@]}" | tail -1
  for n in "${long[@]}"; do mv "$R/long_$r/bench_${n}_1.csv" "$R/long/bench_${n}_$r.csv" 2>/dev/null; done
done
echo "rounds done at $(el) s"
last=${builds[-1]} V=$B/${builds[-1]}/.gpu
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh "$R" "$last" "$V" 30 \
  "*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen${SAN_SHORT:+:$SAN_SHORT}"
bench/attention/sanitize_tests.sh "$R" "${last}long" "$V" 30 \
  '*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d128_full_gqa3_varlen'
for rule in "$@"; do
  python3 "$rule" "$R" | tee "$R/$(basename "$rule" .py).md" | grep -E "RULE|bf16 rows|past 512|d128 full rows|controls"
done
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/$call.tgz" -C /tmp "$call"
echo "end $(el) s"
