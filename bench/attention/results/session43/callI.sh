#!/usr/bin/env bash
# Session 43, call I (any Hopper GPU; ~300 s). Bundles (git-ignored; rebuild where missing):
#   .chunks/s43/d.txz  72c0718 (the head's kernels and bench; session 42's call D bundle)
#   .chunks/s43/p.txz  v24: results/session43/v24_l2_next.patch on the head (the next wave's
#                      CTA's Q and first K/V tiles prefetched into L2)
# 1. v24's attention tests at full lengths; 2. attention_bench --prefill --serving bf16, d / p
# alternating, two rounds; 3. memcheck + racecheck of two v24 tests past 1k queries, in the
# time left. Results tarred (a call returns only a few files).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for b in d p; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s43/$b.txz -C /tmp/$b; done
R=/tmp/i; rm -rf $R; mkdir -p $R
LD_LIBRARY_PATH=/tmp/p/.gpu/lib:/usr/local/cuda/lib64 timeout 100 /tmp/p/.gpu/bin/attention_cuda_test > $R/tests_p.txt 2>&1
echo "tests p rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_p.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_p.txt | head -5
tar -czf $OUT/i.tgz -C /tmp i
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 d=/tmp/d/.gpu p=/tmp/p/.gpu
echo "bench done $(el) s"
tar -czf $OUT/i.tgz -C /tmp i
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
if [[ $(el) -lt $(( ${1:-330} - 40 )) ]]; then
  bench/attention/sanitize_tests.sh $R p /tmp/p/.gpu $(( (${1:-330} - $(el)) / 2 )) \
    "$P/wgmma_bf16_d128_causal_gqa8_varlen:$P/wgmma_bf16_d64_full_gqa3_varlen" "$P/wgmma_bf16_d128_causal_gqa8_varlen"
fi
tar -czf $OUT/i.tgz -C /tmp i
echo "end $(el) s"
