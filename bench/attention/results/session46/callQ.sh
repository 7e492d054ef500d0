#!/usr/bin/env bash
# Prepared in session 46 for the next (any Hopper GPU; carry .chunks/s47 with head.txz and
# v28.txz; ~560 s): v28's first measurement (NOTES.md v28: prediction and rule written before
# it).
#   head.txz = mainline 4f34939
#   v28.txz  = branch v28 28f9289 (results/session46/v28_mask.patch on 7deed65: the
#              consumers' mask without branches, asked of each warpgroup's rows)
# 1. a 60-s gate on v28's Hopper prefill tests at full lengths (causal, varlen, chunks,
# windows, both forms); 2. head / v28 alternating, three rounds of `attention_bench --prefill
# --serving --dtype bf16`, the RULE line (rule_v28.py); 3. v28's whole test binary; 4.
# memcheck + racecheck of gpu-check's sanitize-full tests that run the changed mask (past 1k
# keys: a causal chunk, a varlen batch, two windows, the persistent varlen) with the time
# left to $1 (default 560). /tmp/q -> $OUT/q.tgz as it goes.
# Rebuild v28.txz: `git apply bench/attention/results/session46/v28_mask.patch` on 7deed65 (or
# later mainline), cmake --build build -j2 --target attention_cuda_test attention_bench,
# scripts/gpu-bundle.sh /tmp/b/.gpu build/bin/attention_{cuda_test,bench},
# tar -cJf .chunks/s47/v28.txz -C /tmp/b .gpu (head.txz: the same at 4f34939, unpatched).
set -u
deadline=${1:-560}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
C=${CHUNKS:-.chunks/s47}
R=/tmp/q; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/q.tgz.part -C /tmp q && mv $OUT/q.tgz.part $OUT/q.tgz; done ) > /dev/null 2>&1 &
saver=$!
for b in head v28; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf $C/$b.txz -C /tmp/$b; done
L=/tmp/v28/.gpu/lib:/usr/local/cuda/lib64
LD_LIBRARY_PATH=$L timeout 60 /tmp/v28/.gpu/bin/attention_cuda_test \
  --gtest_filter='All/PrefillTest.*/wgmma*:All/WindowPrefillTest.*/*wgmma*:All/WindowPrefillTest.*/auto*:PersistentPrefillTest*' \
  > $R/gate.txt 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' $R/gate.txt | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then kill $saver; grep -E '^\[  FAILED' $R/gate.txt | head; tail -5 $R/gate.txt; tar -czf $OUT/q.tgz -C /tmp q; exit 1; fi
BENCH_TIMEOUT=110 bench/attention/alternate_bench.sh $R 3 head=/tmp/head/.gpu v28=/tmp/v28/.gpu
echo "bench done $(el) s"
python3 bench/attention/results/session46/rule_v28.py $R | tee $R/ratios.md
tar -czf $OUT/q.tgz -C /tmp q
LD_LIBRARY_PATH=$L timeout 120 /tmp/v28/.gpu/bin/attention_cuda_test > $R/tests_v28.txt 2>&1
echo "tests v28 rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_v28.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_v28.txt | head
tar -czf $OUT/q.tgz -C /tmp q
F='*/wgmma_bf16_d64_causal_gqa3_chunked:*/wgmma_bf16_d128_full_gqa8_varlen'
F+=':*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen'
F+=':*/wgmmaps_bf16_d128_causal_gqa8_varlen'
left=$(( (deadline - $(el)) / 2 ))
if [[ $left -ge 30 ]]; then bench/attention/sanitize_tests.sh $R v28 /tmp/v28/.gpu $left "$F"; fi
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/q.tgz -C /tmp q
echo "end $(el) s"
