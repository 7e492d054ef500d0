#!/usr/bin/env bash
# Prepared in session 42 for a later session (any Hopper GPU; ~400 s, then ncu in the time left). Bundles (git-ignored,
# rebuild them where they are missing): .chunks/s42/d.txz = attention_cuda_test +
# attention_bench at 72c0718 (call D's bundle: the head's kernels and bench), .chunks/s42/q.txz = the same two built with
# results/session42/v22_q_tma.patch applied to 4b55c87 (v22: Q of a whole row block by TMA,
# the tensor maps' descriptors prefetched at the kernel's start):
#   git worktree add -b q-tma ../wtq 4b55c87 && (cd ../wtq && git am <THIS_DIR>/v22_q_tma.patch)
#   cmake -S ../wtq -B ../wtq/build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build ../wtq/build -j2 --target attention_cuda_test attention_bench
#   scripts/gpu-bundle.sh /tmp/bq/.gpu ../wtq/build/bin/attention_{cuda_test,bench}
#   tar -cJf .chunks/s42/q.txz -C /tmp/bq .gpu    (and d.txz likewise from a build at 72c0718)
# 1. v22's attention tests at full lengths; 2. attention_bench --prefill --serving bf16,
# d / q alternating, two rounds; 3. memcheck + racecheck of two v22 tests past 1k queries
# (whole row blocks by TMA, the last partial one by cp.async; d128 varlen, d64 chunked).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in d q; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s42/$b.txz -C /tmp/$b; done
R=$OUT/f; mkdir -p $R
LD_LIBRARY_PATH=/tmp/q/.gpu/lib:/usr/local/cuda/lib64 timeout 120 /tmp/q/.gpu/bin/attention_cuda_test > $R/tests_q.txt 2>&1
echo "tests q rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_q.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_q.txt | head -5
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 d=/tmp/d/.gpu q=/tmp/q/.gpu
echo "bench done $(el) s"
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
bench/attention/sanitize_tests.sh $R q /tmp/q/.gpu 120 \
  "$P/wgmma_bf16_d128_full_gqa8_varlen:$P/wgmma_bf16_d64_causal_gqa3_chunked"
echo "sanitizers done $(el) s"
# 4. (session 43, in the time left) v22's one-tile d128 kernel under ncu at s512 and s16384,
#    full set with source: fixed_share.py against session 42's call C profiles of the head.
export LD_LIBRARY_PATH=/tmp/q/.gpu/lib:/usr/local/cuda/lib64
for S in 512 16384; do
  [[ $(el) -lt 500 ]] || break
  timeout 70 ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
    --launch-count 1 -o /tmp/n$S /tmp/q/.gpu/bin/attention_bench --profile=$S > $R/ncu_full_$S.txt 2>&1
  echo "ncu full s$S rc=$? $(el) s"
  ncu -i /tmp/n$S.ncu-rep --page details > $R/details_$S.txt 2>&1
  ncu -i /tmp/n$S.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $R/source_sass_$S.csv.gz
  grep -E "Duration|Issue Slots Busy|Elapsed Cycles" $R/details_$S.txt | head -4
done
tar -czf $OUT/f.tgz -C $OUT f && rm -rf $R
echo "end $(el) s"
