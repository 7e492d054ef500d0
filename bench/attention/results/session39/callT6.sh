#!/usr/bin/env bash
# Session 39, call T6 (any Hopper GPU; carry .chunks/s39/r.txz = attention_cuda_test +
# attention_bench of branch skip-rescale (the head + an exact skip of O's rescale when no row of
# a warp changed its max), .chunks/s39/m.txz = the bundle of 7990401 (the head's kernels)):
# 1. the Hopper and auto prefill tests at full lengths; 2. attention_bench --prefill --serving
# bf16, head and skip-rescale alternating, two rounds each.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in r m; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s39/$b.txz -C /tmp/$b; done
R=$OUT/t6; mkdir -p $R
LD_LIBRARY_PATH=/tmp/r/.gpu/lib:/usr/local/cuda/lib64 timeout 60 /tmp/r/.gpu/bin/attention_cuda_test \
  --gtest_filter='*wgmma*:*auto*' > $R/tests_r.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_r.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_r.txt | head
for r in 1 2; do
  for b in m r; do
    LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 80 /tmp/$b/.gpu/bin/attention_bench \
      --prefill --serving --dtype bf16 --csv $R/bench_${b}_$r.csv > $R/bench_${b}_$r.log 2>&1
    echo "bench $b round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_${b}_$r.log) fail lines"
  done
done
tar -czf $OUT/t6.tgz -C $OUT t6 && rm -rf $R
echo "end $(el) s"
