#!/usr/bin/env bash
# Prepared in session 42 for a later session (any Hopper GPU; ~400 s). Bundles (git-ignored,
# rebuild them where they are missing): .chunks/s42/c.txz = attention_cuda_test +
# attention_bench at the head (1ed22d7's kernels), .chunks/s42/q.txz = the same two built with
# results/session42/v22_q_tma.patch applied to 4b55c87 (v22: Q of a whole row block by TMA,
# the tensor maps' descriptors prefetched at the kernel's start):
#   git worktree add -b q-tma ../wtq 4b55c87 && (cd ../wtq && git am <THIS_DIR>/v22_q_tma.patch)
#   cmake -S ../wtq -B ../wtq/build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build ../wtq/build -j2 --target attention_cuda_test attention_bench
#   scripts/gpu-bundle.sh /tmp/bq/.gpu ../wtq/build/bin/attention_{cuda_test,bench}
#   tar -cJf .chunks/s42/q.txz -C /tmp/bq .gpu    (and c.txz likewise from build/bin)
# 1. v22's attention tests at full lengths; 2. attention_bench --prefill --serving bf16,
# c / q alternating, two rounds; 3. memcheck + racecheck of two v22 tests past 1k queries
# (whole row blocks by TMA, the last partial one by cp.async; d128 varlen, d64 chunked).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in c q; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s42/$b.txz -C /tmp/$b; done
R=$OUT/f; mkdir -p $R
LD_LIBRARY_PATH=/tmp/q/.gpu/lib:/usr/local/cuda/lib64 timeout 120 /tmp/q/.gpu/bin/attention_cuda_test > $R/tests_q.txt 2>&1
echo "tests q rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_q.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_q.txt | head -5
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 c=/tmp/c/.gpu q=/tmp/q/.gpu
echo "bench done $(el) s"
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
bench/attention/sanitize_tests.sh $R q /tmp/q/.gpu 120 \
  "$P/wgmma_bf16_d128_full_gqa8_varlen:$P/wgmma_bf16_d64_causal_gqa3_chunked"
echo "sanitizers done $(el) s"
tar -czf $OUT/f.tgz -C $OUT f && rm -rf $R
echo "end $(el) s"
