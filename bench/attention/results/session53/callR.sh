#!/usr/bin/env bash
# Call R (session 53, for session 54; any Hopper GPU; carry .chunks/s53v; ~400 s): v43 (the
# walk's divisors made by the launcher, a kernel parameter) against v42 (the head, f98d5be's
# kernels). Bundles: `bench/attention/make_bundle.sh .chunks/s53v v42` at the head, and
# `... v43` with results/session53/v43_divisors_as_parameter.patch applied. Prediction and rule:
# NOTES.md v43 (written before the call); rule_v43.py.
#   1. v43's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 3 rounds of the whole bf16 grid `--prefill --dtype bf16` (to 16,384 keys: the d128
#      full 8k row, stream-K's, is v43's point);
#   4. memcheck + racecheck of the static walk at <= 512 keys, the d64 counter walk and the
#      d128 stream-K walk past 1k keys, 30 s a tool; then rule_v43.py.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s53v}
rm -rf .gpu /tmp/b_r /tmp/r && mkdir -p /tmp/r
for n in v42 v43; do mkdir -p /tmp/b_r/$n && tar -xJf "$C/$n.txz" -C /tmp/b_r/$n; done
( while sleep 20; do tar -czf "$OUT/r.tgz.part" -C /tmp r && mv "$OUT/r.tgz.part" "$OUT/r.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V=/tmp/b_r/v43/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/r/tests_v43.txt 2>&1
echo "v43 tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/r/tests_v43.txt | tr '\n' ' ') at $(el) s"
grep -E '^\[  FAILED  \]' /tmp/r/tests_v43.txt | head
B="v42=/tmp/b_r/v42/.gpu v43=$V"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/r/s512 7 $B | tail -1
mkdir -p /tmp/r/long
for r in 1 2 3; do
  BENCH_ARGS="--prefill --dtype bf16" BENCH_TIMEOUT=90 \
    bench/attention/alternate_bench.sh /tmp/r/long_$r 1 $B | tail -1
  for b in v42 v43; do mv /tmp/r/long_$r/bench_${b}_1.csv /tmp/r/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "rounds done at $(el) s"
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/r v43 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
bench/attention/sanitize_tests.sh /tmp/r v43long $V 30 '*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d128_full_gqa3_varlen'
python3 bench/attention/results/session53/rule_v43.py /tmp/r | tee /tmp/r/rule_v43.md | grep -E "RULE|bf16 rows|past 512|d128 full rows|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/r.tgz" -C /tmp r
echo "end $(el) s"
