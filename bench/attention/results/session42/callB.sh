#!/usr/bin/env bash
# Session 42, call B (any Hopper GPU; carry .chunks/s42/b.txz = attention_cuda_test +
# attention_bench at 1ed22d7 (v20 mainline), .chunks/s42/b.commit, this script):
# gpu-check info tests bench peers (bench/attention/RESULTS.md's run), then sanitize-full
# (which now names a split prefill test) with the time left.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf .gpu && tar -xJf .chunks/s42/b.txz
R=$OUT/b; mkdir -p $R
C=$(cut -c1-7 .chunks/s42/b.commit)
GIT_COMMIT=$C TESTS_TIMEOUT=90 BENCH_TIMEOUT=200 PEERS_TIMEOUT=260 \
  scripts/gpu-check.sh $R/check info tests bench peers > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check rc=$? $(el) s"
cat $R/check/summary.txt
left=$(( (585 - $(el)) / 2 ))
if [[ $left -gt 30 ]]; then
  SANITIZER_FULL_TIMEOUT=$left GIT_COMMIT=$C scripts/gpu-check.sh $R/san sanitize-full > $R/san_stdout.txt 2>&1
  echo "sanitize-full rc=$? $(el) s"; cat $R/san/summary.txt
fi
tar -czf $OUT/b.tgz -C $OUT b && rm -rf $R
echo "end $(el) s"
