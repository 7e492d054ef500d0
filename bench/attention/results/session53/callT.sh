#!/usr/bin/env bash
# (Bundles: results/session53/bundles.sh [.chunks/s53v] rebuilds all five from the patches.)
# Call T (session 53, for session 54, after call R; any Hopper GPU; carry .chunks/s53v; ~350
# s): v46 (v38's one loop body under the causal mask only: without it the first key tile stays
# peeled) against v44. Bundle: v46.txz with results/session53/v43_divisors_as_parameter.patch,
# v44_producer_sleeps_on_v43.patch and v46_causal_one_loop_body_on_v44.patch applied in turn
# (v46 does not contain v45). If call R keeps v43 but not v44, rebase v46 onto v43 first (the
# two touch different code: v44 the producer's waits, v46 the consumers' loop). Prediction
# and rule: NOTES.md v46 (written before the call); rule_v46.py.
#   1. v46's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 2 rounds of the bf16 grid past 512 keys (`--prefill --dtype bf16 --min-keys=513`);
#   4. memcheck + racecheck of v46: the static walk at <= 512 keys (causal: the one body; full:
#      the peeled first tile), the one-tile kernel under the causal mask, the d64 counter walk
#      and the d128 stream-K walk past 1k keys, 30 s a tool; then rule_v46.py.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s53v}
rm -rf .gpu /tmp/b_t /tmp/t && mkdir -p /tmp/t
for n in v44 v46; do mkdir -p /tmp/b_t/$n && tar -xJf "$C/$n.txz" -C /tmp/b_t/$n; done
( while sleep 20; do tar -czf "$OUT/t.tgz.part" -C /tmp t && mv "$OUT/t.tgz.part" "$OUT/t.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for n in v46; do
  V=/tmp/b_t/$n/.gpu
  LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/t/tests_$n.txt 2>&1
  echo "$n tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/t/tests_$n.txt | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' /tmp/t/tests_$n.txt | head
done
B="v44=/tmp/b_t/v44/.gpu v46=/tmp/b_t/v46/.gpu"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/t/s512 7 $B | tail -1
mkdir -p /tmp/t/long
for r in 1 2; do
  BENCH_ARGS="--prefill --dtype bf16 --min-keys=513" BENCH_TIMEOUT=90 \
    bench/attention/alternate_bench.sh /tmp/t/long_$r 1 $B | tail -1
  for b in v44 v46; do mv /tmp/t/long_$r/bench_${b}_1.csv /tmp/t/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "rounds done at $(el) s"
V=/tmp/b_t/v46/.gpu
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/t v46 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d128_full_gqa3_varlen:*/wgmma_bf16_d64_causal_gqa3_chunked'
bench/attention/sanitize_tests.sh /tmp/t v46long $V 30 '*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d128_full_gqa3_varlen'
python3 bench/attention/results/session53/rule_v46.py /tmp/t | tee /tmp/t/rule_v46.md | grep -E "RULE|bf16 rows|past 512|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/t.tgz" -C /tmp t
echo "end $(el) s"
