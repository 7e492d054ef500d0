#!/usr/bin/env bash
# (Bundles: results/session53/bundles.sh [.chunks/s53v] rebuilds all five from the patches.)
# Call S (session 53, for session 54, after call R; any Hopper GPU; carry .chunks/s53v; ~350
# s): v45 (whole Q row blocks by TMA, session 52's v40 rebased onto v44) against v44. Bundle:
# v45.txz with results/session53/v43_divisors_as_parameter.patch,
# v44_producer_sleeps_on_v43.patch and v45_q_by_tma_on_v44.patch applied in turn. If call R
# keeps v43 but not v44, v45 is rebased onto v43 first (v44's change is four waits). Prediction
# and rule: NOTES.md v45 (written before the call); rule_v45.py.
#   1. v45's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 2 rounds of the bf16 grid past 512 keys (`--prefill --dtype bf16 --min-keys=513`);
#   4. memcheck + racecheck of v45: the static walk at <= 512 keys, the d64 counter walk and
#      the d128 stream-K walk past 1k keys, 30 s a tool; then rule_v45.py.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s53v}
rm -rf .gpu /tmp/b_s /tmp/s && mkdir -p /tmp/s
for n in v44 v45; do mkdir -p /tmp/b_s/$n && tar -xJf "$C/$n.txz" -C /tmp/b_s/$n; done
( while sleep 20; do tar -czf "$OUT/s.tgz.part" -C /tmp s && mv "$OUT/s.tgz.part" "$OUT/s.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for n in v45; do
  V=/tmp/b_s/$n/.gpu
  LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/s/tests_$n.txt 2>&1
  echo "$n tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/s/tests_$n.txt | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' /tmp/s/tests_$n.txt | head
done
B="v44=/tmp/b_s/v44/.gpu v45=/tmp/b_s/v45/.gpu"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/s/s512 7 $B | tail -1
mkdir -p /tmp/s/long
for r in 1 2; do
  BENCH_ARGS="--prefill --dtype bf16 --min-keys=513" BENCH_TIMEOUT=90 \
    bench/attention/alternate_bench.sh /tmp/s/long_$r 1 $B | tail -1
  for b in v44 v45; do mv /tmp/s/long_$r/bench_${b}_1.csv /tmp/s/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "rounds done at $(el) s"
V=/tmp/b_s/v45/.gpu
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/s v45 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
bench/attention/sanitize_tests.sh /tmp/s v45long $V 30 '*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d128_full_gqa3_varlen'
python3 bench/attention/results/session53/rule_v45.py /tmp/s | tee /tmp/s/rule_v45.md | grep -E "RULE|bf16 rows|past 512|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/s.tgz" -C /tmp s
echo "end $(el) s"
