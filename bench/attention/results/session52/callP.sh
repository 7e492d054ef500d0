#!/usr/bin/env bash
# (Bundles: results/session52/bundles.sh.)
# Call P (prepared in session 52, not run there; any Hopper GPU; carry .chunks/s52; ~250 s):
# v41 (+ the producer's buffer waits with a suspend-time hint) against v40 (NOTES.md v41), as
# call O's steps for two bundles. v41.txz: v38's, v39's, v40's and v41_producer_sleeps.patch
# applied in turn, `bench/attention/make_bundle.sh .chunks/s52 v41`; v40.txz as call O's.
# Worth running only where v40 (or the stack below it) is kept; else rebase v41 first.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_p /tmp/p && mkdir -p /tmp/p
for n in v40 v41; do mkdir -p /tmp/b_p/$n && tar -xJf "$C/$n.txz" -C /tmp/b_p/$n; done
( while sleep 20; do tar -czf "$OUT/p.tgz.part" -C /tmp p && mv "$OUT/p.tgz.part" "$OUT/p.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V=/tmp/b_p/v41/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/p/tests_v41.txt 2>&1
echo "v41 tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/p/tests_v41.txt | tr '\n' ' ') at $(el) s"
grep -E '^\[  FAILED  \]' /tmp/p/tests_v41.txt | head
B="v40=/tmp/b_p/v40/.gpu v41=$V"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/p/s512 7 $B | tail -1
mkdir -p /tmp/p/long
for r in 1 2; do
  BENCH_ARGS="--prefill --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=40 \
    bench/attention/alternate_bench.sh /tmp/p/long_$r 1 $B | tail -1
  for b in v40 v41; do mv /tmp/p/long_$r/bench_${b}_1.csv /tmp/p/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "rounds done at $(el) s"
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/p v41 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
python3 bench/attention/results/session52/rule_v41.py /tmp/p | tee /tmp/p/rule_v41.md | grep -E "RULE|s512:|past 512|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/p.tgz" -C /tmp p
echo "end $(el) s"
