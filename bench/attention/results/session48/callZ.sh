#!/usr/bin/env bash
# Prepared in session 48 for the next (any Hopper GPU; carry .chunks/s48; ~330 s): does v28 (the
# Hopper consumers' mask as an interval, merged 8cbdd7b) cost the rows where no mask runs?
# A measurement, not a variant: NOTES.md "Session 48" (the d128 full one-tile rows 2-4 % under
# session 46's table in three runs, `mma` unchanged) and the prediction written there.
#   v30.txz  = 7192a6a: mainline's GPU code (v28 and v30 in);
#   v28r.txz = the head with v28's patch record reversed (`git apply -R
#              bench/attention/results/session46/v28_mask.patch`: the kernel's hunk, the mask
#              header and its CPU test), built in session 48 at 95789f2 minus v28 (GPU code
#              7192a6a's minus v28), not committed; its .commit file says "95789f2-v28".
# Gate: v28r's Hopper d128 prefill tests at full lengths (60 s); then the two alternating, five
# rounds of `attention_bench --prefill --dtype bf16`; compare_runs.py's tables for `wgmma` and
# `wgmma_ps` (best of the five runs a build; speedup = head ms / v28r ms: above 1, the build
# without v28 is faster, i.e. v28 costs that row) to $OUT/z.tgz.
# Rebuild v28r: git apply -R the patch above on the head; cmake --build build -j2 --target
#   attention_cuda_test attention_bench; scripts/gpu-bundle.sh /tmp/b/.gpu
#   build/bin/attention_{cuda_test,bench}; tar -cJf .chunks/s48/v28r.txz -C /tmp/b .gpu;
#   then git checkout the three files back.
set -u
C=${CHUNKS:-.chunks/s48}
R=/tmp/z; rm -rf "$R"; mkdir -p "$R"
for b in v30 v28r; do rm -rf "/tmp/b_$b" && mkdir -p "/tmp/b_$b" && tar -xJf "$C/$b.txz" -C "/tmp/b_$b"; done
( while sleep 30; do tar -czf "$OUT/z.tgz.part" -C /tmp z && mv "$OUT/z.tgz.part" "$OUT/z.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
LD_LIBRARY_PATH=/tmp/b_v28r/.gpu/lib:/usr/local/cuda/lib64 timeout 60 \
  /tmp/b_v28r/.gpu/bin/attention_cuda_test --gtest_filter='All/PrefillTest.*/wgmma_bf16_d128*:All/PrefillTest.*/wgmmaps_bf16_d128*' \
  > "$R/gate.txt" 2>&1
echo "gate rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$R/gate.txt" | tr '\n' ' ')"
BENCH_ARGS="--prefill --dtype bf16" BENCH_TIMEOUT=60 bench/attention/alternate_bench.sh "$R" 5 \
  head=/tmp/b_v30/.gpu v28r=/tmp/b_v28r/.gpu
for impl in wgmma wgmma_ps; do
  python3 bench/attention/compare_runs.py --base "$R"/bench_head_*.csv --new "$R"/bench_v28r_*.csv \
    --impl $impl > "$R/compare_$impl.md" 2>&1
  echo "$impl:"; grep -E 'd128 full|causal' "$R/compare_$impl.md"
done
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/z.tgz" -C /tmp z
