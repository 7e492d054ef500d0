#!/usr/bin/env bash
# Prepared in session 40 (any Hopper GPU; carry .chunks/s40/w2.txz = attention_cuda_test +
# attention_bench of branch d64-2wg 10bd295 (v17: PrefillImpl::kHopper2, 2 consumer warpgroups
# at d64), this script; ~250 s): 1. the wgmma2 tests and the wgmma / auto / config tests at full
# lengths; 2. attention_bench --prefill --serving bf16 twice (mma, wgmma, wgmma2 columns at d64);
# 3. memcheck + racecheck over two wgmma2 tests past 1k keys.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/w2 && mkdir -p /tmp/w2 && tar -xJf .chunks/s40/w2.txz -C /tmp/w2
export LD_LIBRARY_PATH=/tmp/w2/.gpu/lib:/usr/local/cuda/lib64
B=/tmp/w2/.gpu/bin; R=$OUT/g; mkdir -p $R
timeout 120 $B/attention_cuda_test --gtest_filter='*wgmma*:*auto*:*Config*:*RoundQ8*' > $R/tests_w2.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_w2.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_w2.txt | head
for r in 1 2; do
  timeout 100 $B/attention_bench --prefill --serving --dtype bf16 --csv $R/bench_w2_$r.csv > $R/bench_w2_$r.log 2>&1
  echo "bench round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_w2_$r.log) fail lines"
done
S='Hopper2/PrefillTest.*/wgmma2_bf16_d64_causal_gqa3_chunked:Hopper2/WindowPrefillTest.*/wgmma2_bf16_d64_w1100_varlen'
for tool in memcheck racecheck; do
  left=$(( 570 - $(el) )); [[ $left -gt 200 ]] && left=200
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B/attention_cuda_test --gtest_filter="$S" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
tar -czf $OUT/g.tgz -C $OUT g && rm -rf $R
echo "end $(el) s"
