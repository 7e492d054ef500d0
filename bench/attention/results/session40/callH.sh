#!/usr/bin/env bash
# Prepared in session 40 (any Hopper GPU; carry .chunks/s40/sk.txz = attention_cuda_test +
# attention_bench of branch wg-skip 1ac8d91 (v18: each consumer warpgroup skips the key tiles
# wholly masked for its rows), .chunks/s40/d.txz = the head's kernels (f10e313), this script;
# ~420 s): 1. v18's Hopper + auto + config tests at full lengths; 2. attention_bench --prefill
# --serving bf16, head / v18 alternating, two rounds; 3. memcheck of v18 over four tests
# (racecheck over the first and the fourth) past 1k keys that take the skipping paths (d64 causal varlen and chunked, a d64 window,
# a d128 varlen batch with padded warpgroups).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in sk d; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s40/$b.txz -C /tmp/$b; done
R=$OUT/h; mkdir -p $R
B=/tmp/sk/.gpu/bin; export LD_LIBRARY_PATH=/tmp/sk/.gpu/lib:/usr/local/cuda/lib64
timeout 120 $B/attention_cuda_test --gtest_filter='*wgmma*:*auto*:*Config*:*RoundQ8*' > $R/tests_sk.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_sk.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_sk.txt | head
bench/attention/alternate_bench.sh $R 2 d=/tmp/d/.gpu sk=/tmp/sk/.gpu
echo "bench done $(el) s"
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
S="$P/wgmma_bf16_d64_causal_gqa3_varlen:$P/wgmma_bf16_d64_causal_gqa3_chunked:$P/wgmma_bf16_d128_full_gqa8_varlen"
S="$S:All/WindowPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d64_w1100_varlen"
# racecheck takes ~100 s a test past 1k keys: two of the four.
S2="$P/wgmma_bf16_d64_causal_gqa3_varlen:All/WindowPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d64_w1100_varlen"
for tool in memcheck racecheck; do
  left=$(( 575 - $(el) )); [[ $left -gt 240 ]] && left=240
  [[ $tool == racecheck ]] && S=$S2
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B/attention_cuda_test --gtest_filter="$S" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
tar -czf $OUT/h.tgz -C $OUT h && rm -rf $R
echo "end $(el) s"
