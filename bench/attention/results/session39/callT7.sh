#!/usr/bin/env bash
# Session 40's first call, prepared in session 39 (any Hopper GPU; carry .chunks/s39/o.txz =
# attention_cuda_test + attention_bench of branch softmax-overlap 9f28840 (v14b), .chunks/s39/m.txz
# = the bundle of 7990401 (the head's kernels), this script): 1. v14b's Hopper and auto tests at
# full lengths; 2. attention_bench --prefill --serving bf16, head and v14b alternating, two
# rounds; 3. memcheck + racecheck of v14b over four Hopper tests past 1k keys; 4. ncu of v14b's
# one-tile kernel at s4k d128 full with source counters (did the consumers' P V wait move?).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in o m; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s39/$b.txz -C /tmp/$b; done
R=$OUT/t7; mkdir -p $R
O=/tmp/o/.gpu/bin; export LD_LIBRARY_PATH=/tmp/o/.gpu/lib:/usr/local/cuda/lib64
timeout 90 $O/attention_cuda_test --gtest_filter='*wgmma*:*auto*:*Config*:*RoundQ8*' > $R/tests_o.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_o.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_o.txt | head
for r in 1 2; do
  for b in m o; do
    LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 80 /tmp/$b/.gpu/bin/attention_bench \
      --prefill --serving --dtype bf16 --csv $R/bench_${b}_$r.csv > $R/bench_${b}_$r.log 2>&1
    echo "bench $b round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_${b}_$r.log) fail lines"
  done
done
F='*/wgmma_bf16_d64_causal_gqa3_chunked:*/wgmma_bf16_d128_full_gqa8_varlen:*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $O/attention_cuda_test --gtest_filter="$F" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
timeout 60 ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
  --launch-count 1 -o /tmp/t7 $O/attention_bench --profile=4096 > $R/ncu_run.txt 2>&1
echo "ncu rc=$? $(el) s"
ncu -i /tmp/t7.ncu-rep --page details > $R/ncu_details.txt 2>&1
ncu -i /tmp/t7.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $R/ncu_source_sass.csv.gz
grep -E "Duration|Issue Slots Busy" $R/ncu_details.txt | head -3
tar -czf $OUT/t7.tgz -C $OUT t7 && rm -rf $R
echo "end $(el) s"
