#!/usr/bin/env bash
# Prepared in session 41 for the next session's first call (any Hopper GPU; carry
# .chunks/s41/b.txz = attention_cuda_test + attention_bench of branch split-pow2 29dd017
# (v19b), .chunks/s41/i.txz = f21b99e (before v19), .chunks/s41/j.txz = f9bc334 (v19), this
# script; ~300 s): 1. v19b's attention tests at full lengths; 2. attention_bench --prefill
# --serving bf16, i / j / b alternating, two rounds (the varlen rows: v19's 3-4 % loss gone?);
# 3. memcheck + racecheck of one v19b split test past 1k keys.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in i j b; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s41/$b.txz -C /tmp/$b; done
R=$OUT/l; mkdir -p $R
B=/tmp/b/.gpu/bin; export LD_LIBRARY_PATH=/tmp/b/.gpu/lib:/usr/local/cuda/lib64
timeout 120 $B/attention_cuda_test > $R/tests_b.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_b.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_b.txt | head
bench/attention/alternate_bench.sh $R 2 i=/tmp/i/.gpu j=/tmp/j/.gpu b=/tmp/b/.gpu
echo "bench done $(el) s"
S='All/SplitPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d64_causal_gqa3_chunked_s8'
for tool in memcheck racecheck; do
  left=$(( 580 - $(el) )); [[ $left -gt 100 ]] && left=100
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B/attention_cuda_test --gtest_filter="$S" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
tar -czf $OUT/l.tgz -C $OUT l && rm -rf $R
echo "end $(el) s"
