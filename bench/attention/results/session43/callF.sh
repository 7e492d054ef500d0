#!/usr/bin/env bash
# Session 43, call F (any Hopper GPU; ~500 s). Session 42's call F (v22) and v23 in one call.
# Bundles (git-ignored; rebuild where missing: a worktree at the commit, `cmake --build build
# --target attention_cuda_test attention_bench`, scripts/gpu-bundle.sh DIR/.gpu the two bins,
# tar -cJf X.txz -C DIR .gpu):
#   .chunks/s43/d.txz  72c0718 (the head's kernels and bench; session 42's call D bundle)
#   .chunks/s43/q.txz  v22: results/session42/v22_q_tma.patch on 4b55c87 (Q of whole row
#                      blocks by TMA, the descriptors prefetched)
#   .chunks/s43/e.txz  v23: results/session43/v23_end_align.patch on 1ca9209 (row blocks
#                      aligned to the sequence's end)
# 1. v22's and v23's attention tests at full lengths; 2. attention_bench --prefill --serving
# bf16, d / q / e alternating, two rounds; 3. memcheck then racecheck of v23 and v22 tests past
# 1k queries (partial first blocks: varlen 1,025 at d128, a window's chunks at d64; v22: whole
# blocks by TMA and a partial one by cp.async), in the time left.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for b in d q e; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s43/$b.txz -C /tmp/$b; done
R=$OUT/f; mkdir -p $R
for b in q e; do
  LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 120 /tmp/$b/.gpu/bin/attention_cuda_test > $R/tests_$b.txt 2>&1
  echo "tests $b rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_$b.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $R/tests_$b.txt | head -5
done
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 d=/tmp/d/.gpu q=/tmp/q/.gpu e=/tmp/e/.gpu
echo "bench done $(el) s"
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
W='All/WindowPrefillTest.MatchesReferenceWithinNaiveError'
if [[ $(el) -lt 500 ]]; then
  bench/attention/sanitize_tests.sh $R e /tmp/e/.gpu $(( (590 - $(el)) / 3 )) \
    "$P/wgmma_bf16_d128_causal_gqa8_varlen:$W/wgmma_bf16_d64_w300_chunked"
fi
if [[ $(el) -lt 540 ]]; then
  bench/attention/sanitize_tests.sh $R q /tmp/q/.gpu $(( (590 - $(el)) / 2 )) \
    "$P/wgmma_bf16_d128_full_gqa8_varlen:$P/wgmma_bf16_d64_causal_gqa3_chunked" "$P/wgmma_bf16_d128_full_gqa8_varlen"
fi
echo "end $(el) s"
