#!/usr/bin/env bash
# Prepared in session 41 for the next session's first call (any Hopper GPU; carry
# .chunks/s41/{i,j,b,s3}.txz and this script; ~420 s): i = f21b99e (before v19), j = f9bc334
# (v19, mainline), b = branch split-pow2 29dd017 (v19b), s3 = branch stages3 bcffcdd (v21:
# three K/V stages, on b7ac86a).
# 1. v19b's and v21's attention tests at full lengths;
# 2. attention_bench --prefill --serving bf16, i / j / b / s3 alternating, two rounds
#    (v19b: the varlen rows' 3-4 % back? v21: the short rows);
# 3. memcheck + racecheck of one v19b split test and one v21 test past 1k keys.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in i j b s3; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s41/$b.txz -C /tmp/$b; done
R=$OUT/l; mkdir -p $R
for b in b s3; do
  LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 120 /tmp/$b/.gpu/bin/attention_cuda_test > $R/tests_$b.txt 2>&1
  echo "tests $b rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_$b.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $R/tests_$b.txt | head -5
done
bench/attention/alternate_bench.sh $R 2 i=/tmp/i/.gpu j=/tmp/j/.gpu b=/tmp/b/.gpu s3=/tmp/s3/.gpu
echo "bench done $(el) s"
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
for b in b s3; do
  if [[ $b == b ]]; then S='All/SplitPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d64_causal_gqa3_chunked_s8'
  else S="$P/wgmma_bf16_d128_causal_gqa3_varlen"; fi
  for tool in memcheck racecheck; do
    left=$(( 585 - $(el) )); [[ $left -gt 60 ]] && left=60
    LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout $left compute-sanitizer --tool $tool \
      --error-exitcode 9 /tmp/$b/.gpu/bin/attention_cuda_test --gtest_filter="$S" > $R/san_${b}_$tool.txt 2>&1
    echo "$b $tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_${b}_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_${b}_$tool.txt | tail -1)"
  done
done
tar -czf $OUT/l.tgz -C $OUT l && rm -rf $R
echo "end $(el) s"
