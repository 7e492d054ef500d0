#!/usr/bin/env bash
# (Bundles: results/session53/bundles.sh [.chunks/s53v] rebuilds all five from the patches.)
# Call R (session 53, for session 54; any Hopper GPU; carry .chunks/s53v; ~550 s, timeout_s
# 600): v43 (the walk's divisors made by the launcher, a kernel parameter) against v42 (the
# head, f98d5be's kernels), and v44 (+ the producer's buffer waits with a suspend-time hint,
# session 52's v41 rebased onto v43) against v43. Bundles (.chunks/s53v): v42.txz is
# f98d5be's (`bench/attention/make_bundle.sh .chunks/s53v v42` at the head); v43.txz with
# results/session53/v43_divisors_as_parameter.patch applied; v44.txz with that and
# v44_producer_sleeps_on_v43.patch. Predictions and rules: NOTES.md v43, v44 (written before
# the call); rule_v43.py, rule_v44.py.
#   1. v43's and v44's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 3 rounds of the bf16 grid past 512 keys `--prefill --dtype bf16 --min-keys=513` (to
#      16,384 keys: the d128 full 8k row, stream-K's, is v43's point);
#   4. memcheck + racecheck of v44 (both changes): the static walk at <= 512 keys, the d64
#      counter walk and the d128 stream-K walk past 1k keys, 30 s a tool; then the rules.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s53v}
rm -rf .gpu /tmp/b_r /tmp/r && mkdir -p /tmp/r
for n in v42 v43 v44; do mkdir -p /tmp/b_r/$n && tar -xJf "$C/$n.txz" -C /tmp/b_r/$n; done
( while sleep 20; do tar -czf "$OUT/r.tgz.part" -C /tmp r && mv "$OUT/r.tgz.part" "$OUT/r.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for n in v43 v44; do
  V=/tmp/b_r/$n/.gpu
  LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/r/tests_$n.txt 2>&1
  echo "$n tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/r/tests_$n.txt | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' /tmp/r/tests_$n.txt | head
done
B="v42=/tmp/b_r/v42/.gpu v43=/tmp/b_r/v43/.gpu v44=/tmp/b_r/v44/.gpu"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/r/s512 7 $B | tail -1
mkdir -p /tmp/r/long
for r in 1 2 3; do
  BENCH_ARGS="--prefill --dtype bf16 --min-keys=513" BENCH_TIMEOUT=90 \
    bench/attention/alternate_bench.sh /tmp/r/long_$r 1 $B | tail -1
  for b in v42 v43 v44; do mv /tmp/r/long_$r/bench_${b}_1.csv /tmp/r/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "rounds done at $(el) s"
V=/tmp/b_r/v44/.gpu
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/r v44 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
bench/attention/sanitize_tests.sh /tmp/r v44long $V 30 '*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d128_full_gqa3_varlen'
python3 bench/attention/results/session53/rule_v43.py /tmp/r | tee /tmp/r/rule_v43.md | grep -E "RULE|bf16 rows|past 512|d128 full rows|controls"
python3 bench/attention/results/session53/rule_v44.py /tmp/r | tee /tmp/r/rule_v44.md | grep -E "RULE|bf16 rows|past 512|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/r.tgz" -C /tmp r
echo "end $(el) s"
