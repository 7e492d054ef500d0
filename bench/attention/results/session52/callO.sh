#!/usr/bin/env bash
# Session 52's call O (any Hopper GPU; carry .chunks/s52; ~250 s): v38 (one loop body, one
# softmax copy; NOTES.md v38) against the head (c4f61fa; v38.txz is
# `bench/attention/make_bundle.sh .chunks/s52 v38` with the change in the tree):
#   1. its attention_cuda_test (every walk's first key tile goes through the new loop);
#   2. 7 alternating rounds of `attention_bench --prefill --max-keys=512 --dtype both`;
#   3. memcheck + racecheck of the static walk at <= 512 keys and the d64 counter walk, 40 s a tool;
#   4. rounds of `--prefill --dtype bf16 --max-keys=4096` until 230 s (the rule needs 2);
#   then rule_v38.py.
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_o /tmp/o && mkdir -p /tmp/b_o/head /tmp/b_o/v38 /tmp/o
tar -xJf "$C/head.txz" -C /tmp/b_o/head && tar -xJf "$C/v38.txz" -C /tmp/b_o/v38
( while sleep 20; do tar -czf "$OUT/o.tgz.part" -C /tmp o && mv "$OUT/o.tgz.part" "$OUT/o.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V=/tmp/b_o/v38/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/o/tests.txt 2>&1
echo "v38 tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/o/tests.txt | tr '\n' ' ') at $(el) s"
grep -E '^\[  FAILED  \]' /tmp/o/tests.txt | head
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/o/s512 7 head=/tmp/b_o/head/.gpu v38=$V | tail -1
echo "s512 rounds done at $(el) s"
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/o v38 $V 40 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
bench/attention/sanitize_tests.sh /tmp/o v38long $V 40 '*/wgmmaps_bf16_d64_causal_gqa3_varlen'
echo "sanitizers done at $(el) s"
for r in 1 2 3; do
  [[ $(el) -gt 200 ]] && break
  BENCH_ARGS="--prefill --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=40 \
    bench/attention/alternate_bench.sh /tmp/o/long_$r 1 head=/tmp/b_o/head/.gpu v38=$V | tail -1
  mkdir -p /tmp/o/long
  for b in head v38; do mv /tmp/o/long_$r/bench_${b}_1.csv /tmp/o/long/bench_${b}_$r.csv 2>/dev/null; done
done
python3 bench/attention/results/session52/rule_v38.py /tmp/o | tee /tmp/o/rule_v38.md | grep -E "RULE|s512:|past 512|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/o.tgz" -C /tmp o
echo "end $(el) s"
