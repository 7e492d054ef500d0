#!/usr/bin/env bash
# Session 40, call C (any Hopper GPU; carry .chunks/s40/f.txz = attention_cuda_test +
# attention_bench of branch ps-flat 8eb0211 (v15: the consumers' flat walk, in both the one-tile
# and the persistent kernel), .chunks/s39/p.txz = v13 (branch ps-tma), .chunks/s39/m.txz = the
# head's kernels (7990401), this script): 1. v15's Hopper tests at full lengths (one-tile,
# persistent, window, config, round-q8); 2. attention_bench --prefill --serving bf16, head / v13 /
# v15 alternating, two rounds; 3. memcheck + racecheck of v15 over five tests past 1k keys
# (persistent walks of many tiles, a window, the one-tile kernel); 4. ncu of v15 at s512.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in f p m; do
  [[ $b == f ]] && src=.chunks/s40/f.txz || src=.chunks/s39/$b.txz
  rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf $src -C /tmp/$b
done
R=$OUT/c; mkdir -p $R
F=/tmp/f/.gpu/bin; export LD_LIBRARY_PATH=/tmp/f/.gpu/lib:/usr/local/cuda/lib64
timeout 150 $F/attention_cuda_test --gtest_filter='*wgmmaps*:*Persistent*:*wgmma_*:*Config*:*RoundQ8*' > $R/tests_f.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_f.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_f.txt | head
for r in 1 2; do
  for b in m p f; do
    LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 80 /tmp/$b/.gpu/bin/attention_bench \
      --prefill --serving --dtype bf16 --csv $R/bench_${b}_$r.csv > $R/bench_${b}_$r.log 2>&1
    echo "bench $b round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_${b}_$r.log) fail lines"
  done
done
P='All/PersistentPrefillTest.ManyTilesPerCtaMatchReference'
S="$P/bf16_d128_causal_chunked:$P/bf16_d64_full_varlen:*/wgmmaps_bf16_d128_causal_gqa8_varlen"
S="$S:*WindowPrefillTest*/wgmmaps_bf16_d64_w1100_chunked:*PrefillTest*/wgmma_bf16_d128_full_gqa8_varlen"
for tool in memcheck racecheck; do
  left=$(( 560 - $(el) )); [[ $left -gt 200 ]] && left=200
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $F/attention_cuda_test --gtest_filter="$S" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
if [[ $(el) -lt 540 ]]; then
  timeout $(( 575 - $(el) )) ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
    --launch-count 4 -o /tmp/c $F/attention_bench --profile=512 > $R/ncu_run.txt 2>&1
  echo "ncu rc=$? $(el) s"
  ncu -i /tmp/c.ncu-rep --page details > $R/ncu_details.txt 2>&1
  ncu -i /tmp/c.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $R/ncu_source_sass.csv.gz
  grep -E "attention_prefill|Duration" $R/ncu_details.txt | head -8
fi
tar -czf $OUT/c.tgz -C $OUT c && rm -rf $R
echo "end $(el) s"
