#!/usr/bin/env bash
# (Bundles: results/session52/bundles.sh.)
# Call O (prepared in session 52, not run there: no machine started; any Hopper GPU; carry
# .chunks/s52; ~500 s): a stack of three, each against the one below (NOTES.md v38, v39, v40):
# v38 (one loop body, one softmax copy) against the head, v39 (+ the output staged by
# stmatrix) against v38, v40 (+ whole Q tiles by TMA) against v39. Bundles, each
# `bench/attention/make_bundle.sh .chunks/s52 NAME` in a tree at 4198619 or later with
# nothing applied (head), then results/session52/v38_one_loop_body.patch (v38), then
# v39_stmatrix_epilogue.patch (v39), then v40_q_by_tma.patch (v40) applied in turn:
#   1. v38's, v39's and v40's attention_cuda_test (every walk's first key tile goes through
#      the new loop; every staged output through stmatrix; whole Q tiles through TMA);
#   2. 7 rounds of `attention_bench --prefill --max-keys=512 --dtype both`, the four in turn;
#   3. 2 rounds of `--prefill --dtype bf16 --max-keys=4096`, the four in turn;
#   4. memcheck + racecheck (v40: all three changes) of the static walk at <= 512 keys and of
#      the d64 counter walk past 1k keys, 30 s a tool (timeout_s 600);
#   then rule_v38.py (head -> v38), rule_v39.py (v38 -> v39), rule_v40.py (v39 -> v40).
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_o /tmp/o && mkdir -p /tmp/o
for n in head v38 v39 v40; do mkdir -p /tmp/b_o/$n && tar -xJf "$C/$n.txz" -C /tmp/b_o/$n; done
( while sleep 20; do tar -czf "$OUT/o.tgz.part" -C /tmp o && mv "$OUT/o.tgz.part" "$OUT/o.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for n in v38 v39 v40; do
  V=/tmp/b_o/$n/.gpu
  LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/o/tests_$n.txt 2>&1
  echo "$n tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/o/tests_$n.txt | tr '\n' ' ') at $(el) s"
  grep -E '^\[  FAILED  \]' /tmp/o/tests_$n.txt | head
done
B="head=/tmp/b_o/head/.gpu v38=/tmp/b_o/v38/.gpu v39=/tmp/b_o/v39/.gpu v40=/tmp/b_o/v40/.gpu"
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=40 \
  bench/attention/alternate_bench.sh /tmp/o/s512 7 $B | tail -1
echo "s512 rounds done at $(el) s"
mkdir -p /tmp/o/long
for r in 1 2; do
  BENCH_ARGS="--prefill --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=40 \
    bench/attention/alternate_bench.sh /tmp/o/long_$r 1 $B | tail -1
  for b in head v38 v39 v40; do mv /tmp/o/long_$r/bench_${b}_1.csv /tmp/o/long/bench_${b}_$r.csv 2>/dev/null; done
done
echo "long rounds done at $(el) s"
V=/tmp/b_o/v40/.gpu
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/o v40 $V 30 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
bench/attention/sanitize_tests.sh /tmp/o v40long $V 30 '*/wgmmaps_bf16_d64_causal_gqa3_varlen'
echo "sanitizers done at $(el) s"
python3 bench/attention/results/session52/rule_v38.py /tmp/o | tee /tmp/o/rule_v38.md | grep -E "RULE|s512:|past 512|controls"
python3 bench/attention/results/session52/rule_v39.py /tmp/o | tee /tmp/o/rule_v39.md | grep -E "RULE|s512:|past 512|controls"
python3 bench/attention/results/session52/rule_v40.py /tmp/o | tee /tmp/o/rule_v40.md | grep -E "RULE|s512:|past 512|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/o.tgz" -C /tmp o
echo "end $(el) s"
