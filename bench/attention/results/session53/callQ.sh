#!/usr/bin/env bash
# Call Q (session 53): v42 (the walk divides by its fixed divisors as multiply-high and
# shift, kernels/attention/fast_divmod.h) against the head. Carry .chunks/s53 (head.txz as
# session 52, v42h.txz: make_bundle.sh in a tree with v42 applied). Rule and prediction:
# NOTES.md v42. Prediction (written before the call): the bf16 s512 median +0.5-1.5 %, rows
# past 512 keys 1.00 +- 0.01; rule: rule_common.short_and_long with the s512 bar 1.005.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s53}
rm -rf .gpu /tmp/b_q /tmp/q && mkdir -p /tmp/q
for n in head v42; do mkdir -p /tmp/b_q/$n && tar -xJf "$C/$n.txz" -C /tmp/b_q/$n; done
( while sleep 20; do tar -czf "$OUT/q.tgz.part" -C /tmp q && mv "$OUT/q.tgz.part" "$OUT/q.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V=/tmp/b_q/v42/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/q/tests_v42.txt 2>&1
echo "v42 tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/q/tests_v42.txt | tr '\n' ' ') at $(el) s"
grep -E '^\[  FAILED  \]' /tmp/q/tests_v42.txt | head
B="head=/tmp/b_q/head/.gpu v42=$V"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/q/s512 7 $B | tail -1
mkdir -p /tmp/q/long
for r in 1 2; do
  BENCH_ARGS="--prefill --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=40 \
    bench/attention/alternate_bench.sh /tmp/q/long_$r 1 $B | tail -1
  for b in head v42; do mv /tmp/q/long_$r/bench_${b}_1.csv /tmp/q/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "rounds done at $(el) s"
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/q v42 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
bench/attention/sanitize_tests.sh /tmp/q v42long $V 30 '*/wgmmaps_bf16_d64_causal_gqa3_varlen'
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/q.tgz" -C /tmp q
echo "end $(el) s"
