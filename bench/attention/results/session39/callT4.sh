#!/usr/bin/env bash
# Session 39, call T4 (any Hopper GPU; carry .chunks/s39/p.txz = attention_cuda_test +
# attention_bench of branch ps-tma: v10c's persistent walk (git revert of 25727fe) over v12's
# TMA producer, on top of 7990401): 1. the persistent kernel's tests at full lengths; 2.
# attention_bench --prefill --serving bf16 twice (wgmma = the one-tile TMA kernel, wgmma_ps =
# the persistent one, same binary); 3. memcheck of wgmma_ps past 1k keys (racecheck and ncu
# left for a later call: device time).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/p && mkdir -p /tmp/p && tar -xJf .chunks/s39/p.txz -C /tmp/p
export LD_LIBRARY_PATH=/tmp/p/.gpu/lib:/usr/local/cuda/lib64
B=/tmp/p/.gpu/bin; R=$OUT/t4; mkdir -p $R
timeout 120 $B/attention_cuda_test --gtest_filter='*wgmmaps*:*Persistent*:*wgmma_*:*Config*' > $R/tests_ps.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_ps.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_ps.txt | head
for r in 1 2; do
  timeout 120 $B/attention_bench --prefill --serving --dtype bf16 --csv $R/bench_ps_$r.csv > $R/bench_ps_$r.log 2>&1
  echo "bench round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_ps_$r.log) fail lines"
done
F='*/wgmmaps_bf16_d64_causal_gqa3_chunked:*/wgmmaps_bf16_d128_full_gqa8_varlen:*PersistentPrefill*'
for tool in memcheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/attention_cuda_test --gtest_filter="$F" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
tar -czf $OUT/t4.tgz -C $OUT t4 && rm -rf $R
echo "end $(el) s"
