#!/usr/bin/env bash
# Prepared in session 46 for the next (any Hopper GPU; carry .chunks/s47 with v28.txz and
# v29.txz; ~560 s; after call Q): v29's first measurement (NOTES.md v29: prediction and rule
# written before it), against v28.
#   v28.txz = branch v28 28f9289 (results/session46/v28_mask.patch on 7deed65)
#   v29.txz = branch v29 662fbee (v29_portable_mask.patch on v28: the portable mma.sync
#             prefill's mask in the interval form, asked of each warp's rows)
# 1. a 60-s gate on v29's portable prefill tests at full lengths; 2. v28 / v29 alternating,
# three rounds of `attention_bench --prefill --serving --dtype bf16` (the `mma` column), the
# RULE line (rule_v29.py); 3. v29's whole test binary; 4. memcheck + racecheck of the portable
# kernel's tests past 1k keys with the time left to $1 (default 560). /tmp/r -> $OUT/r.tgz.
# Rebuild v29.txz: both patches on 7deed65 (or later mainline), then as callQ.sh says.
set -u
deadline=${1:-560}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
C=${CHUNKS:-.chunks/s47}
R=/tmp/r; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/r.tgz.part -C /tmp r && mv $OUT/r.tgz.part $OUT/r.tgz; done ) > /dev/null 2>&1 &
saver=$!
for b in v28 v29; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf $C/$b.txz -C /tmp/$b; done
L=/tmp/v29/.gpu/lib:/usr/local/cuda/lib64
LD_LIBRARY_PATH=$L timeout 60 /tmp/v29/.gpu/bin/attention_cuda_test \
  --gtest_filter='All/PrefillTest.*/mmasync*:All/WindowPrefillTest.*/*mma*:All/WindowPrefillTest.*/auto*' \
  > $R/gate.txt 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' $R/gate.txt | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then kill $saver; grep -E '^\[  FAILED' $R/gate.txt | head; tail -5 $R/gate.txt; tar -czf $OUT/r.tgz -C /tmp r; exit 1; fi
BENCH_TIMEOUT=110 bench/attention/alternate_bench.sh $R 3 v28=/tmp/v28/.gpu v29=/tmp/v29/.gpu
echo "bench done $(el) s"
python3 bench/attention/results/session46/rule_v29.py $R | tee $R/ratios.md
tar -czf $OUT/r.tgz -C /tmp r
LD_LIBRARY_PATH=$L timeout 120 /tmp/v29/.gpu/bin/attention_cuda_test > $R/tests_v29.txt 2>&1
echo "tests v29 rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_v29.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_v29.txt | head
tar -czf $OUT/r.tgz -C /tmp r
F='*/mmasync_bf16_d64_causal_gqa3_varlen:*/mmasync_bf16_d128_causal_gqa8_chunked'
F+=':*WindowPrefillTest*/*mma*bf16_d64_w1100_chunked'
left=$(( (deadline - $(el)) / 2 ))
if [[ $left -ge 30 ]]; then bench/attention/sanitize_tests.sh $R v29 /tmp/v29/.gpu $left "$F"; fi
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/r.tgz -C /tmp r
echo "end $(el) s"
