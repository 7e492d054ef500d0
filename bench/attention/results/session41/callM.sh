#!/usr/bin/env bash
# Prepared in session 41 (any Hopper GPU; carry .chunks/s41/ts.txz = attention_cuda_test +
# attention_bench of branch tma-store 3140e70 (v20: whole 64-row output blocks stored by TMA
# from the warpgroup's Q rows, on 7e4efec), .chunks/s41/c.txz = the head 840f30c (7e4efec's kernels), this
# script; ~330 s): 1. v20's attention tests at full lengths; 2. attention_bench --prefill
# --serving bf16, c / ts alternating, two rounds; 3. memcheck and racecheck of two v20 tests
# past 1k keys (d64 and d128 causal varlen: whole and partial blocks, the staging's shared
# memory reuse).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in c ts; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s41/$b.txz -C /tmp/$b; done
R=$OUT/m; mkdir -p $R
B=/tmp/ts/.gpu/bin; export LD_LIBRARY_PATH=/tmp/ts/.gpu/lib:/usr/local/cuda/lib64
timeout 120 $B/attention_cuda_test > $R/tests_ts.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_ts.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_ts.txt | head -5
bench/attention/alternate_bench.sh $R 2 c=/tmp/c/.gpu ts=/tmp/ts/.gpu
echo "bench done $(el) s"
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
bench/attention/sanitize_tests.sh $R ts /tmp/ts/.gpu 120 \
  "$P/wgmma_bf16_d64_causal_gqa3_varlen:$P/wgmma_bf16_d128_causal_gqa3_varlen"
echo "sanitizers done $(el) s"
tar -czf $OUT/m.tgz -C $OUT m && rm -rf $R
echo "end $(el) s"
