#!/usr/bin/env bash
# Session 39, call T1 (any Hopper GPU; carry .chunks/s39/t.txz = attention_cuda_test +
# attention_bench of branch tma-producer (577f22b: K/V by TMA in the one-tile Hopper kernel),
# .chunks/s39/h.txz = attention_bench of the head f8add2e, this script):
# 1. the TMA build's Hopper prefill tests at full lengths (whole 128-key tiles need kv >= 128);
# 2. attention_bench --prefill --serving bf16, head and TMA alternating, two rounds;
# 3. ncu of the TMA build at --profile=512 (long_scoreboard prediction, NOTES 38th session);
# 4. memcheck + racecheck of the TMA build over the Hopper tests past 1k keys.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in t h; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s39/$b.txz -C /tmp/$b; done
export LD_LIBRARY_PATH=/tmp/t/.gpu/lib:/usr/local/cuda/lib64
R=$OUT/t1; mkdir -p $R
T=/tmp/t/.gpu/bin; H=/tmp/h/.gpu/bin
timeout 150 $T/attention_cuda_test --gtest_filter='*wgmma*:*auto*:*Config*:*RoundQ8*' > $R/tests_tma.txt 2>&1
echo "tests tma rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_tma.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_tma.txt | head -12
for r in 1 2; do
  for b in h t; do
    d=/tmp/$b/.gpu/bin
    LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 110 $d/attention_bench --prefill --serving \
      --dtype bf16 --csv $R/bench_${b}_$r.csv > $R/bench_${b}_$r.log 2>&1
    echo "bench $b round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_${b}_$r.log) fail lines"
  done
done
S=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
   --section ComputeWorkloadAnalysis --section SchedulerStats
   --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active')
timeout 100 ncu --clock-control none --kernel-name regex:attention_prefill_sm90 --launch-count 4 "${S[@]}" \
  $T/attention_bench --profile=512 > $R/ncu_tma_s512.txt 2>&1
echo "ncu tma rc=$? $(el) s"
grep -E "^  [a-z_]+.*\(|Duration|hmma_cycles|long_scoreboard" $R/ncu_tma_s512.txt | cut -c1-140
F='*/wgmma_bf16_d64_causal_gqa3_chunked:*/wgmma_bf16_d128_full_gqa8_varlen:*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen'
for tool in memcheck racecheck; do
  left=$(( 570 - $(el) )); [[ $left -lt 20 ]] && { echo "no time for $tool"; continue; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $T/attention_cuda_test --gtest_filter="$F" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
echo "end $(el) s"
