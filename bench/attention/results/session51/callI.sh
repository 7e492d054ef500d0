#!/usr/bin/env bash
# Session 51's call I (any Hopper GPU; carry .chunks/s51; ~330 s): v35 (the static walk's next
# whole tile's Q by TMA, a tile ahead) against the head (v34.txz):
#   1. v35's whole attention_cuda_test;
#   2. 7 alternating rounds of `attention_bench --prefill --max-keys=512 --dtype both`, head and
#      v35, then rule_v35.py (written before the call);
#   3. memcheck + racecheck of v35's static walk at lengths <= 512 (whole tiles, so the TMA Q
#      path), 80 s a tool;
#   4. ncu stall sampling of v35's persistent kernel at s512 d128 full (as call H's).
C=${CHUNKS:-.chunks/s51}
rm -rf .gpu /tmp/b_i /tmp/i && mkdir -p /tmp/b_i/head /tmp/b_i/v35 /tmp/i
tar -xJf "$C/v34.txz" -C /tmp/b_i/head && tar -xJf "$C/v35.txz" -C /tmp/b_i/v35
( while sleep 30; do tar -czf "$OUT/i.tgz.part" -C /tmp i && mv "$OUT/i.tgz.part" "$OUT/i.tgz"; done ) &
saver=$!
V=/tmp/b_i/v35/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/i/tests.txt 2>&1
echo "v35 tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/i/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' /tmp/i/tests.txt | head
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=60 \
  bench/attention/alternate_bench.sh /tmp/i 7 head=/tmp/b_i/head/.gpu v35=$V
python3 bench/attention/results/session51/rule_v35.py /tmp/i | tee /tmp/i/rule_v35.md | grep -E "RULE|bf16 rows|controls"
FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/i v35static $V 80 \
  '*/wgmmaps_bf16_d128_full_gqa3_varlen:*/wgmmaps_bf16_d64_causal_gqa3_varlen'
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 90 ncu --clock-control none --section SourceCounters \
  --section WarpStateStats --section SpeedOfLight --kernel-name regex:sm90_ws --launch-skip 1 --launch-count 1 \
  -f -o /tmp/i/src_d128full $V/bin/attention_bench --profile=512 > /tmp/i/ncu_d128full.log 2>&1
echo "ncu rc=$?"
ncu -i /tmp/i/src_d128full.ncu-rep --page source --csv --print-source sass > /tmp/i/src_d128full.csv 2>&1
ncu -i /tmp/i/src_d128full.ncu-rep --page details > /tmp/i/details_d128full.txt 2>&1
python3 bench/attention/ncu_source_top.py /tmp/i/src_d128full.csv 40 > /tmp/i/top_d128full.md 2>&1
head -12 /tmp/i/top_d128full.md; grep -E "Duration|Elapsed Cycles" /tmp/i/details_d128full.txt
gzip -f /tmp/i/src_d128full.csv; rm -f /tmp/i/src_d128full.ncu-rep
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/i.tgz" -C /tmp i
